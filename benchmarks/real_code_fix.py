"""Run the source rules and ``--fix --unsafe-fixes`` over copies of real packages.

Run by hand (it copies each package to a temporary folder first; nothing installed is
touched):

    .venv/bin/python benchmarks/real_code_fix.py torch executorch coremltools transformers

For each package it prints the files linted, findings, fixes applied, files changed,
per-file errors (syntax errors in fixture files and the like), internal crashes (must be
0), whether every changed file still compiles, whether a second ``--fix`` changes nothing,
and the peak memory of the whole run.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from coreml_lint.core.config import LintConfig
from coreml_lint.fixers.session import FixSession


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*.py") if p.is_file()}


def run(package: str) -> dict[str, object]:
    spec = importlib.util.find_spec(package)  # a namespace package (executorch) has no __file__
    source = Path(next(iter(spec.submodule_search_locations)))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / package
        shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns("*.so", "*.pyc"))
        files = sorted(p for p in copy.rglob("*.py") if p.is_file())
        before = snapshot(copy)
        start = time.perf_counter()
        session = FixSession(LintConfig(), unsafe=True, write=True)
        outcomes = session.fix_files([(path, None) for path in files])
        elapsed = time.perf_counter() - start
        errors = [o.error for o in outcomes if o.error]
        results = [o.result for o in outcomes if o.result is not None]
        after = snapshot(copy)
        changed = [p for p in files if before[p] != after[p]]
        compiles = 0
        for path in changed:
            compile(after[path], str(path), "exec")
            compiles += 1
        crashes = [e for e in errors if "internal error" in e]
        session.fix_files([(path, None) for path in files])
        stable = snapshot(copy) == after
        return {
            "package": package,
            "files": len(files),
            "fixes applied": sum(len(r.applied) for r in results),
            "files changed": len(changed),
            "findings left": sum(len(o.findings) for o in outcomes),
            "per-file errors": len(errors) - len(crashes),
            "internal crashes": len(crashes),
            "changed files that compile": f"{compiles}/{len(changed)}",
            "second --fix changes nothing": stable,
            "seconds": round(elapsed, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "packages", nargs="*", default=["torch", "executorch", "coremltools", "transformers"]
    )
    for package in parser.parse_args().packages:
        if importlib.util.find_spec(package) is None:
            sys.exit(f"error: package {package!r} is not installed")
        print(run(package), flush=True)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"peak memory: this process {own:.0f} MiB (it holds two snapshots of every file), "
        f"largest worker {child:.0f} MiB, sum {own + child:.0f} MiB"
    )


if __name__ == "__main__":
    main()
