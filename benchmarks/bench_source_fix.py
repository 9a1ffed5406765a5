"""``coreml-lint --fix`` and ``--diff`` on many files, next to one libcst parse of them
(issue 12: within 2x of the parse, ``--diff`` no slower than ``--fix``).

Run by hand (numbers vary with the machine and its load; read the ratios, which are taken
from the same repetition):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_source_fix.py [--files 400] [--repeat 3]

It generates ``--files`` modules with ``--fixes`` lines each that CML301's safe fix rewrites
(``torch.full((2,), 3)`` gains ``dtype=torch.int64``) once, under ``benchmarks/.cache/``
(which git ignores). Each repetition times, in this order: one ``libcst.parse_module`` pass
over the files in this process (one core), then ``coreml-lint check DIR --fix`` and
``coreml-lint check DIR --diff`` in fresh processes (start-up included, every core), each on
a fresh copy of the files. It checks what they did: every fix written (or shown), and a
second ``--fix`` changes nothing.
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

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache"


def cache_dir() -> Path:
    """``benchmarks/.cache``, which ignores itself in git."""
    CACHE.mkdir(parents=True, exist_ok=True)
    marker = CACHE / ".gitignore"
    if not marker.exists():
        marker.write_text("*\n")
    return CACHE


def source_tree(files: int, fixes: int) -> Path:
    """``files`` modules with ``fixes`` lines each that CML301's safe fix rewrites
    (``torch.full((2,), 3)`` gains ``dtype=torch.int64``), generated once."""
    root = cache_dir() / f"source-{files}x{fixes}"
    if not root.exists():
        tmp = root.with_name(root.name + "-partial")
        tmp.mkdir(parents=True, exist_ok=True)
        for k in range(files):
            body = [f"    a{i} = torch.full((2,), {(i + k) % 7 + 1})" for i in range(fixes)]
            text = "\n".join(["import torch", "", "", "def f(x):", *body, "    return x", ""])
            (tmp / f"module_{k:04d}.py").write_text(text)
        tmp.rename(root)
    return root


def timed_process(args: list[str]) -> tuple[float, float, str]:
    """Wall and CPU time of one child process, and what it printed (both streams)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout + done.stderr


def parse_once(paths: list[Path]) -> tuple[float, float]:
    """Wall and CPU time of one ``libcst.parse_module`` of every file, in this process."""
    import libcst

    start, cpu_start = time.perf_counter(), time.process_time()
    for path in paths:
        libcst.parse_module(path.read_text())
    return time.perf_counter() - start, time.process_time() - cpu_start


def coreml_lint(pristine: Path, mode: str, expected: int) -> tuple[float, float]:
    """Wall and CPU time of ``coreml-lint check COPY mode`` on a fresh copy, after checking
    that every fix was written (``--fix``, and a second run changes nothing) or shown."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "src"
        shutil.copytree(pristine, tree)
        command = [sys.executable, "-m", "coreml_lint", "check", str(tree), "--isolated", mode]
        wall, cpu, out = timed_process(command)
        if mode == "--fix":
            done = sum(p.read_text().count("dtype=torch.int64") for p in tree.glob("*.py"))
            again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
            if "Fixed" in again.stdout:
                raise SystemExit(f"a second --fix changed something:\n{again.stdout[-500:]}")
        else:
            done = out.count("+    a")
        if done != expected:
            raise SystemExit(f"{mode}: {done} of {expected} fixes made:\n{out[-1000:]}")
    return wall, cpu


def source_bench(files: int, fixes: int, repeat: int = 3) -> None:
    """The table: per repetition, the parse and both modes, and their ratios."""
    pristine = source_tree(files, fixes)
    paths = sorted(pristine.glob("*.py"))
    lines = sum(p.read_text().count("\n") for p in paths)
    print(f"source: {files} files, {lines} lines, {files * fixes} safe fixes")
    print("     one parse (1 core)  --fix (all cores)   --diff (all cores)  wall ratios")
    print("rep   wall s   cpu s     wall s   cpu s      wall s   cpu s     fix  diff diff/fix")
    rows = []
    for rep in range(1, repeat + 1):
        parse = parse_once(paths)
        fix = coreml_lint(pristine, "--fix", files * fixes)
        diff = coreml_lint(pristine, "--diff", files * fixes)
        rows.append((parse, fix, diff))
        print(
            f"{rep:3d} {parse[0]:8.1f} {parse[1]:7.1f}   {fix[0]:8.1f} {fix[1]:7.1f}    "
            f"{diff[0]:8.1f} {diff[1]:7.1f}   {fix[0] / parse[0]:5.2f} {diff[0] / parse[0]:5.2f}"
            f" {diff[0] / fix[0]:8.2f}",
            flush=True,
        )
    fix_ratio = statistics.median(f[0] / p[0] for p, f, _ in rows)
    diff_ratio = statistics.median(d[0] / p[0] for p, _, d in rows)
    print(f"median: --fix {fix_ratio:.2f}x one parse, --diff {diff_ratio:.2f}x (target <= 2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--fixes", type=int, default=300, help="safe fixes per module")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    source_bench(args.files, args.fixes, args.repeat)


if __name__ == "__main__":
    main()
