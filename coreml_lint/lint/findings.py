"""What a rule reports, in the shape every output format renders."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    """``error``: crashes at lowering/load or computes wrong values.
    ``warning``: CPU fallback, precision loss, a setting that does nothing.
    ``info``: worth knowing, nothing breaks."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Outcome(str, Enum):
    """What the user would meet without coreml-lint."""

    CRASH = "crash"  # an exception in to_edge_transform_and_lower / to_executorch
    LOAD_FAILURE = "load-failure"  # the .pte builds but fails to load or run
    SILENT = "silent"  # lowers, then computes wrong values or dtypes
    NO_EFFECT = "no-effect"  # a setting that changes nothing
    CPU = "cpu-fallback"


@dataclass(frozen=True)
class Location:
    """Where in the model source a finding points: from the node's stack trace."""

    path: str
    line: int
    column: int | None = None
    source_line: str | None = None


@dataclass
class Finding:
    code: str
    name: str
    severity: Severity
    outcome: Outcome
    message: str
    file: str  # the linted file: a .pt2 archive, a .py source, or "<memory>"
    node: str | None = None
    op: str | None = None
    location: Location | None = None
    fix: str | None = None
    partitioner: dict[str, Any] | None = None  # CoreMLPartitioner option changes that avoid it
    lower_fixes: bool = False  # does `coreml-lint lower` repair it automatically
    count: int = 1  # how many graph nodes from the same source line this stands for
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        data["outcome"] = self.outcome.value
        data["partitioner_code"] = partitioner_code(self.partitioner) if self.partitioner else None
        return data


def partitioner_code(options: dict[str, Any]) -> str:
    """Option changes as ``CoreMLPartitioner(...)`` code a user can paste."""
    from coreml_lint.program.placement import PartitionerSettings

    settings = PartitionerSettings(
        minimum_deployment_target=int(options.get("minimum_deployment_target", 15)),
        skip_ops_for_coreml_delegation=tuple(options.get("skip_ops_for_coreml_delegation", ())),
        take_over_mutable_buffer=bool(options.get("take_over_mutable_buffer", True)),
        take_over_constant_data=bool(options.get("take_over_constant_data", True)),
        lower_full_graph=bool(options.get("lower_full_graph", False)),
    )
    return settings.to_code()
