"""Small models for the Core AI tests, and one helper that runs a model on Core AI and on
eager with the same inputs (the real converter and runtime, through ``coreai_stack``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from coreml_lint.coreai_stack import CoreAIRun, run_program

NEEDS = 'needs coreai-torch and coreai-core: pip install "coreml-lint[coreai]" "torch==2.13.0"'


class Lambda(torch.nn.Module):
    """A module computing ``fn(*inputs)`` (the line in the test is the source line)."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(*inputs)


class KVCache(torch.nn.Module):
    """A key cache in a buffer, written at a position each step (Core AI state)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("keys", torch.zeros(1, 6, 8))

    def forward(self, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.keys.index_copy_(1, pos, k)
        return torch.softmax(self.keys.sum(-1), -1)


@dataclass
class Compared:
    run: CoreAIRun
    eager: list[Any]  # per call, the eager outputs (numpy)

    def max_error(self, call: int = -1) -> float:
        """Largest |Core AI - eager| / scale over the outputs of one call."""
        worst = 0.0
        for actual, expected in zip(self.run.calls[call], self.eager[call], strict=True):
            e = expected.astype(np.float64)
            scale = max(float(np.abs(e).max()), 1e-30)
            worst = max(worst, float(np.abs(actual.astype(np.float64) - e).max()) / scale)
        return worst


def run_both(
    model: torch.nn.Module, *calls: tuple[Any, ...], narrow_int64: bool = True
) -> Compared:
    """Export ``model`` on the first call's inputs, run every call on Core AI and in eager
    (a fresh copy of the model, so buffers start equal)."""
    import copy

    ep = torch.export.export(copy.deepcopy(model), calls[0])
    run = run_program(ep, calls, narrow_int64=narrow_int64)
    eager_model = copy.deepcopy(model)
    eager = []
    with torch.no_grad():
        for inputs in calls:
            out = eager_model(*inputs)
            out = out if isinstance(out, tuple) else (out,)
            eager.append([o.detach().numpy() for o in out])
    return Compared(run, eager)


def avg_pool(**kwargs: Any) -> Lambda:
    return Lambda(lambda x: F.avg_pool2d(x, 3, 2, 1, **kwargs))
