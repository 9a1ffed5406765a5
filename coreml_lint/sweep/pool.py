"""Worker processes with a per-task timeout: a crash (even a segfault inside torch or
coremltools) or a hang costs one task, never the sweep.

Each worker imports torch, executorch and coremltools once and then serves tasks over a
pipe. The parent waits on all pipes with the earliest deadline as timeout; a worker that
dies or overruns is killed and replaced, and its task reported as failed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

Handler = Callable[[Any], Any]
RECYCLE_AFTER = 400  # tasks per worker: long-lived coremltools processes grow


@dataclass
class Task:
    kind: str
    payload: Any
    timeout: float
    done: Callable[[Any], None]
    failed: Callable[[str], None]


@dataclass
class _Worker:
    process: Any
    conn: Any
    task: Task | None = None
    deadline: float = 0.0
    served: int = 0
    started: float = field(default_factory=time.monotonic)


def _serve(conn: Any) -> None:
    from coreml_lint.sweep.tasks import HANDLERS, prepare

    prepare()
    conn.send(("ready", None))
    while True:
        message = conn.recv()
        if message is None:
            return
        kind, payload = message
        try:
            conn.send(("ok", HANDLERS[kind](payload)))
        except Exception as exc:  # a bug in a handler: report it, keep serving
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Pool:
    """``workers`` processes; ``run(tasks)`` until every task is done or failed."""

    def __init__(self, workers: int, startup_timeout: float = 300.0) -> None:
        self.context = multiprocessing.get_context("spawn")
        self.size = workers
        self.startup_timeout = startup_timeout
        self.workers: list[_Worker] = []
        self.queue: list[Task] = []

    def _start(self) -> _Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(child,), daemon=True)
        process.start()
        child.close()
        if not parent.poll(self.startup_timeout):
            process.kill()
            raise RuntimeError("a sweep worker did not start")
        parent.recv()
        return _Worker(process, parent)

    def submit(self, task: Task, first: bool = False) -> None:
        if first:
            self.queue.insert(0, task)
        else:
            self.queue.append(task)

    def run(self, refill: Callable[[], bool] | None = None) -> None:
        """Serve the queue. ``refill`` is asked for more work while a worker would idle
        (it submits a task and returns True, or returns False when it has none)."""
        while len(self.workers) < self.size:
            self.workers.append(self._start())
        while True:
            idle = sum(1 for w in self.workers if w.task is None)
            while refill is not None and len(self.queue) < idle and refill():
                pass
            self._assign()
            busy = [w for w in self.workers if w.task is not None]
            if not busy:
                if not self.queue:
                    return
                continue
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            for conn in wait([w.conn for w in busy], timeout):
                self._collect(next(w for w in busy if w.conn is conn))
            now = time.monotonic()
            for worker in busy:
                if worker.task is not None and now > worker.deadline:
                    self._replace(worker, f"timeout after {worker.task.timeout:.0f} s")

    def _assign(self) -> None:
        for worker in self.workers:
            if worker.task is None and self.queue:
                task = self.queue.pop(0)
                worker.task, worker.deadline = task, time.monotonic() + task.timeout
                worker.conn.send((task.kind, task.payload))

    def _collect(self, worker: _Worker) -> None:
        task = worker.task
        assert task is not None
        try:
            status, value = worker.conn.recv()
        except (EOFError, OSError):
            code = worker.process.exitcode
            self._replace(worker, f"worker died (exit code {code})")
            return
        worker.task = None
        worker.served += 1
        if status == "ok":
            task.done(value)
        else:
            task.failed(value)
        if worker.served >= RECYCLE_AFTER:
            self._replace(worker, None)

    def _replace(self, worker: _Worker, why: str | None) -> None:
        task = worker.task
        worker.task = None
        try:
            if why is None:
                worker.conn.send(None)
                worker.process.join(10)
        finally:
            if worker.process.is_alive():
                worker.process.kill()
            worker.process.join()
        index = self.workers.index(worker)
        self.workers[index] = self._start()
        if task is not None and why is not None:
            task.failed(why)

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
            worker.process.join(5)
            if worker.process.is_alive():
                worker.process.kill()
            worker.process.join()  # reaped: its CPU time counts in the sweep's cpu_seconds
        self.workers = []


def default_workers() -> int:
    return max(1, min(2, (os.cpu_count() or 1)))
