"""The export cache, ``.coreml-lint-cache/`` next to the pyproject.toml (gitignored, as
ruff's ``.ruff_cache/``).

Each declaration's entry is keyed by the hash of the source files its last export's stack
traces went through (and the declaring file), the declaration itself, and the versions of
the installed distributions the export imported (torch, transformers, ...). Working the key
out reads those files and the distributions' metadata and nothing else: no torch, no model
code, so a commit that changes none of them costs a hash of a few files.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from coreml_lint.core.files import write_atomically
from coreml_lint.core.programs import ProgramDecl
from coreml_lint.core.version import __version__

CACHE_DIR = ".coreml-lint-cache"
FORMAT = 2  # 2: the imported distributions' versions are in the key


@dataclass
class CachedProgram:
    name: str
    file: str  # the .pt2, relative to the cache folder
    grad: dict[str, bool] = field(default_factory=dict)  # leaf requires_grad (CML204)


@dataclass
class Entry:
    """What the last export of one declaration left."""

    key: str
    sources: list[str]
    programs: list[CachedProgram] = field(default_factory=list)
    failure: dict[str, Any] | None = None  # CML002's fields, when it failed
    distributions: list[str] = field(default_factory=list)  # installed ones it imported

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "sources": self.sources,
            "programs": [vars(p) for p in self.programs],
            "failure": self.failure,
            "distributions": self.distributions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        return cls(
            key=str(data["key"]),
            sources=[str(s) for s in data["sources"]],
            programs=[CachedProgram(**p) for p in data.get("programs", [])],
            failure=data.get("failure"),
            distributions=[str(d) for d in data.get("distributions", [])],
        )


def versions() -> str:
    """The stack an export depends on, read from package metadata (no import)."""
    parts = [f"python {sys.version_info[:3]}", f"coreml-lint {__version__}"]
    for package in ("torch",):
        try:
            parts.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package} missing")
    return "; ".join(parts)


def content_key(decl: ProgramDecl, sources: list[str], distributions: list[str] = ()) -> str | None:
    """The key of ``decl`` built from ``sources`` and ``distributions`` as they are now;
    None when one of the sources is gone (the program must be exported again)."""
    digest = hashlib.sha256(f"{FORMAT}\n{decl.identity()}\n{versions()}\n".encode())
    for dist in sorted(set(distributions)):
        try:
            digest.update(f"{dist} {metadata.version(dist)}\n".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{dist} missing\n".encode())
    for source in sorted(set(sources)):
        try:
            data = Path(source).read_bytes()
        except OSError:
            return None
        digest.update(f"{source}\n".encode())
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()


class ExportCache:
    """The index (one JSON file) and the saved programs of one project."""

    def __init__(self, root: Path) -> None:
        self.folder = root / CACHE_DIR / "export"
        self.index_path = self.folder / "index.json"
        self._index: dict[str, Any] | None = None

    @staticmethod
    def slot(decl: ProgramDecl) -> str:
        return hashlib.sha256(decl.identity().encode()).hexdigest()[:16]

    def index(self) -> dict[str, Any]:
        if self._index is None:
            try:
                data = json.loads(self.index_path.read_text(encoding="utf-8"))
                usable = data.get("format") == FORMAT and isinstance(data.get("entries"), dict)
                self._index = data if usable else {}
            except (OSError, ValueError, AttributeError):
                self._index = {}  # no cache, or a damaged one: export again
        return self._index

    def entry(self, decl: ProgramDecl) -> Entry | None:
        raw = self.index().get("entries", {}).get(self.slot(decl))
        try:
            return Entry.from_json(raw) if raw else None
        except (KeyError, TypeError, ValueError):
            return None

    def read(self, program: CachedProgram) -> bytes | None:
        try:
            return (self.folder / program.file).read_bytes()
        except OSError:
            return None

    def store(self, decl: ProgramDecl, entry: Entry, blobs: dict[str, bytes]) -> None:
        """Write the programs' archives, then the index that names them."""
        self.folder.mkdir(parents=True, exist_ok=True)
        ignore = self.folder.parent / ".gitignore"
        if not ignore.exists():
            write_atomically(ignore, "# Automatically created by coreml-lint.\n*\n")
        for program in entry.programs:
            write_atomically(self.folder / program.file, blobs[program.name], keep_mode=False)
        index = self.index()
        index["format"] = FORMAT
        index.setdefault("entries", {})[self.slot(decl)] = entry.to_json()
        write_atomically(self.index_path, json.dumps(index, indent=1), keep_mode=False)
        self._drop_unreferenced(index)

    def _drop_unreferenced(self, index: dict[str, Any]) -> None:
        """Archives no entry names any more (an older export of a changed model)."""
        named = {
            program.get("file")
            for entry in index.get("entries", {}).values()
            for program in entry.get("programs", [])
        }
        for archive in self.folder.glob("*.pt2"):
            if archive.name not in named:
                archive.unlink(missing_ok=True)
