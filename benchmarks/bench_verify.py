"""verify time vs stock lowering on a 48-block pre-norm transformer (tiny dims).

Run by hand (needs torch, executorch, coremltools):

    .venv/bin/python benchmarks/bench_verify.py

It prints, in one run: the wall time of the stock ``to_edge_transform_and_lower`` +
``to_executorch`` on the program, the wall time of ``coreml_lint.verifier.verify`` on a fresh
copy of the same program (which includes that same stock lowering, the float32 conversion
of every partition, the eager run, the float64 reference runs and both MIL executions), its
stages, and the ratio.
Target: verify <= 1.5x the stock lowering; the interpreter a small part of it.
"""

from __future__ import annotations

import os

os.environ.setdefault("TQDM_DISABLE", "1")  # before coremltools is imported: no progress bars

import io
import logging
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-norm: RMSNorm, causal SDPA, SiLU MLP, residuals."""

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
    def __init__(self, blocks: int = 48, d: int = 32, heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, hidden) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def exported() -> bytes:
    torch.manual_seed(0)
    with torch.no_grad():
        program = torch.export.export(Transformer().eval(), (torch.randn(1, 16, 32),))
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()


def fresh(archive: bytes) -> torch.export.ExportedProgram:
    """Lowering mutates its program: each run gets its own copy."""
    return torch.export.load(io.BytesIO(archive))


def stock_lowering(ep: torch.export.ExportedProgram) -> float:
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    start = time.perf_counter()
    to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner()]).to_executorch()
    return time.perf_counter() - start


def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    from coreml_lint.verifier import verify

    archive = exported()
    stock_lowering(fresh(archive))  # warm-up: first-call imports and caches count for neither
    program = fresh(archive)
    lowering = stock_lowering(program)
    program = fresh(archive)
    start = time.perf_counter()
    report = verify(program)
    verifying = time.perf_counter() - start
    nodes = sum(1 for n in fresh(archive).graph.nodes if n.op == "call_function")
    print(f"48-block transformer: {nodes} graph nodes, {len(report.partitions)} partition(s)")
    print(f"stock lowering (to_edge_transform_and_lower + to_executorch): {lowering:7.2f} s")
    print(f"coreml_lint.verifier.verify:                                    {verifying:7.2f} s")
    for stage, seconds in report.timings.items():
        print(f"    {stage:22s} {seconds:7.2f} s")
    print(f"verify / stock lowering: {verifying / lowering:5.2f}x (target <= 1.5x)")
    own = report.timings.get("lower", 0.0) + report.timings.get("to_executorch", 0.0)
    if own:  # the same lowering timed inside verify: robust to load on a shared machine
        print(f"verify / the lowering inside verify: {verifying / own:5.2f}x")
    print(f"verify result: {report.status}")
    sys.exit(0 if report.status == "agree" else 1)


if __name__ == "__main__":
    main()
