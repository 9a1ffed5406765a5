"""Configuration: rule selection and partitioner settings, from pyproject.toml and the CLI.

``[tool.coreml-lint]`` in the nearest ``pyproject.toml``::

    [tool.coreml-lint]
    select = ["ALL"]            # codes, prefixes ("CML1") or "ALL"
    ignore = ["CML605"]
    per-file-ignores = { "legacy/*.pt2" = ["CML2"] }
    ios = 17                    # minimum deployment target the partitioner gets
    skip-ops = ["aten.gelu.default"]
    take-over-mutable-buffer = true
    take-over-constant-data = true
    lower-full-graph = false
    programs = ["models/export.py:make_programs"]   # for --export (coreml_lint/exporting)

    [[tool.coreml-lint.program]]                     # or one table per program
    module = "models/lm.py:TinyLM"
    inputs = ["int64[1, 8]", "int64[1]"]
    dynamic-shapes = [{ 1 = [1, 64] }, {}]
    ios = 18
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coreml_lint.core.errors import InputError
from coreml_lint.core.programs import ProgramDecl, declared_programs
from coreml_lint.core.settings import SUPPORTED_IOS, PartitionerSettings, setting_fields

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    partitioner: PartitionerSettings = field(default_factory=PartitionerSettings)
    programs: tuple[ProgramDecl, ...] = ()  # what ``--export`` builds (core/programs.py)
    target: str = "coreml"  # whose rules run: "coreml" (CMLnnn) or "coreai" (CAInnn)

    def is_selected(self, code: str, path: str | None = None) -> bool:
        """ruff's rule: the most specific matching selector wins; ignore wins a tie."""
        ignores = list(self.ignore)
        if path is not None:
            for pattern, codes in self.per_file_ignores.items():
                if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(Path(path).name, pattern):
                    ignores.extend(codes)
        return _best_match(code, self.select) > _best_match(code, ignores)

    def with_partitioner(self, **changes: Any) -> LintConfig:
        return replace(self, partitioner=self.partitioner.changed(**changes))


def _best_match(code: str, selectors: list[str] | tuple[str, ...]) -> int:
    best = -1
    for selector in selectors:
        selector = selector.strip().upper()
        if selector == "ALL":
            best = max(best, 0)
        elif selector and code.upper().startswith(selector):
            best = max(best, len(selector))
    return best


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(pyproject: Path | None) -> LintConfig:
    """The ``[tool.coreml-lint]`` table of a pyproject.toml, or the defaults."""
    if pyproject is None:
        return LintConfig()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{pyproject}: cannot read configuration: {exc}") from None
    table = data.get("tool", {}).get("coreml-lint", {})
    if not isinstance(table, dict):
        raise InputError(f"{pyproject}: [tool.coreml-lint] must be a table")
    return config_from_table(table, str(pyproject), root=pyproject.parent)


def config_from_table(table: dict[str, Any], label: str, root: Path | None = None) -> LintConfig:
    """A ``LintConfig`` from a ``[tool.coreml-lint]`` table; the partitioner keys come from
    the settings' own field metadata."""
    by_key = {f.metadata["config_key"]: f for f in setting_fields()}
    known = {"select", "ignore", "per-file-ignores", "programs", "program", *by_key}
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(f"{label}: unknown [tool.coreml-lint] key(s): {', '.join(unknown)}")

    def strings(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError(f"{label}: [tool.coreml-lint] {key} must be a list of strings")
        return tuple(value)

    changes: dict[str, Any] = {}
    for key, spec in by_key.items():
        if key not in table:
            continue
        value = table[key]
        if isinstance(spec.default, bool):
            if not isinstance(value, bool):
                raise InputError(f"{label}: [tool.coreml-lint] {key} must be true or false")
        elif isinstance(spec.default, tuple):
            value = strings(key)
        elif not isinstance(value, int) or isinstance(value, bool) or value not in SUPPORTED_IOS:
            choices = ", ".join(map(str, SUPPORTED_IOS))
            raise InputError(f"{label}: [tool.coreml-lint] {key} must be one of {choices}")
        changes[spec.name] = value
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise InputError(f"{label}: [tool.coreml-lint] per-file-ignores must be a table")
    return LintConfig(
        select=strings("select") or ("ALL",),
        ignore=strings("ignore"),
        per_file_ignores={str(k): tuple(v) for k, v in per_file.items()},
        partitioner=PartitionerSettings().changed(**changes),
        programs=declared_programs(table, label, root or Path.cwd()),
    )
