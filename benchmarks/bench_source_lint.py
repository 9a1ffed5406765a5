"""Source lint speed on real code: every .py file of the installed torch package, against
ruff on the same tree in the same run.

Run by hand (numbers vary with the machine and its load; read the ratios, which are taken
within one repetition, the two tools run back to back in alternating order):

    .venv/bin/python benchmarks/bench_source_lint.py [--repeat 5] [--torchfix PATH]

Each repetition times ``coreml-lint TREE`` (source rules, every core, start-up included)
and ``ruff check --select ALL --no-cache --quiet TREE`` (every core; ``--quiet``, since
printing its 280k findings would slow ruff down and flatter the ratio). Both run with
``--isolated``, so no configuration file changes what they do. Target: coreml-lint at or
below ruff's wall time. ``--torchfix`` also times TorchFix 0.7.0 (no ``--fix``) on the
first 185 files.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], cwd: Path | None = None) -> tuple[float, float]:
    """Wall and CPU time (user + system, children included) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--torchfix", help="path to a torchfix 0.7.0 executable")
    args = parser.parse_args()
    import torch

    tree = Path(torch.__file__).parent
    files = sorted(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    bin_dir = Path(sys.executable).parent
    ruff = shutil.which("ruff", path=str(bin_dir)) or "ruff"
    ours = [str(bin_dir / "coreml-lint"), str(tree), "--isolated", "--output-format", "concise"]
    theirs = [ruff, "check", "--select", "ALL", "--no-cache", "--quiet", "--isolated", str(tree)]
    print(f"torch tree: {len(files)} .py files, {lines / 1e6:.2f} M lines")
    print("rep   coreml-lint wall  cpu     ruff wall  cpu     wall ratio  cpu ratio")
    ratios = []
    for rep in range(1, args.repeat + 1):
        if rep % 2:
            lint, other = timed(ours), timed(theirs)
        else:
            other, lint = timed(theirs), timed(ours)
        ratios.append(lint[0] / other[0])
        print(
            f"{rep:3d}   {lint[0]:15.2f} {lint[1]:5.2f}   {other[0]:9.2f} {other[1]:5.2f}"
            f"   {lint[0] / other[0]:10.2f} {lint[1] / other[1]:10.2f}",
            flush=True,
        )
    print(
        f"coreml-lint / ruff wall time: median {statistics.median(ratios):.2f}x, "
        f"worst {max(ratios):.2f}x (target <= 1x)"
    )
    if args.torchfix:
        with tempfile.TemporaryDirectory() as tmp:
            subset = files[:185]
            for i, path in enumerate(subset):
                shutil.copy(path, Path(tmp) / f"f{i}.py")
            tf = timed([args.torchfix, tmp])[0]
            small = timed([str(bin_dir / "coreml-lint"), tmp, "--isolated"])[0]
        print(f"TorchFix 0.7.0 on 185 files:          {tf:6.2f} s")
        print(f"coreml-lint on the same 185 files:    {small:6.2f} s")


if __name__ == "__main__":
    main()
