"""The shipped op-behaviour table still describes the installed stack: a sampled subset of
the sweep's cases is generated again (generation is deterministic) and measured with the
stock ``CoreMLPartitioner``, and each outcome must be the table's. Also the sweep's engine:
a worker that dies or hangs costs its task (after one retry), never the sweep, and a local
two-worker cluster measures the same cells as one process.

Under a minute: a handful of lowerings. The full sweep is ``python -m coreml_lint.sweep``.
"""

from __future__ import annotations

import random

import pytest

from coreml_lint.measured.key import Key
from coreml_lint.measured.outcomes import normalized
from coreml_lint.measured.table import TABLE_PATH, load_table

pytestmark = pytest.mark.oracle

# (op, case label, target): cases behind catalogue pitfalls, always re-measured.
PINNED = (
    ("amax.default", "bool made in Core ML", 18),
    ("gelu.default", "approximate=tanh", 15),
    ("rms_norm.default", "float32", 15),  # the base call (eps not given) is labelled float32
    ("full.default", "fill_value=big", 18),
)
SAMPLED_OPS = ("add.Tensor", "sigmoid.default", "mean.dim", "cat.default", "where.self")
SAMPLE = 4


def _cases() -> list[dict]:
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    ops = {info.name: info for info in in_scope(load_optable())[0]}
    chosen = []
    for op, label, target in PINNED:
        cases, _ = op_cases(ops[op])
        chosen += [c for c in cases if c["label"] == label and c["target"] == target][:1]
    pool = [
        c
        for op in SAMPLED_OPS
        for c in op_cases(ops[op])[0]
        if c["axis"] in ("base", "dtype", "variant")
    ]
    chosen += random.Random(14).sample(pool, SAMPLE)
    return chosen


def test_a_sample_of_the_sweep_measures_as_the_table_says():
    from coreml_lint.sweep.measure import measure
    from coreml_lint.sweep.tasks import prepare

    prepare()
    table = load_table(TABLE_PATH)
    compared = 0
    for case in _cases():
        (result,) = measure([case])
        if len(result["keys"]) != 1 or result["keys"][0]["placed"] != "coreml":
            continue
        k = result["keys"][0]
        key = Key(k["op"], k["operands"], k["variant"], k["shape"])
        entry = table.lookup(key, case["target"], k["context"])
        assert entry is not None, f"{case['op']} {case['label']}: not in the table ({key})"
        if entry.outcome == "mixed":
            continue
        assert result["outcome"] == entry.outcome, (case["label"], result, entry)
        if entry.outcome == "crash":
            assert normalized(result["message"]) == normalized(entry.message)
        compared += 1
    assert compared >= len(PINNED)


def test_a_call_wrong_only_at_a_zero_input_is_measured_as_depending_on_values():
    """Typical floats hold -0.0 first: ``atan2(0, x)`` for a negative ``x`` is pi in torch
    and 0 in Core ML, and nowhere else wrong. A model whose y is never exactly zero computes
    right, so the cell is wrong with ``AT_ZERO`` first, which the lint reports as a
    warning (``value_dependent``); a call wrong at other values too is plainly wrong."""
    import torch

    from coreml_lint.measured.outcomes import AT_ZERO
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.measure import _zero_free, measure
    from coreml_lint.sweep.schema import in_scope
    from coreml_lint.sweep.tasks import prepare

    prepare()
    ops = {info.name: info for info in in_scope(load_optable())[0]}
    cases, _ = op_cases(ops["atan2.default"])
    (inside,) = [c for c in cases if c["label"] == "float32 consumed" and c["target"] == 15]
    (result,) = measure([inside])
    assert result["outcome"] == "wrong" and result["message"].startswith(AT_ZERO), result
    assert "Core ML 0" in result["message"] and "-6.28" in result["message"]
    assert _zero_free([torch.tensor([-0.0, 1.0]), torch.tensor([0, 1])])[0].tolist() == [0.5, 1]
    assert _zero_free([torch.tensor([2.0, 1.0])]) is None
    (wrong,) = measure([next(c for c in _cases() if c["op"] == "gelu.default")])
    assert wrong["outcome"] == "wrong"  # tanh GELU run as exact GELU: wrong everywhere
    assert not wrong["message"].startswith(AT_ZERO)


def test_a_group_with_a_failing_case_is_measured_case_by_case():
    from coreml_lint.sweep.measure import SPLIT, measure
    from coreml_lint.sweep.tasks import prepare

    prepare()
    pinned = _cases()[: len(PINNED)]
    wrong, crash = (
        next(c for c in pinned if c["op"] == op) for op in ("gelu.default", "rms_norm.default")
    )
    assert measure([wrong, crash]) == SPLIT


