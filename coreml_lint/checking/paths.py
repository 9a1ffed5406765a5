"""Which files a check run reads: the ``.pt2`` and ``.py`` files given, or found under the
folders given (skipping the folders no one lints)."""

from __future__ import annotations

from pathlib import Path

PROGRAM_SUFFIXES = (".pt2",)
SOURCE_SUFFIXES = (".py",)
# Folders never searched when walking a directory (files named explicitly are always linted).
EXCLUDED_DIRS = {
    ".git",
    ".hg",
    ".venv",
    "venv",
    "__pycache__",
    "node_modules",
    "build",
    "dist",
    "site-packages",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".coreml-lint-cache",  # --export's saved programs (coreml_lint/exporting/cache.py)
}


def collect_paths(paths: tuple[str, ...]) -> tuple[list[Path], list[str]]:
    """Files to lint, and one-line errors for paths that do not exist."""
    files: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.suffix in (*PROGRAM_SUFFIXES, *SOURCE_SUFFIXES)
                    and not EXCLUDED_DIRS.intersection(p.relative_to(path).parts[:-1])
                    and p.is_file()
                )
            )
        elif path.exists():
            files.append(path)
        else:
            errors.append(f"{raw}: no such file or directory")
    return files, errors
