"""How the op table answers keys users write that the sweep measured only one factor at a
time: a crash one argument change causes, a shape class measured elsewhere, a crash of the
program boundary, a value-dependent divergence, what was measured consumed inside the
partition. Torch-free: a small table written in the shipped format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coreml_lint.measured import outcomes
from coreml_lint.measured import table as measured_table
from coreml_lint.measured.families import family
from coreml_lint.measured.key import Key
from coreml_lint.measured.outcomes import BOUNDARY_CRASH, value_dependent, value_range
from coreml_lint.measured.table import (
    BASE,
    FACTOR,
    MEASURED,
    SHAPE,
    SIGN,
    UNIT,
    WORD,
    load_table,
)
from coreml_lint.measured.values import value_class

TOPK, UNSHUFFLE, POOL = (
    "aten.topk.default",
    "aten.pixel_unshuffle.default",
    "aten.max_pool1d.default",
)
SORT = "Exception: For opset <= iOS16, only sorted=True supported for the topk"
OPSET = "ValueError: No available version for pixel_unshuffle in the iOS15 opset"


def _table(tmp_path, rows: dict[str, list[list]], bases: dict[str, str]):
    messages = sorted({r[6] for op in rows.values() for r in op if r[6]})
    ops = {
        op: [[*r[:6], messages.index(r[6]) if r[6] else None, 1] for r in op_rows]
        for op, op_rows in rows.items()
    }
    data = {
        "format": 1,
        "measured_with": {"coremltools": "9.0"},
        "bases": bases,
        "arg_names": {TOPK: ["self", "k", "dim", "largest", "sorted"]},
        "messages": messages,
        "ops": ops,
    }
    path = tmp_path / "behaviour.json"
    path.write_text(json.dumps(data))
    return load_table(path)


@pytest.fixture
def table(tmp_path):
    f32 = "float32:in"
    return _table(
        tmp_path,
        {
            TOPK: [
                [f32, "a1=1", "", "r2", "15,18", "ok", ""],
                [f32, "a1=int", "", "r2", "15,18", "ok", ""],
                [f32, "a1=1;a2=-1;a3=True;a4=False", "", "r2", "15", "crash", SORT],
                [f32, "a1=1;a2=-1;a3=True;a4=False", "", "r2", "16-18", "ok", ""],
            ],
            UNSHUFFLE: [
                [f32, "a1=1", "", "*", "15", "crash", OPSET],
                [f32, "a1=1", "", "r4", "16-18", "ok", ""],
                [f32, "a1=1", "", "r3u", "16-18", "crash", "ValueError: not enough values"],
                [f32, "a1=int", "", "r4", "15", "crash", OPSET],
                [f32, "a1=int", "", "r4", "16-18", "ok", ""],
            ],
            POOL: [  # the base call crashes everywhere: a variant is no sign of its cause
                [f32, "", "", "*", "15", "crash", "E: 2 inputs"],
                [f32, "a2=ints1", "", "r2", "15", "crash", "E: rank"],
                [f32, "a2=ints1;a3=ints1", "", "r2", "15", "crash", "E: 2 inputs"],
            ],
        },
        {TOPK: "a1=1", UNSHUFFLE: "a1=1", POOL: ""},
    )


def test_a_crash_one_changed_argument_causes_is_predicted_with_other_arguments(table):
    users = Key(TOPK, "float32:in", "a1=int;a2=-1;a3=True;a4=False;outputs=partly-unused", "r2")
    assert table.lookup(users, 15) is None
    answer = table.answer(users, 15)
    assert answer.basis == FACTOR and answer.entry.message == SORT and answer.predicted
    assert table.answer(users, 16) is None  # measured ok at iOS16: nothing to predict
    sorted_call = Key(TOPK, "float32:in", "a1=int;a2=-1;a3=True", "r2")
    assert table.answer(sorted_call, 15) is None  # no change the crash needs


def test_a_prediction_at_a_shape_class_is_made_from_its_size_one_twin(table):
    """A layer's batch of one keys ``r2u``; the crash its change causes was measured at
    ``r2``: predicted from there, as a measurement at the twin is read (not at ``r3``)."""
    users = Key(TOPK, "float32:in", "a1=int;a2=-1;a3=True;a4=False;outputs=partly-unused", "r2u")
    answer = table.answer(users, 15)
    assert answer is not None and answer.basis == FACTOR and answer.entry.message == SORT
    assert table.answer(users, 16) is None
    assert table.answer(Key(TOPK, users.operands, users.variant, "r3"), 15) is None


def test_a_crash_at_every_measured_origin_is_predicted_at_another(tmp_path):
    """``&`` of int64 crashes as two inputs, made in the program beside an input and beside
    a constant: int64 made in the program beside a constant is predicted to crash. Not
    where one origin converts, from a single origin measured, or for an origin never
    measured in its place (a crash of int8 inputs says nothing of int8 made inside)."""
    from coreml_lint.measured.table import ORIGIN

    band, refused = "aten.bitwise_and.Tensor", "E: only bool"
    rows = [
        ["int64:in,int64:in", "", "", "r2", "15", "crash", refused],
        ["int64:op,int64:in", "", "", "r2", "15", "crash", refused],
        ["int64:in,int64:const", "", "", "r2", "15", "crash", refused],
        ["int32:in,int32:in", "", "", "r2", "15", "crash", refused],
        ["int32:in,int32:const", "", "", "r2", "15", "ok", ""],
    ]
    found = _table(tmp_path, {band: rows}, {band: ""})
    answer = found.answer(Key(band, "int64:op,int64:const", "", "r2"), 15)
    assert answer.basis == ORIGIN and answer.entry.message == refused and answer.predicted
    from coreml_lint.rules.cml801_measured_op_behaviour import _message

    said = _message(Key(band, "int64:op,int64:const", "", "r2"), answer, 15, found, None)
    assert "predicted (these operands were not measured where they come from" in said
    assert f"lowering crashes: `{refused}`" in said
    assert found.answer(Key(band, "int32:op,int32:const", "", "r2"), 15) is None  # one is ok
    assert found.answer(Key(band, "int16:op,int16:const", "", "r2"), 15) is None
    assert found.answer(Key(band, "int64:op,int64:op", "", "r2"), 15) is None  # never 2nd
    alone = _table(tmp_path, {band: rows[:1]}, {band: ""})
    assert alone.answer(Key(band, "int64:op,int64:const", "", "r2"), 15) is None


def _predicted(table, node: Key, basis: str, message: str) -> tuple[Any, str]:
    """The answer the table predicts for ``node`` at iOS15 (checked: by ``basis``, the crash
    ``message``) and what CML801 prints for it."""
    from coreml_lint.rules.cml801_measured_op_behaviour import _message

    answer = table.answer(node, 15)
    assert answer.basis == basis and answer.entry.message == message and answer.predicted
    return answer, _message(node, answer, 15, table, None)


def test_an_op_crashing_alike_in_every_measured_call_is_predicted_to_crash_anywhere(tmp_path):
    """``searchsorted`` is neither kept whole by the partitioner nor core ATen: every call
    measured crashes in ExecuTorch's edge verifier, whatever its dtypes, origins, arguments
    or shape, so a sorted constant of boundaries (never measured first) crashes too. Not
    where one call converts, another reason shows, at a target measured ok, or from calls
    of one dtype alone."""
    from coreml_lint.measured.table import ALWAYS

    op = "aten.searchsorted.Tensor"
    refused = f"SpecViolationError: Operator {op} is not in Core ATen opset"
    rows = [
        [o, v, "", s, "15-18", "crash", refused]
        for o in ("float32:in,float32:in", "float32:in,float32:const", "int32:in,int32:in")
        for v in ("", "right=True")
        for s in ("r2", "r3")
    ]
    node = Key(op, "float32:const,float32:in", "", "r1")
    found = _table(tmp_path, {op: rows}, {op: ""})
    answer, said = _predicted(found, node, ALWAYS, refused)
    assert "every call of the op measured at this target crashes alike" in said
    # the edge verifier's refusal: no CPU fallback answers it, and the fix says so
    from coreml_lint.rules.cml801_measured_op_behaviour import _fix, edge_refused

    assert edge_refused(answer.entry)
    assert _fix(found, answer.entry, 15, node, True, answer).startswith("replace the op")
    from coreml_lint.core.findings import Finding, Outcome, Severity
    from coreml_lint.rules.cml801_measured_op_behaviour import MeasuredOpBehaviour

    finding = Finding("CML801", "m", Severity.ERROR, Outcome.CRASH, said, "p.pt2", node="n")
    finding.extra["measured"] = "crash"
    why = MeasuredOpBehaviour().unanswered(finding)  # lower stops before lowering, saying so
    assert why is not None and "coreml-lint lower has no answer: replace the op" in why
    one_ok = _table(tmp_path, {op: [*rows, [rows[0][0], "a4=left", "", "r2", "15", "ok", ""]]}, {})
    assert one_ok.answer(node, 15) is None
    other = _table(
        tmp_path, {op: [*rows, [rows[0][0], "a4=left", "", "r2", "15", "crash", "E"]]}, {}
    )
    assert other.answer(node, 15) is None
    one_dtype = _table(tmp_path, {op: [r for r in rows if r[0].startswith("float32")]}, {})
    assert one_dtype.answer(node, 15) is None
    later = _table(tmp_path, {op: [[*r[:4], "15", *r[5:]] for r in rows]}, {})
    assert later.answer(node, 15) is not None and later.answer(node, 16) is None


def test_a_crash_every_call_at_a_shape_class_shows_is_predicted_there(tmp_path):
    """A group norm of a 5-d input crashes (Core ML's rank limit inside the converter) where
    the same call converts at rank 4: a 5-d call with other arguments and constant weights,
    never measured, is predicted to crash; not at a rank where it converts, nor where the
    crashing call was never seen converting elsewhere (then the call may be the cause)."""
    from coreml_lint.measured.table import RANK

    op, limit = "aten.group_norm.default", "ValueError: Core ML only supports rank <= 5"
    rows = [
        ["float32:in", "a1=1", "", "r5u", "15-18", "crash", limit],
        ["float32:in", "a1=1", "", "r4", "15-18", "ok", ""],
        ["float32:in", "a1=2", "", "r4", "15-18", "ok", ""],
    ]
    node = Key(op, "float32:in,float32:const,float32:const", "a1=4;a4=tiny;a5=False", "r5u")
    found = _table(tmp_path, {op: rows}, {op: "a1=1"})
    _, said = _predicted(found, node, RANK, limit)
    assert "every call of the op measured at shape class r5u crashes alike" in said
    assert found.answer(Key(op, node.operands, node.variant, "r4u"), 15) is None
    never_elsewhere = _table(tmp_path, {op: [rows[0], rows[2]]}, {op: "a1=1"})
    assert never_elsewhere.answer(node, 15) is None


def test_a_change_that_crashes_like_the_base_call_predicts_nothing(table):
    # the pool's base call crashes "E: 2 inputs" everywhere, so a variant crashing the same
    # way says nothing about its own change
    key = Key(POOL, "float32:in", "a2=ints1;a3=ints1;a4=ints1", "r2")
    found = table.answer(key, 15)
    assert found is None or found.basis == BASE


def test_a_shape_measured_elsewhere_answers_where_the_op_is_alike_at_every_shape(table):
    five = Key(UNSHUFFLE, "float32:in", "a1=int", "r5")
    answer = table.answer(five, 15)
    assert answer.basis == SHAPE and answer.entry.message == OPSET and not answer.predicted
    # at iOS16 the op's base call differs by shape: the r4 measurement stays at r4
    assert table.answer(five, 16) is None
    # ... but answers a batch of one at r4 (the same rank with a size-1 dim)
    batch_of_one = Key(UNSHUFFLE, "float32:in", "a1=int", "r4u")
    assert table.answer(batch_of_one, 15).basis == UNIT
    answer = table.answer(batch_of_one, 16)
    assert answer.basis == UNIT and answer.entry.outcome == "ok" and answer.entry.shape == "r4"
    assert table.answer(Key(UNSHUFFLE, "float32:in", "a1=int", "r4"), 16).basis == MEASURED


def test_workarounds_prefer_the_variant_closest_to_the_node(table):
    users = Key(TOPK, "float32:in", "a1=int;a2=-1;a3=True;a4=False", "r2")
    entry = table.answer(users, 15).entry
    found = table.workarounds(entry, 15, users)
    assert found[0].startswith("minimum_deployment_target iOS16")
    assert "k=int" in found[-1] or "k=1" in found[-1]


def test_float_classes_keep_the_sign():
    assert value_class(-0.5) == "-frac" and value_class(0.5) == "frac"
    assert value_class(-3.4e38) == "-huge" and value_class(-2.0) == "-whole"


def test_value_dependent_outcomes_say_what_range_fails(tmp_path):
    table = _table(
        tmp_path,
        {
            "aten.pow.Scalar": [
                ["float32:in", "a0=big", "", "r2", "15", "wrong", "float16 inf (pow): 2 inf"],
                ["float32:in", "a0=frac", "", "r2", "15", "wrong", "semantic values (pow): x"],
            ]
        },
        {"aten.pow.Scalar": "a0=int"},
    )
    big = table.lookup(Key("aten.pow.Scalar", "float32:in", "a0=big", "r2"), 15)
    assert value_dependent(big)
    assert "65504" in value_range(big) and "a0=big" in value_range(big)
    frac = table.lookup(Key("aten.pow.Scalar", "float32:in", "a0=frac", "r2"), 15)
    assert not value_dependent(frac)  # wrong in the float32 pass: the op's semantics


def test_an_int32_wrap_beside_a_big_argument_depends_on_the_values(tmp_path):
    """Core ML computes int64 as int32: ``ids * 10_000_000`` wraps only where the ids pass
    214, so the measured wrap is a warning naming int32's range, and the fix never offers
    another kind of dtype (float16 ids are another model)."""
    op = "aten.mul.Tensor"
    table = _table(
        tmp_path,
        {
            op: [
                ["int64:op", "a1=big", "", "r2", "15", "wrong", "semantic integer (mul): 3e10"],
                ["int64:op", "a1=-1", "", "r2", "15", "ok", None],
                ["float16:op", "a1=big", "", "r2", "15", "ok", None],
                ["int64:op", "a1=7", "", "r2", "15", "wrong", "semantic integer (mul): 5"],
            ]
        },
        {op: ""},
    )
    wrap = table.lookup(Key(op, "int64:op", "a1=big", "r2"), 15)
    assert value_dependent(wrap) and "int32's range" in value_range(wrap)
    assert not any("float16" in w for w in table.workarounds(wrap, 15))
    assert any("other=-1" in w or "a1=-1" in w for w in table.workarounds(wrap, 15))
    # a wrong integer with no argument past int32's reach is the op's, whatever the values
    assert not value_dependent(table.lookup(Key(op, "int64:op", "a1=7", "r2"), 15))


def test_zero_stride_crashes_are_the_boundarys():
    assert outcomes.boundary_crash("RuntimeError: 0 in strides is not supported for ExecuTorch.")
    shipped = load_table(measured_table.TABLE_PATH)
    mesh = shipped.entries[("aten.meshgrid.indexing", "float32:in,float32:in", "indexing=ij", "")]
    assert {e.outcome for e in mesh if e.shape == "r1"} == {BOUNDARY_CRASH}  # its 1-d inputs


def test_a_later_sample_adds_cells_and_never_changes_a_measured_one():
    from coreml_lint.sweep.table import merge_new

    def table(rows, messages):
        return {
            "measured_with": {"coremltools": "9.0"},
            "sweep": {"cases": 1},
            "bases": {},
            "arg_names": {},
            "messages": messages,
            "ops": {"aten.neg.default": rows},
        }

    shipped = table([["float32:in", "", "", "r2", "15", "ok", None, 1]], [])
    extra = table(
        [
            ["float32:in", "", "", "r3", "15", "crash", 0, 1],  # a cell the shipped one has
            ["float32:in", "", "inside", "r2", "15", "crash", 0, 1],  # a new one
        ],
        ["E: boom"],
    )
    merged = merge_new(shipped, extra, "a sample")
    assert merged["ops"]["aten.neg.default"] == [
        ["float32:in", "", "", "r2", "15", "ok", None, 1],
        ["float32:in", "", "inside", "r2", "15", "crash", 0, 1],
    ]
    assert merged["messages"] == ["E: boom"] and merged["sweep"]["added"][0]["rows"] == 1


PAD = "aten.pad.default"
MODE = "ValueError: Pad mode should be one of {'constant', 'reflect', 'replicate'}"


def _pads(tmp_path, circular: list[list]):
    f32 = "float32:in"
    rows = [
        [f32, "a1=[4,4]", "", "r2", "15,18", "ok", ""],
        [f32, "a1=[4,4]", "", "r3", "15,18", "ok", ""],
        [f32, "a1=[4,4];a2=reflect", "", "r2", "15,18", "ok", ""],
        *circular,
    ]
    tmp_path.mkdir(exist_ok=True)
    return _table(tmp_path, {PAD: rows}, {PAD: "a1=[4,4]"})


def test_a_mode_that_crashes_wherever_it_was_measured_is_predicted_at_any_rank(tmp_path):
    """A circular pad crashed at every rank and pad measured ("Pad mode should be one of
    ..."), while the other modes convert: a convolution's circular padding, a pad of
    ``[1, 1, 1, 1]`` on a 4-d input, is predicted to crash though neither was measured."""
    f32 = "float32:in"
    crashes = [
        [f32, "a1=[4,4];a2=circular", "", "r2", "15,18", "crash", MODE],
        [f32, "a1=[4,4];a2=circular", "", "r3", "15,18", "crash", MODE],
        [f32, "a1=[1,0];a2=circular", "", "r2", "15,18", "crash", MODE],
    ]
    conv = Key(PAD, f32, "a1=[1,1,1,1];a2=circular", "r4")
    answer = _pads(tmp_path / "a", crashes).answer(conv, 15)
    assert answer.basis == WORD and answer.cause == "a2=circular" and answer.predicted
    assert answer.entry.message == MODE
    assert (
        _pads(tmp_path / "a", crashes).answer(Key(PAD, f32, "a1=[1,1,1,1];a2=reflect", "r4"), 15)
        is None
    )
    # fewer cells, one shape class, or one cell of the word converting: no prediction
    assert _pads(tmp_path / "b", crashes[:2]).answer(conv, 15) is None
    one_shape = [
        crashes[0],
        crashes[2],
        [f32, "a1=[2,2];a2=circular", "", "r2", "15", "crash", MODE],
    ]
    assert _pads(tmp_path / "c", one_shape).answer(conv, 15) is None
    fine = [*crashes, [f32, "a1=[2,2];a2=circular", "", "r3u", "15", "ok", ""]]
    assert _pads(tmp_path / "d", fine).answer(conv, 15) is None
    # the same crash without the word: the word is not its cause
    elsewhere = [*crashes, [f32, "a1=[2,2];a2=reflect", "", "r3", "15", "crash", MODE]]
    assert _pads(tmp_path / "e", elsewhere).answer(conv, 15) is None
    # the fix names the modes measured converting at the node's shape
    rows = [*crashes, [f32, "a1=[1,1,1,1];a2=reflect", "", "r4", "15", "ok", ""]]
    table = _pads(tmp_path / "f", rows)
    assert table.converting_values(conv, "a2", 15, "") == ["reflect"]


CROP = "ValueError: pad must be non-negative integer, got -1 at index 0"


def test_a_negative_pad_that_crashes_wherever_it_was_measured_is_predicted_at_any_rank(
    tmp_path,
):
    """A crop by a negative pad crashed at every rank and length measured while positive
    pads convert: a U-Net's ``F.pad(skip, (-2, -2, -2, -2))`` of a 4-d input is predicted
    to crash, though no 4-d crop was measured; a positive pad there is not answered."""
    f32 = "float32:in"
    crops = [
        [f32, "a1=[-1,-1]", "", "r2", "15,18", "crash", CROP],
        [f32, "a1=[-1,-1]", "", "r3", "15,18", "crash", CROP],
        [f32, "a1=[-1,-1,-1,-1]", "", "r2", "15,18", "crash", CROP],
    ]
    unet = Key(PAD, f32, "a1=[-2,-2,-2,-2]", "r4u")
    answer = _pads(tmp_path / "a", crops).answer(unet, 15)
    assert answer.basis == SIGN and answer.cause == "a1=[-2,-2,-2,-2]" and answer.predicted
    assert answer.entry.message == CROP
    assert _pads(tmp_path / "a", crops).answer(Key(PAD, f32, "a1=[2,2,2,2]", "r4u"), 15) is None
    # one shape class (r2), or a negative pad measured converting: no prediction
    assert _pads(tmp_path / "c", crops[::2]).answer(unet, 15) is None
    fine = [*crops, [f32, "a1=[0,-1]", "", "r3", "15", "ok", ""]]
    assert _pads(tmp_path / "d", fine).answer(unet, 15) is None


def test_an_unmeasured_call_is_not_answered_where_that_way_of_answering_fell_short(table):
    """The shipped table's hold-out benchmark says, per op family, which ways of answering
    an unmeasured call fell below 95 % precision; there the call is not measured, never
    guessed. A measured call is always answered."""
    users = Key(TOPK, "float32:in", "a1=4;a2=-1;a3=True;a4=False;outputs=partly-unused", "r2")
    assert table.answer(users, 15).basis == FACTOR  # no hold-out measured: every way
    table.refused = {FACTOR: frozenset({family(TOPK)})}
    assert table.answer(users, 15) is None
    measured = Key(TOPK, "float32:in", "a1=1;a2=-1;a3=True;a4=False", "r2")
    assert table.answer(measured, 15).basis == MEASURED
    table.refused = {FACTOR: frozenset({"pooling"})}  # another family's shortfall
    assert table.answer(users, 15).basis == FACTOR


def test_the_shipped_table_carries_what_its_hold_out_measured():
    table = measured_table.load_table(measured_table.TABLE_PATH)
    assert table.refused is not None, "benchmarks/optable_holdout.py --write-gates"
    assert measured_table.load_table(measured_table.TABLE_PATH, gated=False).refused is None


def test_a_way_of_answering_is_refused_where_its_held_out_answers_fall_short():
    """95 % precision on five answers or more; below five, two wrong answers already say it
    does not hold there (a new family's first misses count)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "optable_holdout.py"
    spec = importlib.util.spec_from_file_location("optable_holdout", path)
    holdout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(holdout)
    counts = {
        ("ALL", "activation", "factor"): [4, 0, 0, 0],  # four answers, all wrong
        ("ALL", "pooling", "factor"): [3, 2, 0, 0],  # one wrong: too little to judge
        ("ALL", "matmul/linear", "factor"): [40, 39, 0, 0],  # 97.5 %
        ("ALL", "reduction", "factor"): [20, 18, 0, 0],  # 90 %
        ("ALL", "ALL", "factor"): [67, 59, 0, 0],  # the total is no family
    }
    assert holdout.gate_file(counts) == {"refused": {"factor": ["activation", "reduction"]}}


@pytest.mark.parametrize(
    ("base_rows", "free"),
    [
        # right at three ranks: a crash measured at one shape answers at another
        ([("r2", "ok", ""), ("r3", "ok", ""), ("r4u", "ok", "")], True),
        # right but for extreme values (a float16 overflow on the sweep's largest values)
        ([("r2", "edge", "float16 inf (mul)"), ("r3", "ok", ""), ("r5", "edge", "x")], True),
        # a cell of several cases, each right or right but for extreme values
        ([("r2", "mixed", "2 ok; 1 edge"), ("r3", "ok", ""), ("r4", "ok", "")], True),
        # one folded row stands for three ranks or more
        ([("*", "ok", "")], True),
        # two ranks are too few, though three classes agree
        ([("r2", "ok", ""), ("r3", "ok", ""), ("r3u", "ok", "")], False),
        # a crash among the base call's cells, or a mixed cell holding one
        ([("r2", "ok", ""), ("r3", "ok", ""), ("r4", "crash", "E: rank")], False),
        ([("r2", "mixed", "1 ok; 1 crash"), ("r3", "ok", ""), ("r4", "ok", "")], False),
        # a wrong base call is no control either
        ([("r2", "ok", ""), ("r3", "wrong", "max abs error 1"), ("r4", "ok", "")], False),
    ],
)
def test_an_op_is_shape_free_where_its_base_call_converts_at_three_ranks(tmp_path, base_rows, free):
    """What a dtype or an argument does, measured at one shape, answers at another only
    where the op's float32 base call converts (right, or right but for extreme values) at
    every shape class measured, of three ranks or more."""
    op, refused = "aten.logit.default", "E: dtype refused"
    rows = [["float32:in", "", "", shape, "15", outcome, why] for shape, outcome, why in base_rows]
    rows.append(["float16:op", "", "", "r2", "15", "crash", refused])
    found = _table(tmp_path, {op: rows}, {op: ""})
    assert found.shape_free(op) is free
    answer = found.answer(Key(op, "float16:op", "", "r4"), 15)
    if free:
        assert answer.basis == SHAPE and answer.entry.message == refused
    else:
        assert answer is None or answer.entry.message != refused


def test_an_op_of_integer_data_is_read_for_its_arguments_on_its_own_inputs():
    """``x & 0xFF`` takes integers: whether its arguments change its outcome is read off the
    variants measured on its base call's inputs (int64), as a float op's are off float32,
    so an int64 made inside Core ML with a mask never measured is predicted from the crash
    of the base call made there."""
    from coreml_lint.measured.key import Key
    from coreml_lint.measured.table import BASE
    from coreml_lint.measured.versions import active_table

    table = active_table()
    op = "aten.bitwise_and.Scalar"
    assert table.variant_free(op)
    answer = table.answer(Key(op, "int64:op", "a1=big", "r2"), 18)
    assert answer is not None and answer.basis == BASE and answer.entry.outcome == "crash"


def test_answers_are_worked_out_afresh_for_new_local_measurements_and_new_tables(
    table, tmp_path, monkeypatch
):
    """A model asks one key many times, so answers are kept; but not past ``--measure``
    reading this machine's measurements again, nor into a table made from this one."""
    from dataclasses import replace

    from coreml_lint.measured.table import HERE

    unmeasured = Key(TOPK, "float32:in", "a1=1;a2=0", "r2")
    assert table.answer(unmeasured, 18) is None
    local = tmp_path / "cache" / "behaviour.json"
    local.parent.mkdir()
    local.write_text((tmp_path / "behaviour.json").read_text().replace('"a1=1"', '"a1=1;a2=0"'))
    monkeypatch.setattr(measured_table, "cache_folder", lambda: local.parent)
    measured_table.use_local_measurements(True)
    try:
        answer = table.answer(unmeasured, 18)
        assert answer is not None and answer.basis == HERE and answer.entry.outcome == "ok"
    finally:
        measured_table.use_local_measurements(False)
    measured = Key(TOPK, "float32:in", "a1=1", "r2")
    assert table.answer(measured, 18).basis == MEASURED
    assert replace(table, entries={}, by_op={}).answer(measured, 18) is None
