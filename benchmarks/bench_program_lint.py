"""Lint time vs stock lowering on a 48-block transformer, and lint time vs weight size.

Run by hand (needs torch, executorch, coremltools):

    .venv/bin/python benchmarks/bench_program_lint.py

It prints, in one run: the wall time of ``coreml-lint`` (a fresh process, as a user or a
pre-commit hook runs it) on the 48-block program, the wall time of the stock
``to_edge_transform_and_lower`` + ``to_executorch`` on the same program, and the lint wall
time for the same graph saved with ~1 MB and with >= 1 GB of weights; then the 1 MB lint
again with coreml-lint's modules compiled from source (no ``.pyc``: what an editable install
pays on every run where ``PYTHONDONTWRITEBYTECODE`` is set; an installed package has its
bytecode).
Targets: lint >= 50x faster than lowering and under 1 s; 1 GB weights <= 1.2x the 1 MB time.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
PACKAGE = Path(__file__).resolve().parents[1] / "coreml_lint"


class Block(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.n1 = nn.RMSNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n2 = nn.RMSNorm(d, eps=1e-6)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.silu(self.up(self.n2(x))))


class Transformer(nn.Module):
    def __init__(self, blocks: int, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, hidden) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def export(d: int, hidden: int, path: Path) -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    with torch.no_grad():
        model = Transformer(48, d, 4, hidden).eval()
        program = torch.export.export(model, (torch.randn(1, 16, d),))
    torch.export.save(program, path)
    return program


def lint_wall(path: Path, repeat: int = 5, bytecode: bool = True) -> float:
    """Median wall time of ``coreml-lint path`` in a fresh process. ``bytecode``: as an
    installed package runs (pip writes each module's ``.pyc`` at install; a run here writes
    them once, unless ``PYTHONDONTWRITEBYTECODE`` is set, as on some CI machines); without
    it, its modules are compiled from source on every run."""
    exe = Path(sys.executable).with_name("coreml-lint")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if bytecode:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(PACKAGE)], check=True, env=env
        )
    else:  # the package's modules from source (the standard library keeps its bytecode)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for cache in PACKAGE.rglob("__pycache__"):
            shutil.rmtree(cache)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [str(exe), str(path), "--output-format", "concise"],
            capture_output=True,
            check=False,
            env=env,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from oracle import lower

    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "small.pt2", Path(tmp) / "large.pt2"
        program = export(32, 32, small)  # ~1.2 MB of float32 weights
        export(512, 4096, large)  # 48 * (4*512*512 + 2*512*4096) * 4 B ~ 1.0 GB
        sizes = {p: p.stat().st_size / 1e6 for p in (small, large)}
        nodes = sum(1 for n in program.graph.nodes if n.op == "call_function")

        lint_small = lint_wall(small)
        lint_large = lint_wall(large)
        lint_source = lint_wall(small, bytecode=False)
        start = time.perf_counter()
        lowered = lower(program)
        lower_time = time.perf_counter() - start
        assert lowered.ok, lowered.message

    print(f"48-block transformer: {nodes} graph nodes")
    print(f"stock lowering (to_edge_transform_and_lower + to_executorch): {lower_time:8.2f} s")
    print(f"coreml-lint, fresh process, {sizes[small]:8.1f} MB archive:   {lint_small:8.3f} s")
    print(f"coreml-lint, fresh process, {sizes[large]:8.1f} MB archive:   {lint_large:8.3f} s")
    print(f"coreml-lint, same, its modules compiled from source:   {lint_source:8.3f} s")
    print(f"lowering / lint: {lower_time / lint_small:6.1f}x (target >= 50x)")
    print(f"lint 1 GB / lint 1 MB: {lint_large / lint_small:5.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
