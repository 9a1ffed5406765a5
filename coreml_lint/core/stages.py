"""One stage of a run of the real stacks (lowering, Core AI's convert, save, load and run):
timed, and a failure kept on the result as the stage it happened in, never raised.

The Core ML room (``stack/lowering.py``) and the Core AI room (``coreai_stack/``) both
report a crash as a result (``error`` and ``stage``) with each stage's seconds in
``timings``; this is the one place that does it, in ``core`` because the two rooms import
only ``core``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Staged(Protocol):
    """A result that keeps its failure and where it happened, and each stage's seconds."""

    error: BaseException | None
    stage: str
    timings: dict[str, float]


@contextmanager
def stage(result: Staged, name: str, timing: str | None = None) -> Iterator[None]:
    """Run the block as the stage ``name`` of ``result``: its seconds go to
    ``result.timings[timing or name]`` (also when it fails), and an exception raised in it
    is recorded on ``result`` (``error``, and ``stage = name``) instead of propagating.
    After the block, ``result.error`` says whether it failed."""
    start = time.perf_counter()
    try:
        yield
    except Exception as exc:
        result.error, result.stage = exc, name
    finally:
        result.timings[timing or name] = time.perf_counter() - start
