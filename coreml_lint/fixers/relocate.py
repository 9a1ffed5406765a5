"""A program exported on another machine names its model files by that machine's paths.

A ``.pt2`` built in CI names ``/ci/work/proj/models/vit.py`` in its nodes' stack traces;
here the project holds ``models/vit.py``. The CI checkout was the project at some folder,
so the project's file is the one whose path (from the project's root) is a tail of the
frame's path. When several are (``vit.py`` and ``models/vit.py`` both end
``/ci/work/proj/models/vit.py``), the module path of the classes the program names
(``models.vit.Block``) decides; when it cannot, nothing is chosen and the finding says so:
a fix in the wrong file is worse than none.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from coreml_lint.core.findings import Finding

# Folders that hold no model source of the project (environments, caches, VCS).
_PRUNED = frozenset({"__pycache__", "site-packages", "node_modules", "dist-packages"})
_MOST_FILES = 100_000  # a walk this long is not a project: stop looking


def relocate(findings: list[Finding], root: Path) -> list[str]:
    """Point each program finding whose model source is not a file here at the project
    file under ``root`` its path names (its merged findings too). Returns one note per
    foreign path, saying which file was chosen and why; a path that matches no file or
    several leaves its findings alone, with the reason as ``extra["not_fixed"]``."""
    foreign = [f for f in findings if _foreign(f)]
    if not foreign:
        return []
    files = _project_files(root)
    notes: dict[str, str] = {}
    for finding in foreign:
        assert finding.location is not None
        path = finding.location.path
        chosen, why = match(path, files, _modules_named(finding))
        if chosen is None:
            finding.extra.setdefault("not_fixed", why)
            continue
        local = str(root / chosen)
        for part in [finding, *finding.merged]:
            if part.location is not None and part.location.path == path:
                part.location = replace(part.location, path=local)
        notes.setdefault(path, f"note: {finding.file} names {path}, not a file here: {why}")
    return list(notes.values())


def match(path: str, files: list[Path], modules: set[str]) -> tuple[Path | None, str]:
    """The one file of ``files`` (paths relative to the project's root) that ``path`` ends
    with, and a sentence saying how it was chosen; or None and why none was."""
    parts = tuple(p for p in path.replace("\\", "/").split("/") if p)
    name = parts[-1] if parts else path
    tails = [f for f in files if len(f.parts) <= len(parts) and parts[-len(f.parts) :] == f.parts]
    if not tails:
        return (
            None,
            f"its model source {path} is not on this machine, and no file of the "
            f"project ends that path (none is {name} at the same place below the root)",
        )
    if len(tails) == 1:
        return tails[0], f"the project's {tails[0].as_posix()} (the one file that path ends with)"
    by_module = [f for f in tails if _module_of(f) in modules]
    if len(by_module) == 1:
        module = _module_of(by_module[0])
        return by_module[0], (
            f"the project's {by_module[0].as_posix()} (the file of module {module}, "
            f"which the program's classes name; {len(tails)} files end that path)"
        )
    shown = ", ".join(sorted(f.as_posix() for f in tails))
    return None, (
        f"its model source {path} is not on this machine, and {len(tails)} project files "
        f"end that path ({shown}): export here, or fix the one meant by hand"
    )


def _foreign(finding: Finding) -> bool:
    loc = finding.location
    return loc is not None and loc.path.endswith(".py") and not Path(loc.path).is_file()


def _modules_named(finding: Finding) -> set[str]:
    """The Python modules of the classes in the finding's module stacks (``models.vit``
    for ``models.vit.Block``), torch's left out."""
    found = set()
    for part in [finding, *finding.merged]:
        for _, cls in part.extra.get("modules") or []:
            module = str(cls).rpartition(".")[0]
            if module and not module.startswith("torch.") and module != "__main__":
                found.add(module)
    return found


def _module_of(file: Path) -> str:
    """``models.vit`` for ``models/vit.py``, ``models`` for ``models/__init__.py``."""
    parts = list(file.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_files(root: Path) -> list[Path]:
    """The ``.py`` files below ``root``, relative to it, hidden folders and installed
    packages left out."""
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _PRUNED)
        base = Path(folder).relative_to(root)
        found.extend(base / n for n in sorted(names) if n.endswith(".py"))
        if len(found) > _MOST_FILES:
            break
    return found
