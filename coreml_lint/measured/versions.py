"""Which shipped table answers: tables for several releases ship side by side
(``data/behaviour*.json``); the one whose coremltools and executorch versions match the
installed (or declared, ``--target-coremltools``) ones is used, and the linter says so
when none matches.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from pathlib import Path

from coreml_lint.measured.stack import VERSIONED_PACKAGES
from coreml_lint.measured.table import DATA, TABLE_PATH, BehaviourTable, load_table

_DECLARED: dict[str, str] = {}


def declare_versions(**versions: str | None) -> None:
    """The coremltools / executorch versions the user lowers with (``check
    --target-coremltools``), when they are not the installed ones."""
    _DECLARED.clear()
    _DECLARED.update({k: v for k, v in versions.items() if v})


def target_versions() -> dict[str, str]:
    """The declared versions, else the installed ones (read from package metadata: nothing
    is imported)."""
    found = {}
    for package in VERSIONED_PACKAGES:
        if package in _DECLARED:
            found[package] = _DECLARED[package]
            continue
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def table_paths() -> list[Path]:
    """Every shipped table: ``behaviour.json`` first, then the others by name."""
    others = sorted(p for p in DATA.glob("behaviour*.json") if p != TABLE_PATH)
    return [p for p in [TABLE_PATH, *others] if p.exists()]


@cache
def _load(path: Path) -> BehaviourTable:
    return load_table(path)


def _matches(table: BehaviourTable, versions: dict[str, str]) -> bool:
    return all(table.measured_with.get(k) == v for k, v in versions.items())


def active_table() -> BehaviourTable | None:
    """The table measured on the target versions, else the default one (None when no
    table ships)."""
    paths = table_paths()
    if not paths:
        return None
    versions = target_versions()
    for path in paths:
        table = _load(path)
        if _matches(table, versions):
            return table
    return _load(paths[0])


def version_note(table: BehaviourTable | None = None) -> str | None:
    """A sentence when the table in use was measured on other versions than the target's."""
    table = table or active_table()
    if table is None:
        return None
    versions = target_versions()
    differ = {
        k: (v, table.measured_with.get(k))
        for k, v in versions.items()
        if table.measured_with.get(k) != v
    }
    if not differ:
        return None
    said = ", ".join(f"{k} {v} (table: {was})" for k, (v, was) in differ.items())
    shipped = "; ".join(_load(p).versions for p in table_paths())
    return (
        f"the measured op behaviour was not measured on {said}: CML801 applies the table "
        f"of {table.versions} (tables shipped: {shipped}); re-measure with "
        "`python -m coreml_lint.sweep`"
    )
