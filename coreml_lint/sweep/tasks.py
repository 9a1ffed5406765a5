"""What a sweep worker does: generate one op's cases, or measure a group of cases."""

from __future__ import annotations

import logging
import os
import warnings
from functools import cache
from typing import Any


def prepare() -> None:
    """Quiet, fast worker: no progress bars or conversion logs, the speed caches."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    logging.getLogger("coremltools").setLevel(logging.CRITICAL)
    import torch

    torch.set_num_threads(1)
    from coreml_lint.sweep import speed

    speed.apply()


@cache
def _ops() -> dict[str, Any]:
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.schema import in_scope

    ops, _ = in_scope(load_optable())
    return {info.name: info for info in ops}


def generate(name: str) -> dict[str, Any]:
    from coreml_lint.sweep.generate import op_cases

    cases, why = op_cases(_ops()[name])
    return {"op": name, "cases": cases, "why": why}


def measure(cases: list[dict[str, Any]]) -> Any:
    from coreml_lint.sweep.measure import measure as run

    return run(cases)


HANDLERS = {"generate": generate, "measure": measure}
