"""Source lint speed on real code: every .py file of the installed torch package.

Run by hand, in one go (numbers vary with the machine; ratios are what to read):

    .venv/bin/python benchmarks/bench_source_lint.py [--torchfix /path/to/venv/bin/torchfix]

It times, on the same tree: ``coreml-lint`` (source rules, all cores), ``ruff check --select
ALL --no-cache``, and, when given, TorchFix 0.7.0 (no ``--fix``) on the first 185 files.
Target: coreml-lint at most 2x ruff's wall time on the whole tree.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(command: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--torchfix", help="path to a torchfix 0.7.0 executable")
    args = parser.parse_args()
    import torch

    tree = Path(torch.__file__).parent
    files = sorted(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    bin_dir = Path(sys.executable).parent
    lint = wall(
        [str(bin_dir / "coreml-lint"), str(tree), "--isolated", "--output-format", "concise"]
    )
    ruff = shutil.which("ruff", path=str(bin_dir)) or "ruff"
    ruff_time = wall(
        [ruff, "check", "--select", "ALL", "--no-cache", "--isolated", "--exit-zero", str(tree)]
    )
    print(f"torch tree: {len(files)} files, {lines / 1e6:.2f} M lines")
    print(f"coreml-lint (source rules):           {lint:6.2f} s")
    print(f"ruff check --select ALL --no-cache:   {ruff_time:6.2f} s")
    print(f"coreml-lint / ruff:                   {lint / ruff_time:6.2f}x (target <= 2x)")
    if args.torchfix:
        with tempfile.TemporaryDirectory() as tmp:
            subset = files[:185]
            for i, path in enumerate(subset):
                shutil.copy(path, Path(tmp) / f"f{i}.py")
            tf = wall([args.torchfix, tmp])
            ours = wall([str(bin_dir / "coreml-lint"), tmp, "--isolated"])
        print(f"TorchFix 0.7.0 on 185 files:          {tf:6.2f} s")
        print(f"coreml-lint on the same 185 files:    {ours:6.2f} s")


if __name__ == "__main__":
    main()
