"""Which stack a measurement belongs to: the installed torch, executorch and coremltools
versions (read from package metadata, nothing imported), and the per-stack cache folder
where ``check --measure`` keeps what it measured on this machine.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

VERSIONED_PACKAGES = ("coremltools", "executorch")

STACK = ("torch", *VERSIONED_PACKAGES)


def installed_versions() -> dict[str, str]:
    return versions_of(STACK)


def versions_of(packages: tuple[str, ...], missing: str | None = None) -> dict[str, str]:
    """Package -> installed version, from metadata (nothing imported); a package not
    installed is left out, or given ``missing``."""
    found = {}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            if missing is not None:
                found[package] = missing
    return found


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/coreml-lint/measured/<stack>`` (``~/.cache`` without it)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    versions = installed_versions()
    stack = "-".join(f"{p}{versions.get(p, 'none')}" for p in STACK)
    return root / "coreml-lint" / "measured" / re.sub(r"[^\w.+-]", "_", stack)
