"""What a sweep worker does: generate one op's cases, measure a group of cases, or answer
a probe (the pool's own tests: a worker that exits or hangs)."""

from __future__ import annotations

import logging
import os
import time
import warnings
from functools import cache
from typing import Any


def prepare() -> None:
    """Quiet worker: no progress bars, conversion logs or warnings."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


@cache
def _heavy() -> None:
    """torch, executorch and coremltools, once per worker, with the speed caches."""
    import torch

    logging.getLogger("coremltools").setLevel(logging.CRITICAL)
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
    _heavy()
    from coreml_lint.sweep.generate import GENERATOR, op_cases

    cases, why = op_cases(_ops()[name])
    return {"op": name, "cases": cases, "why": why, "generator": GENERATOR}


def measure(cases: list[dict[str, Any]]) -> Any:
    _heavy()
    from coreml_lint.sweep.measure import measure as run

    return run(cases)


def measure_coreai(cases: list[dict[str, Any]]) -> Any:
    """A group of cases converted and run on Core AI (``coreai.py``)."""
    _heavy()
    from coreml_lint.sweep.coreai import measure_coreai as run

    return run(cases)


def rekey(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Case id -> its keys as the linter computes them now (None: the group must be split)."""
    _heavy()
    from coreml_lint.sweep.measure import keys_of

    keys = keys_of(cases)
    return {c["id"]: None if keys is None else keys[i] for i, c in enumerate(cases)}


def edge_verdict(name: str) -> dict[str, Any]:
    """What lowering does with one op's base call, for an op the sweep leaves out that
    ``to_edge`` decomposes (``edges.py``): its outcome and message, or why there is none."""
    _heavy()
    import torch

    from coreml_lint.sweep.generate import base_case
    from coreml_lint.sweep.measure import measure as run
    from coreml_lint.sweep.schema import OpInfo, schema_args

    base, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, base), overload)
    case = base_case(OpInfo(name, op, tuple(schema_args(op))))
    if case is None:
        return {"op": name, "outcome": None, "message": "no legal call found"}
    found = run([case])
    if isinstance(found, str):  # a group's split marker: never for one case
        return {"op": name, "outcome": None, "message": found}
    return {"op": name, "outcome": found[0]["outcome"], "message": found[0]["message"]}


def warm(_: Any = None) -> int:
    """A new worker's first task: the heavy imports, before any timed task."""
    _heavy()
    return os.getpid()


def probe(what: str) -> Any:
    """The engine's own tests: ``ok`` answers the worker's pid, ``hang`` sleeps an hour,
    ``exit:PATH`` appends the pid to PATH and ends the process (each attempt is seen)."""
    if what.startswith("exit:"):
        with open(what.removeprefix("exit:"), "a") as attempts:
            attempts.write(f"{os.getpid()}\n")
        os._exit(3)
    if what == "hang":
        time.sleep(3600)
    return os.getpid()


HANDLERS = {
    "generate": generate,
    "measure": measure,
    "measure_coreai": measure_coreai,
    "probe": probe,
    "warm": warm,
    "rekey": rekey,
    "edge_verdict": edge_verdict,
}
