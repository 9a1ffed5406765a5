"""The ``CoreMLPartitioner`` settings that change what lowering does: the one definition.

Every place that deals with these settings derives from the field metadata here: the CLI
options (``cli/options.py``), the ``[tool.coreml-lint]`` keys (``core/config.py``), the JSON
advice, the ``CoreMLPartitioner(...)`` code printed for users, and the keyword arguments the
lowering step passes to the real partitioner. A new setting is one new field.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

SUPPORTED_IOS = (15, 16, 17, 18)
DEFAULT_IOS = 15  # the partitioner's default opset when no compile spec names a target


def _setting(default: Any, *, key: str, flag: str, help: str) -> Any:
    """A settings field: ``key`` is its ``[tool.coreml-lint]`` key, ``flag`` its CLI option
    (``--skip-op`` takes several values; a bool gets a ``--no-`` twin)."""
    return field(default=default, metadata={"config_key": key, "flag": flag, "help": help})


@dataclass(frozen=True)
class PartitionerSettings:
    """What the user lowers with. ``minimum_deployment_target`` is an iOS major version (it
    reaches the partitioner through ``compile_specs``); the rest are ``CoreMLPartitioner``
    keyword arguments of the same name."""

    minimum_deployment_target: int = _setting(
        DEFAULT_IOS,
        key="ios",
        flag="--ios",
        help="minimum_deployment_target, as an iOS major version (15-18).",
    )
    skip_ops_for_coreml_delegation: tuple[str, ...] = _setting(
        (),
        key="skip-ops",
        flag="--skip-op",
        help="skip_ops_for_coreml_delegation entry (repeatable, or comma-separated).",
    )
    take_over_mutable_buffer: bool = _setting(
        True,
        key="take-over-mutable-buffer",
        flag="--take-over-mutable-buffer",
        help="Let Core ML own mutable buffers as state (the partitioner's default).",
    )
    take_over_constant_data: bool = _setting(
        True,
        key="take-over-constant-data",
        flag="--take-over-constant-data",
        help="Let Core ML own parameters and buffers as constants (the default).",
    )
    lower_full_graph: bool = _setting(
        False,
        key="lower-full-graph",
        flag="--lower-full-graph",
        help="Require every op to be delegated (the partitioner raises otherwise).",
    )

    def __post_init__(self) -> None:
        if self.minimum_deployment_target not in SUPPORTED_IOS:
            raise ValueError(f"minimum_deployment_target must be one of {SUPPORTED_IOS}")
        object.__setattr__(
            self,
            "skip_ops_for_coreml_delegation",
            tuple(dict.fromkeys(self.skip_ops_for_coreml_delegation)),
        )

    def changed(self, **changes: Any) -> PartitionerSettings:
        """A copy with ``changes`` (names are the field names; lists become tuples)."""
        clean = {k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()}
        return replace(self, **clean)

    def merged(self, advice: dict[str, Any]) -> PartitionerSettings:
        """These settings with one finding's advice applied: skip entries are added, the
        target only rises, and a take-over or full-graph flag only turns off."""
        skip = [*self.skip_ops_for_coreml_delegation, *advice.get(SKIP, ())]
        return self.changed(
            skip_ops_for_coreml_delegation=skip,
            minimum_deployment_target=max(
                self.minimum_deployment_target,
                advice.get(TARGET, self.minimum_deployment_target),
            ),
            take_over_mutable_buffer=self.take_over_mutable_buffer
            and advice.get("take_over_mutable_buffer", True),
            take_over_constant_data=self.take_over_constant_data
            and advice.get("take_over_constant_data", True),
            lower_full_graph=self.lower_full_graph and advice.get("lower_full_graph", True),
        )

    def to_json(self) -> dict[str, Any]:
        """Every setting by its field name (the ``CoreMLPartitioner`` keyword, and the target
        as an iOS major version)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data[SKIP] = list(self.skip_ops_for_coreml_delegation)
        return data

    def differences(self, base: PartitionerSettings | None = None) -> dict[str, Any]:
        """The settings that differ from ``base`` (the defaults when None), as JSON."""
        base = base or PartitionerSettings()
        mine, theirs = self.to_json(), base.to_json()
        return {k: v for k, v in mine.items() if v != theirs[k]}

    def partitioner_kwargs(self) -> dict[str, Any]:
        """``CoreMLPartitioner`` keyword arguments, less the target (which travels in
        ``compile_specs``, built by the lowering step where coremltools is imported)."""
        data = self.to_json()
        data.pop(TARGET)
        return data

    def to_code(self) -> str:
        """The settings as ``CoreMLPartitioner(...)`` code a user can paste."""
        parts = []
        for key, value in self.differences().items():
            if key == TARGET:
                parts.append(
                    "compile_specs=CoreMLBackend.generate_compile_specs("
                    f"minimum_deployment_target=ct.target.iOS{value})"
                )
            else:
                parts.append(f"{key}={value!r}")
        return f"CoreMLPartitioner({', '.join(parts)})"


SKIP = "skip_ops_for_coreml_delegation"
TARGET = "minimum_deployment_target"


def setting_fields() -> tuple[Any, ...]:
    """The dataclass fields, with their ``config_key``/``flag``/``help`` metadata."""
    return fields(PartitionerSettings)
