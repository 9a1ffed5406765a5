"""The shipped op-behaviour table still describes the installed stack: a sampled subset of
the sweep's cases is generated again (generation is deterministic) and measured with the
stock ``CoreMLPartitioner``, and each outcome must be the table's. Also the sweep's worker
pool: a worker that dies or hangs costs its task, never the sweep.

Under a minute: a handful of lowerings. The full sweep is ``python -m coreml_lint.sweep``.
"""

from __future__ import annotations

import random

import pytest

from coreml_lint.program.behaviour import TABLE_PATH, Key, load_table, normalized

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


def test_a_group_with_a_failing_case_is_measured_case_by_case():
    from coreml_lint.sweep.measure import SPLIT, measure
    from coreml_lint.sweep.tasks import prepare

    prepare()
    pinned = _cases()[: len(PINNED)]
    wrong, crash = (
        next(c for c in pinned if c["op"] == op) for op in ("gelu.default", "rms_norm.default")
    )
    assert measure([wrong, crash]) == SPLIT


def test_a_worker_that_dies_or_hangs_costs_one_task():
    from coreml_lint.sweep.pool import Pool, Task

    done, failed = [], []
    pool = Pool(1)
    try:
        for what, timeout in (("ok", 60.0), ("exit", 60.0), ("hang", 3.0), ("ok", 60.0)):
            pool.submit(Task("probe", what, timeout, done.append, failed.append))
        pool.run()
    finally:
        pool.close()
    assert len(done) == 2 and done[0] != done[1]  # the second answer came from a new worker
    assert failed[0].startswith("worker died") and failed[1].startswith("timeout")
