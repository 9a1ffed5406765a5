"""Run a function over many files on every core, and stop at once on Ctrl-C."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
PARALLEL_THRESHOLD = 64  # items; below this, starting worker processes costs more than it saves


def parallel_map(
    func: Callable[[T], R],
    items: Sequence[T],
    *,
    on_interrupt: Callable[[], None] | None = None,
    max_workers: int = 8,
) -> list[R]:
    """``[func(item) for item in items]``, on a process pool when there are enough items.

    Workers ignore SIGINT; on Ctrl-C the pool is terminated at once (no waiting for the
    tasks in flight), ``on_interrupt`` cleans up after them, and KeyboardInterrupt reaches
    the caller. ``func`` must be picklable (a module-level function or a bound method of a
    picklable object)."""
    workers = min(os.cpu_count() or 1, max_workers)
    if len(items) < PARALLEL_THRESHOLD or workers < 2:
        return [func(item) for item in items]
    import multiprocessing  # only when there is work for a pool (keeps start-up light)

    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_ignore_sigint)
    try:
        chunk = max(1, min(8, len(items) // (workers * 8)))
        results = list(pool.imap(func, items, chunksize=chunk))
    except KeyboardInterrupt:
        pool.terminate()
        pool.join()
        if on_interrupt is not None:
            on_interrupt()
        raise
    pool.close()
    pool.join()
    return results


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
