"""How coreml-lint scales with program size and with the number of CPU islands (issue 12).

Run by hand (needs torch; ``--stock`` also needs executorch and coremltools):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_scaling.py [--stock] [--blocks 48 192 768]

It builds a pre-norm transformer block repeated N times (tiny dims) in two flavours and
caches each exported program under ``benchmarks/.cache/`` (which git ignores):
``clean``, which Core ML takes whole, and ``split``, where every block also takes the
``argmax`` of its flattened output (``dim=None``, which executorch 1.5.1 refuses for
Core ML) and adds it back, so the partitioner has to cut the graph once per block.
For each program it prints the node and partition counts, the wall time and peak RSS of
``coreml-lint PROGRAM.pt2`` in a fresh process (start-up included; the median of
``--repeat`` runs) and the time per node. ``--stock`` also times the stock
``CoreMLPartitioner().partition()`` on the 48-block programs, after ``to_edge`` (timed
apart); the issue measured 96.5 s for the split one.

``--source 400`` adds the source side of the issue (``bench_source_fix.py``): one
``libcst.parse_module`` pass over 400 generated modules with 300 safe CML301 fixes each,
then ``coreml-lint check DIR --fix`` and ``--diff`` on fresh copies, ``--repeat`` times,
with the ratios of each repetition.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache"
DIM, HEADS, HIDDEN, TOKENS = 16, 2, 32, 4


def build_model(blocks: int, split: bool):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1 = nn.RMSNorm(DIM, eps=1e-6)
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.n2 = nn.RMSNorm(DIM, eps=1e-6)
            self.up = nn.Linear(DIM, HIDDEN)
            self.down = nn.Linear(HIDDEN, DIM)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
            q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            x = x + self.down(F.silu(self.up(self.n2(x))))
            if split:  # a CPU-only op whose result is used: the graph is cut here
                x = x + torch.argmax(x).to(x.dtype)
            return x

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    return Stack().eval(), (torch.randn(1, TOKENS, DIM),)


def cache_dir() -> Path:
    """``benchmarks/.cache``, which ignores itself in git (programs and generated sources)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    marker = CACHE / ".gitignore"
    if not marker.exists():
        marker.write_text("*\n")
    return CACHE


def program_path(blocks: int, flavour: str) -> Path:
    """The cached exported program, built on first use."""
    path = cache_dir() / f"blocks{blocks}-{flavour}.pt2"
    if not path.exists():
        import torch

        torch.manual_seed(0)
        model, inputs = build_model(blocks, flavour == "split")
        with torch.no_grad():
            program = torch.export.export(model, inputs)
        tmp = path.with_name(path.stem + "-partial.pt2")
        torch.export.save(program, tmp)
        tmp.rename(path)
    return path


def graph_counts(path: Path) -> tuple[int, int, int]:
    """Call nodes and placeholders of the canonical graph, and predicted partitions."""
    from coreml_lint.program.canonical import canonicalize
    from coreml_lint.program.placement import predict_placement
    from coreml_lint.program.pt2 import read_pt2

    (graph,) = read_pt2(path)
    graph = canonicalize(graph)
    return len(graph.nodes), len(graph.inputs), len(predict_placement(graph).partitions)


_CHILD = """
import resource, runpy, sys
sys.argv = ["coreml-lint", *sys.argv[1:]]
try:
    runpy.run_module("coreml_lint", run_name="__main__")
except SystemExit:
    pass
usage = resource.getrusage(resource.RUSAGE_SELF)
print("BENCH", usage.ru_maxrss, file=sys.stderr)
"""


def lint_run(argv: list[str]) -> tuple[float, float, float]:
    """Wall time and CPU time (user + system) of one ``coreml-lint`` process, start-up
    included, and its peak RSS in MB. On a loaded machine the CPU time is the steadier
    figure; on an idle one the two agree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("BENCH ")]
    if not line:
        raise RuntimeError(f"coreml-lint {argv} failed:\n{done.stderr[-2000:]}")
    return wall, cpu, int(line[-1].split()[1]) / 1024


def stock_partition_time(path: Path) -> tuple[float, float, int]:
    """``to_edge`` time, ``CoreMLPartitioner().partition()`` time, partitions found."""
    import torch
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge

    program = torch.export.load(path)
    start = time.perf_counter()
    edge = to_edge(program)
    edge_time = time.perf_counter() - start
    start = time.perf_counter()
    result = CoreMLPartitioner().partition(edge.exported_program())
    partition_time = time.perf_counter() - start
    return edge_time, partition_time, len(result.partition_tags)


# --- source side: --fix and --diff on many files, next to one libcst parse ----------------


def source_bench(files: int, fixes: int, repeat: int) -> None:
    """The table of ``bench_source_fix.py`` (kept there, to be run alone too)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_source_fix import source_bench as run

    run(files, fixes, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[48, 192, 768])
    parser.add_argument("--flavours", nargs="+", default=["clean", "split"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stock", action="store_true", help="time CoreMLPartitioner too")
    parser.add_argument("--lint-args", default="--output-format concise")
    parser.add_argument(
        "--source",
        type=int,
        default=0,
        metavar="FILES",
        help="also time --fix and --diff on FILES generated modules (the issue used 400)",
    )
    parser.add_argument("--fixes", type=int, default=300, help="safe fixes per module")
    args = parser.parse_args()

    rows = []
    startup = statistics.median(lint_run(["--version"])[1] for _ in range(args.repeat))
    print(f"start-up (coreml-lint --version): cpu {startup:.2f} s")
    print(
        "program            call nodes  +placeholders  partitions   wall s    cpu s  "
        "peak RSS MB  cpu us/node  (without start-up)"
    )
    for blocks in args.blocks:
        for flavour in args.flavours:
            path = program_path(blocks, flavour)
            nodes, placeholders, partitions = graph_counts(path)
            runs = [lint_run([str(path), *args.lint_args.split()]) for _ in range(args.repeat)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            rss = max(r[2] for r in runs)
            total = nodes + placeholders
            rows.append((blocks, flavour, nodes, total, partitions, wall, cpu, rss))
            print(
                f"{blocks:4d} blocks {flavour:5s} {nodes:10d} {total:14d} {partitions:11d} "
                f"{wall:8.2f} {cpu:8.2f} {rss:12.0f} {cpu / total * 1e6:12.1f}"
                f"  {(cpu - startup) / total * 1e6:8.1f}",
                flush=True,
            )
    if args.stock:
        for flavour in args.flavours:
            edge_time, partition_time, tags = stock_partition_time(program_path(48, flavour))
            print(
                f"stock, 48 blocks {flavour:5s}: to_edge {edge_time:6.1f} s, "
                f"CoreMLPartitioner().partition() {partition_time:6.1f} s, {tags} partitions",
                flush=True,
            )
    if args.source:
        source_bench(args.source, args.fixes, args.repeat)
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