def test_a_worker_that_dies_or_hangs_costs_one_task_after_one_retry(tmp_path):
    """On a local Dask cluster of one worker: a task that kills its worker, and one that
    hangs past its timeout, are each tried once more on a fresh worker and then reported as
    failed; the sweep goes on (the last task is answered by yet another worker process)."""
    pytest.importorskip("distributed", reason="the sweep's engine needs dask distributed")
    from coreml_lint.sweep.engine import Engine, Task

    done, failed = [], []
    attempts = tmp_path / "exits"
    engine = Engine(1)
    try:
        tasks = (("ok", 120.0), (f"exit:{attempts}", 120.0), ("hang", 3.0), ("ok", 120.0))
        for what, timeout in tasks:
            engine.submit(Task("probe", what, timeout, done.append, failed.append))
        engine.run()
    finally:
        engine.close()
    assert len(done) == 2 and done[0] != done[1]  # the second answer came from a new worker
    assert failed[0].startswith("worker died") and failed[1].startswith("timeout")
    tries = attempts.read_text().split()
    assert len(tries) == 2 and tries[0] != tries[1]  # the retry really ran, on a new worker


def test_a_two_worker_cluster_measures_the_same_cells_as_one_process(tmp_path):
    """A sample swept on a local two-worker Dask cluster (the engine's default) gets, case for
    case, the outcome, message and keys that measuring it serially in this process gets."""
    pytest.importorskip("distributed", reason="the sweep's engine needs dask distributed")
    from coreml_lint.sweep.engine import Engine
    from coreml_lint.sweep.measure import measure
    from coreml_lint.sweep.run import Store, measure_all
    from coreml_lint.sweep.tasks import prepare

    prepare()
    cases = _cases()
    store = Store(tmp_path / "sweep")
    engine = Engine(2, on_cost=store.add_cost)
    try:
        assert engine.size == 2
        measure_all(engine, store, cases, lambda message: None)
    finally:
        engine.close()
    swept = store.results()
    assert set(swept) == {c["id"] for c in cases}
    for case in cases:
        serial = measure([case])
        assert isinstance(serial, list), case["label"]
        cell = {k: serial[0][k] for k in ("outcome", "message", "keys")}
        assert {k: swept[case["id"]][k] for k in cell} == cell, case["label"]
    assert store.cpu_seconds() > 0  # every task's CPU time, recorded as it returned


def test_rejudge_lowers_a_case_again_and_puts_todays_result_in_place(tmp_path):
    """``sweep rejudge`` after a judge change: the selected case's shard row (here made
    stale by hand) is measured again on a local worker and replaced by what today's judge
    says, which is what a serial measurement says; a case it did not select keeps its row;
    the run's CPU time is recorded beside the shards; the table is rebuilt from them. A
    ``rejudge/`` folder an interrupted run of another judge left is measured again, not
    applied."""
    pytest.importorskip("distributed", reason="the sweep's engine needs dask distributed")
    import json

    from coreml_lint.sweep import shards
    from coreml_lint.sweep.__main__ import main
    from coreml_lint.sweep.measure import measure
    from coreml_lint.sweep.run import Store
    from coreml_lint.sweep.tasks import prepare

    prepare()
    chosen, other = _cases()[:2]
    folder = tmp_path / "measurements" / "stack"
    stale = {"outcome": "wrong", "message": "semantic values (stale judge)"}
    results = {
        c["id"]: dict(stale, id=c["id"], op=c["op"], target=c["target"], keys=[])
        for c in (chosen, other)
    }
    shards.write(folder, [chosen, other], results)
    ids = tmp_path / "ids.txt"
    ids.write_text(chosen["id"] + "\n")
    left = Store(tmp_path / "sweep" / "rejudge")  # another judge's, stopped before applying
    (left.folder / "judge.txt").write_text("another judge")
    planted = dict(id=chosen["id"], op=chosen["op"], target=chosen["target"], keys=[])
    left.append(left.results_path, dict(planted, outcome="crash", message="another judge"))
    table = tmp_path / "table.json"
    argv = ["rejudge", "--out", str(tmp_path / "sweep"), "--shards", str(folder)]
    argv += ["--table", str(table), "--workers", "1", "--only", str(ids), "--outcomes", "wrong"]
    assert main(argv) == 0
    kept, _ = shards.read(folder)
    (serial,) = measure([chosen])
    assert {k: kept[chosen["id"]][k] for k in ("outcome", "message")} == {
        k: serial[k] for k in ("outcome", "message")
    }
    assert kept[other["id"]]["message"] == stale["message"]  # not selected: untouched
    (run,) = shards.runs(folder).values()
    assert run["cpu_seconds"] > 0
    assert not (tmp_path / "sweep" / "rejudge").exists()
    assert json.loads(table.read_text())["ops"]
