"""The sweep's tasks on Dask distributed: local worker processes by default, any cluster by
address.

Why Dask distributed (and not a process pool of our own, nor Ray): the sweep is a stream of
independent tasks, each a few seconds of single-threaded work in a process that imported
torch, executorch and coremltools once. Distributed gives exactly that (one task at a time per
worker process, a nanny that restarts a worker which died, a scheduler a maintainer starts on
any machines with ``dask scheduler`` / ``dask worker``) from a pure-Python install of a few
MB; Ray's model (actors, an object store, its own raylet processes) is more than a stream of
tasks needs and is an 80 MB wheel with native services to start.

The contract the sweep's driver (``run.py``) relies on: ``submit(Task)`` then
``run(refill)``, where each task ends in ``done(value)`` or ``failed(why)``:

- a task whose worker dies (a segfault inside coremltools, the memory limit) is tried again
  once on a fresh worker; a second death is ``failed("worker died ...")``, which the driver
  records as that case's crash. The scheduler's own retries are turned off
  (``allowed-failures: 0``, set for a local cluster; a cluster's scheduler is told to start
  with it, see the README), so "at most once" is counted here, whatever the cluster;
- a task past its timeout has its worker restarted (a hang inside a conversion cannot be
  interrupted in its thread) and counts as failed: ``failed("timeout after N s")``, after
  the same single retry;
- a worker imports the heavy stack once, with its first task, and keeps it for the run (no
  lifetime restarts: a local cluster's timed restart left both workers dead after 40 min,
  and the run waiting for them; workers held about 0.6 GB each in this session's runs);
- a run whose workers are all gone for ``NO_WORKER_GRACE`` seconds stops with that said,
  never waits forever.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NO_WORKER_GRACE = 120.0  # seconds without any worker before a run gives up
RETRIES = 1  # a task whose worker died or hung is tried once more, then it is the case's crash


def run_task(kind: str, payload: Any) -> tuple[Any, float]:
    """What a worker runs: one sweep handler (``tasks.HANDLERS``), and the CPU seconds it
    took there (the heavy imports of a worker's first task included): the sweep's cost is
    the sum over tasks, wherever the workers are."""
    from coreml_lint.sweep.tasks import HANDLERS

    start = os.times()
    value = HANDLERS[kind](payload)
    end = os.times()
    return value, (end.user - start.user) + (end.system - start.system)


def _quiet_workers() -> Any:
    """A worker plugin: ``tasks.prepare`` (no progress bars, logs or warnings) once per
    worker process, before its first task; the heavy stack is imported by the first task
    that needs it and kept for the life of the process."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class QuietWorker(WorkerPlugin):
        name = "coreml-lint-sweep"

        def setup(self, worker: Any) -> None:
            from coreml_lint.sweep.tasks import prepare

            prepare()

    return QuietWorker()


@dataclass
class Task:
    """One unit of sweep work: a handler of ``tasks.HANDLERS`` and its payload; it ends in
    exactly one call of ``done(value)`` or ``failed(why)``."""

    kind: str
    payload: Any
    timeout: float
    done: Callable[[Any], None]
    failed: Callable[[str], None]


@dataclass
class _Running:
    task: Task
    future: Any
    deadline: float
    tries: int
    worker: str


WARMING, IDLE, BUSY, BROKEN = "warming", "idle", "busy", "broken"


class Engine:
    """``workers`` local Dask worker processes, or the cluster at ``address``."""

    def __init__(
        self,
        workers: int = 2,
        address: str | None = None,
        on_cost: Callable[[str, float], None] | None = None,
    ) -> None:
        import dask
        from distributed import Client, LocalCluster

        dask.config.set(
            {
                "distributed.scheduler.allowed-failures": 0,
                "distributed.worker.daemon": False,
                "distributed.logging.distributed": "error",
                # The statistical profiler walks every task's stack 100 times a second with
                # the GIL held: deep torch stacks made the heavy imports five times slower.
                "distributed.worker.profile.enabled": False,
                # A local cluster hard-closes a worker's nanny when a worker of the same name
                # is missing 15 s after an earlier loss of it: a hang restarted within 15 s of
                # a crash on the same worker lost that nanny for good, and the run waited for
                # a worker that never came back. The nanny restarts its own worker.
                "distributed.deploy.lost-worker-timeout": "100 days",
            }
        )
        self.queue: list[tuple[Task, int]] = []  # each task with the tries it has had
        self.cpu_seconds = 0.0  # spent in tasks that returned, on every worker
        self.on_cost = on_cost  # (task kind, CPU seconds) of each task that returned
        self.running: dict[str, _Running] = {}
        self.workers: dict[str, str] = {}  # address -> WARMING, IDLE, BUSY or BROKEN
        self.warming: dict[str, Any] = {}  # address -> its warm-up future
        self.seen_at = 0.0
        self.alone_since: float | None = None  # since when no worker has been there
        self.cluster = None
        if address is None:
            self.cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # any free port: never another cluster's
                silence_logs=logging.ERROR,
                memory_limit=0,
            )
            self.client = Client(self.cluster)
            # The in-process scheduler logs each worker death; the sweep records it per case.
            logging.getLogger("distributed").setLevel(logging.CRITICAL)
        else:
            self.client = Client(address)
        self.client.register_plugin(_quiet_workers())
        self.size = workers if address is None else 1
        self._see_workers()

    def submit(self, task: Task, first: bool = False) -> None:
        if first:
            self.queue.insert(0, (task, 0))
        else:
            self.queue.append((task, 0))

    def run(self, refill: Callable[[], bool] | None = None) -> None:
        """Serve the queue (asking ``refill`` for more while workers would idle) until every
        task is done or failed.

        Each task is placed on one idle, warm worker: a worker (new, or restarted by Dask)
        first imports the heavy stack in a warm-up task of its own, so a task's timeout
        measures the task and never a worker's start on a loaded machine."""
        from distributed import wait

        more = refill if refill is not None else (lambda: False)
        exhausted = refill is None  # refill has no more to give
        while True:
            self._see_workers()
            idle = [w for w, state in self.workers.items() if state == IDLE]
            while not exhausted and len(self.queue) < len(idle):
                exhausted = not more()
            for worker in idle:
                if not self.queue:
                    break
                task, tries = self.queue.pop(0)
                self._start(task, tries, worker)
            if not self.running and not self.queue and exhausted:
                return
            futures = [r.future for r in self.running.values()] + list(self.warming.values())
            if futures:
                with contextlib.suppress(TimeoutError):  # a deadline passed: _expire sees it
                    wait(futures, timeout=self._next_deadline(), return_when="FIRST_COMPLETED")
            else:  # every worker is gone or starting: wait for the cluster, not forever
                self._wait_for_workers()
            self._warmed()
            for key in [k for k, r in self.running.items() if r.future.done()]:
                self._finish(self.running.pop(key))
            self._expire()

    def close(self) -> None:
        """Stop promptly, even with tasks running (a kill must end the sweep: what was
        measured is already on disk)."""
        with contextlib.suppress(Exception):
            self.client.close(timeout=10)
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close(timeout=20)

    # ------------------------------------------------------------------ workers
    def _wait_for_workers(self) -> None:
        """Sleep a little while no worker is there; raise once none has been there for
        ``NO_WORKER_GRACE`` seconds (a cluster whose workers died and were not replaced
        would otherwise hold the sweep forever; what was measured is on disk, and a run
        resumes from it)."""
        now = time.monotonic()
        if self.workers:
            self.alone_since = None
            return
        if self.alone_since is None:
            self.alone_since = now
        if now - self.alone_since > NO_WORKER_GRACE:
            raise RuntimeError(
                f"every sweep worker is gone and none came back in {NO_WORKER_GRACE:.0f} s: "
                "run the sweep again (it resumes from what was measured)"
            )
        time.sleep(0.5)

    def _see_workers(self) -> None:
        """Follow the cluster's workers: a new one is warmed up, a gone one forgotten (its
        task ends in ``KilledWorker``, which ``_finish`` retries)."""
        now = time.monotonic()
        if now - self.seen_at < 1.0:
            return
        self.seen_at = now
        present = set(self.client.scheduler_info(n_workers=-1)["workers"])
        for gone in set(self.workers) - present:
            del self.workers[gone]
            self.warming.pop(gone, None)
            # Its task is bound to it, so Dask would hold the task for its return: it died.
            for key in [k for k, r in self.running.items() if r.worker == gone]:
                running = self.running.pop(key)
                running.future.cancel()
                self._retry_or_fail(running, "worker died (the process running it ended)")
        for worker in present - set(self.workers):
            self.workers[worker] = WARMING
            self.warming[worker] = self.client.submit(
                run_task, "warm", None, workers=[worker], allow_other_workers=False, pure=False
            )
        self.size = max(len(self.workers), 1)

    def _warmed(self) -> None:
        for worker, future in list(self.warming.items()):
            if future.done():
                del self.warming[worker]
                if worker in self.workers:  # a warm-up that failed leaves the worker out
                    self.workers[worker] = IDLE if future.status == "finished" else BROKEN
                if future.status != "finished" and all(
                    state == BROKEN for state in self.workers.values()
                ):  # nothing could ever run: say why instead of waiting forever
                    raise RuntimeError(f"no sweep worker could start: {future.exception()}")

    # ------------------------------------------------------------------ tasks
    def _start(self, task: Task, tries: int, worker: str) -> None:
        future = self.client.submit(
            run_task,
            task.kind,
            task.payload,
            workers=[worker],
            allow_other_workers=False,
            pure=False,
        )
        self.workers[worker] = BUSY
        deadline = time.monotonic() + task.timeout
        self.running[future.key] = _Running(task, future, deadline, tries, worker)

    def _next_deadline(self) -> float:
        deadlines = [r.deadline for r in self.running.values()]
        soonest = min(deadlines) if deadlines else time.monotonic() + 5.0
        return max(0.05, min(soonest - time.monotonic(), 5.0))

    def _finish(self, running: _Running) -> None:
        from distributed import KilledWorker

        future, task = running.future, running.task
        error = None if future.status == "finished" else future.exception()
        if isinstance(error, KilledWorker):  # its worker is gone: never place a task there
            self.workers.pop(running.worker, None)
            self.warming.pop(running.worker, None)
        elif self.workers.get(running.worker) == BUSY:
            self.workers[running.worker] = IDLE
        if error is None:
            value, seconds = future.result()
            self.cpu_seconds += seconds
            if self.on_cost is not None:
                self.on_cost(task.kind, seconds)
            task.done(value)
            return
        if isinstance(error, KilledWorker):
            self._retry_or_fail(running, "worker died (the process running it ended)")
        else:  # a handler's own exception: a bug in the sweep, reported as the task's failure
            task.failed(f"{type(error).__name__}: {error}")

    def _expire(self) -> None:
        now = time.monotonic()
        late = [k for k, r in self.running.items() if now > r.deadline and not r.future.done()]
        for key in late:
            running = self.running.pop(key)
            running.future.cancel()
            # A hang cannot be interrupted in its thread: the worker process is restarted
            # (it comes back under a new address and is warmed up again).
            self.workers.pop(running.worker, None)
            with contextlib.suppress(Exception):
                self.client.restart_workers([running.worker], timeout=300, raise_for_error=False)
            self._retry_or_fail(running, f"timeout after {running.task.timeout:.0f} s")

    def _retry_or_fail(self, running: _Running, why: str) -> None:
        if running.tries < RETRIES:  # first in line, on whichever worker is idle next
            self.queue.insert(0, (running.task, running.tries + 1))
        else:
            running.task.failed(why)
