"""CML801 on models written after the op table: op-level pitfalls no hand-written rule
names, each beside a clean twin. For each model: the lint's errors, and what the stock
``CoreMLPartitioner`` lowering plus ``verify`` say (the oracle). Run by hand:

    .venv/bin/python benchmarks/heldout_measured_rule.py

A pitfall model should be flagged by CML801 and crash or diverge; a twin should be flagged
by nothing and agree.
"""

from __future__ import annotations

import contextlib
import io

import torch
import torch.nn as nn

from coreml_lint import lint_program
from coreml_lint.core.findings import Severity
from coreml_lint.verifier import verify


class VarNorm(nn.Module):
    """A custom norm with the variance unbiased (correction 1) over the last dim, or not."""

    def __init__(self, unbiased: bool) -> None:
        super().__init__()
        self.proj, self.unbiased = nn.Linear(16, 16), unbiased

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        variance = h.var(dim=-1, keepdim=True, unbiased=self.unbiased)
        return (h - h.mean(-1, keepdim=True)) / (variance + 1e-5).sqrt()


class ShiftTokens(nn.Module):
    """A token shift (RWKV style), written with ``torch.roll`` or with ``cat``."""

    def __init__(self, use_roll: bool) -> None:
        super().__init__()
        self.lin, self.use_roll = nn.Linear(8, 8), use_roll

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        shifted = torch.roll(h, 1, 1) if self.use_roll else torch.cat([h[:, -1:], h[:, :-1]], 1)
        return h + shifted


class ParityEmbed(nn.Module):
    """Token embeddings scaled by the ids' parity: ``ids & 1``, or the same in float."""

    def __init__(self, bitwise: bool) -> None:
        super().__init__()
        self.emb, self.bitwise = nn.Embedding(100, 8), bitwise

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        as_float = ids.float()
        parity = (ids & 1) if self.bitwise else as_float - 2 * torch.floor(as_float / 2)
        return self.emb(ids) * (1 + parity.unsqueeze(-1).float())


class GlobalStd(nn.Module):
    """Features divided by their global (unbiased) std: ``h.std()``, or written out."""

    def __init__(self, builtin: bool) -> None:
        super().__init__()
        self.lin, self.builtin = nn.Linear(8, 8), builtin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        written_out = ((h - h.mean()) ** 2).sum().div(h.numel() - 1).sqrt()
        return h / ((h.std() if self.builtin else written_out) + 1e-3)


class AllPositive(nn.Module):
    """Whether every score of a row is positive: ``all()`` of floats, or of a comparison."""

    def __init__(self, truthy: bool) -> None:
        super().__init__()
        self.truthy = truthy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x - 0.5)
        return (y.all(dim=-1) if self.truthy else (y != 0).all(dim=-1)).float()


def _models() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    ids = (torch.randint(0, 100, (2, 7)),)
    return {
        "var-unbiased-dim (clean)": (VarNorm(True), (torch.randn(2, 5, 16),)),
        "var-biased (clean)": (VarNorm(False), (torch.randn(2, 5, 16),)),
        "roll-with-dims (clean)": (ShiftTokens(True), (torch.randn(2, 6, 8),)),
        "cat-shift (clean)": (ShiftTokens(False), (torch.randn(2, 6, 8),)),
        "and-of-int64-ids": (ParityEmbed(True), ids),
        "float-parity (twin)": (ParityEmbed(False), ids),
        "global-std": (GlobalStd(True), (torch.randn(4, 8),)),
        "manual-std (twin)": (GlobalStd(False), (torch.randn(4, 8),)),
        "all-of-floats": (AllPositive(True), (torch.rand(3, 4) + 0.3,)),
        "all-of-comparison (twin)": (AllPositive(False), (torch.rand(3, 4) + 0.3,)),
    }


def main() -> None:
    for name, (model, inputs) in _models().items():
        program = torch.export.export(model.eval(), inputs)
        errors = [f for f in lint_program(program).findings if f.severity is Severity.ERROR]
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            report = verify(torch.export.export(model.eval(), inputs), inputs=inputs)
        flagged = ", ".join(f"{f.code} {f.op}" for f in errors) or "nothing"
        print(f"{name:28s} lint: {flagged:40s} stock + verify: {report.status}")


if __name__ == "__main__":
    main()
