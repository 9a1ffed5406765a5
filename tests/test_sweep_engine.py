"""The sweep's engine when nothing can run: every worker's warm-up (the heavy imports,
``tasks.warm``) fails, and the sweep stops with the reason instead of waiting forever for
a worker that will never be ready. Cheap: the warm-ups fail at their first import, so no
heavy stack is loaded (the engine's other tests, in ``test_sweep_drift.py``, are oracle)."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(300)
def test_a_sweep_whose_every_worker_fails_its_warm_up_says_why(tmp_path, monkeypatch):
    pytest.importorskip("distributed", reason="the sweep's engine needs dask distributed")
    from coreml_lint.sweep.engine import Engine, Task

    # The workers are spawned with this process's sys.path: a torch that cannot be imported
    # comes first there, so each worker's warm-up fails at its first line.
    broken = tmp_path / "broken"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text('raise ImportError("torch broken on purpose")\n')
    monkeypatch.syspath_prepend(str(broken))
    done, failed = [], []
    engine = Engine(2)
    try:
        engine.submit(Task("probe", "ok", 60.0, done.append, failed.append))
        with pytest.raises(RuntimeError, match=r"no sweep worker could start: .*broken on purpose"):
            engine.run()
        assert len(engine.workers) == 2 and set(engine.workers.values()) == {"broken"}
    finally:
        engine.close()
    assert not done and not failed  # the task was never placed on a worker


class _EmptyCluster:
    """A client whose cluster has no worker left (they died and none was replaced)."""

    def scheduler_info(self, n_workers: int = -1) -> dict:
        return {"workers": {}}


def test_a_sweep_whose_workers_are_all_gone_stops_instead_of_waiting_forever(monkeypatch):
    pytest.importorskip("distributed", reason="the sweep's engine needs dask distributed")
    from coreml_lint.sweep import engine as module
    from coreml_lint.sweep.engine import Engine, Task

    monkeypatch.setattr(module, "NO_WORKER_GRACE", 0.3)
    engine = Engine.__new__(Engine)  # the loop alone, over a cluster with nobody in it
    engine.queue, engine.running, engine.workers, engine.warming = [], {}, {}, {}
    engine.seen_at, engine.alone_since, engine.client = 0.0, None, _EmptyCluster()
    engine.submit(Task("probe", "ok", 60.0, lambda value: None, lambda why: None))
    with pytest.raises(RuntimeError, match="every sweep worker is gone"):
        engine.run()
    assert len(engine.queue) == 1  # the task is still there: a run again resumes it
