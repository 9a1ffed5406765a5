"""The op-behaviour sweep and its table: keys, folding, the reader, version awareness, the
schema-driven generator, and the shipped table's content (which catalogue pitfalls the
sweep found without being told). Fast: nothing here lowers (test_sweep_drift.py does)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from coreml_lint.measured import table as measured_table
from coreml_lint.measured import values as measured_values
from coreml_lint.measured import versions as measured_versions
from coreml_lint.measured.entry import format_targets, parse_targets
from coreml_lint.measured.key import Key
from coreml_lint.measured.table import load_table
from coreml_lint.measured.values import value_class
from coreml_lint.measured.versions import active_table, declare_versions, version_note
from coreml_lint.program.graph import DType, TensorRef


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, "None"),
        (True, "True"),
        (0, "0"),
        (-1, "-1"),
        (7, "int"),
        (3001, "big"),
        (-3001, "-big"),
        (2**31 - 1, "big"),
        (-(2**31), "-big"),  # int32 holds it
        (-(2**32) + 1, "-big64"),  # past int32: Core ML's integer wraps
        (2**63 - 1, "big"),  # a slice's open end: a sentinel, not a value
        (0.5, "frac"),
        (3.0, "whole"),
        (1.0, "1.0"),  # a floor division by one is folded away: x % 1.0 is x - x
        (-1.0, "-1.0"),
        (1, "1"),  # the integer is another call (an int constant)
        (1e-6, "tiny"),
        (7e4, "huge"),
        (float("-inf"), "-inf"),
        (float("nan"), "nan"),
        ("tanh", "tanh"),
        (DType("float16"), "float16"),
        ([2, 2], "ints2"),
        ([0, -1], "ints2-0"),
        ([], "[]"),
        ([TensorRef("i"), None], "[T,None]"),
    ],
)
def test_argument_values_are_keyed_by_class(value, expected):
    assert value_class(value) == expected


@pytest.mark.parametrize(
    "value, text, its_class",
    [
        ([2, 2], "[2,2]", "ints2"),
        ([3, 3], "[3,3]", "ints2"),
        ([0, -1], "[0,-1]", "ints2-0"),
        (7, "7", "int"),
        (-3, "-3", "-int"),
        (3001, "big", "big"),  # past the exact range: its class
        ([1] * 7, "ints7", "ints7"),  # a long list: its class
        (0.5, "frac", "frac"),
        ("tanh", "tanh", "tanh"),
    ],
)
def test_small_integers_and_their_lists_are_keyed_exactly(value, text, its_class):
    """A stride of [1, 1] and one of [3, 3] can lower differently: the key keeps the exact
    value, and its class is recovered from the text (to read a table keyed by classes)."""
    assert measured_values.value_text(value) == text
    assert measured_values.class_of_text(text) == its_class
    assert (
        measured_values.class_variant(f"a1={text};keepdim=True") == f"a1={its_class};keepdim=True"
    )


@pytest.mark.parametrize(
    "scales, shape, text",
    [
        ([1.3, 1.3], (1, 3, 4, 4), "[frac,frac]"),  # 5.2: a fractional output size
        ([1.5, 1.5], (1, 3, 10, 10), "[frac(whole),frac(whole)]"),  # 15: a whole one
        ([2.0, 1.5], (1, 3, 4, 5), "[whole,frac]"),  # each factor against its own dim
        ([1.5, 1.5], (1, 3, "s0", 4), "[frac,frac]"),  # a symbolic dim: its class
        ([0.5], (1, 3, 4, 4, 4), "[frac(whole)]"),  # the trailing dims only
    ],
)
def test_scale_factors_are_keyed_by_whether_the_output_size_is_whole(scales, shape, text):
    """coremltools' upsample refuses a fractional output size (``4 * 1.3``) and converts a
    whole one (``10 * 1.5``): one float class for both made ExecuTorch's own suite cases
    of the second kind false alarms."""
    assert measured_values.value_text(scales, shape) == text
    assert (
        measured_values.value_text(scales)
        == "[" + ",".join(measured_values.value_class(f) for f in scales) + "]"
    )  # without the operand's shape: the classes


AVG3, MAX2, AVG2 = "aten.avg_pool3d.default", "aten.max_pool2d.default", "aten.avg_pool2d.default"
DROPPED = "True(last window dropped)"


@pytest.mark.parametrize(
    "op, args, shape, text",
    [
        (AVG3, [None, [3, 3, 3], [3, 3, 3], [0, 0, 0], True], (1, 2, 16, 16, 16), "True"),
        (AVG3, [None, [2, 2, 2], [2, 2, 2], [0, 0, 0], True], (1, 2, 4, 4, 4), "True(same size)"),
        (AVG3, [None, [1, 1, 1], [2, 2, 2], [0, 0, 0], True], (1, 2, 4, 4, 4), DROPPED),
        (AVG3, [None, [1, 1, 1], [1, 1, 1], [0, 0, 0], False], (1, 2, 4, 4, 4), None),
        (MAX2, [None, [3, 3], [], [0, 0], [1, 1], True], (1, 2, 4, 4), "True"),
        (MAX2, [None, [3, 3], [], [0, 0], [1, 1], True], (1, 2, "s0", 4), None),
        (AVG2, [None, [2, 2], [2, 2], [0, 0], True], None, None),
    ],
)  # fmt: skip
def test_a_ceil_mode_is_keyed_by_what_it_does_to_the_output_size(op, args, shape, text):
    """coremltools decides by it: its 3-d pools refuse a ceil that adds a window and take
    one whose windows tile the input; its 1-d and 2-d pools size a ceil whose extra window
    torch drops again with that window (wrong). ExecuTorch's own suite's pools (kernel 3,
    ceil, 16 wide) add a window: one class for all three had answered them as the sweep's
    dropped-window calls (wrong) or tiling ones (ok)."""
    from coreml_lint.measured.key import variant_of
    from coreml_lint.program.graph import Node, TensorRef

    assert measured_values.ceil_text(op, args, shape) == text
    node = Node("n", op, [TensorRef("x"), *args[1:]], {}, ["n"])
    ceil = variant_of(node, shape).split(";")[-1]
    assert ceil.partition("=")[2] == (text or str(args[-1]))


@pytest.mark.parametrize(
    "shapes, flag, text",
    [
        ([(1, 8, 5, 16), (1, 2, 5, 16), (1, 2, 5, 16)], True, "grouped"),
        ([(1, 8, 5, 16), (1, 8, 5, 16), (1, 8, 5, 16)], True, "True"),
        ([(1, 8, 5, 16), (1, 2, 5, 16), (1, 2, 5, 16)], False, "False"),
        ([(1, 8, 5, 16), (1, "s0", 5, 16), (1, 2, 5, 16)], True, "True"),
        ([(4, 4), (4, 4), (4, 4)], True, "True"),
    ],
)  # fmt: skip
def test_grouped_query_attention_is_keyed_by_its_heads(shapes, flag, text):
    """Light: an attention's ``enable_gqa`` is keyed by whether its key has other heads
    than its query (dim -3), and as given where a size is unknown."""
    from coreml_lint.measured.key import variant_of
    from coreml_lint.program.graph import Node, TensorRef

    op = "aten.scaled_dot_product_attention.default"
    node = Node(
        "n", op, [TensorRef("q"), TensorRef("k"), TensorRef("v")], {"enable_gqa": flag}, ["n"]
    )
    assert variant_of(node, shapes[0], shapes) == f"enable_gqa={text}"


@pytest.mark.parametrize(
    "op, dim, shapes, text",
    [
        ("aten.gather.default", 1, [(8, 10, 3), (8, 4, 2)], "index=narrower"),
        ("aten.gather.default", 1, [(8, 10, 3), (8, 4, 3)], ""),  # K of N along dim
        ("aten.gather.default", -1, [(8, 10, 3), (8, 10, 2)], ""),
        ("aten.scatter.src", 1, [(3, 6), (3, 3), (3, 6)], "src=wider"),
        ("aten.scatter.src", 1, [(3, 6), (2, 3), (3, 6)], "index=narrower;src=wider"),
        ("aten.scatter.src", 1, [(3, 6), (3, 6), (3, 6)], ""),
        ("aten.scatter_add.default", 0, [(4, 4), (2, 4), (2, 4)], ""),
        ("aten.scatter.value", 0, [(4, 4), (4, 2)], "index=narrower"),
        ("aten.gather.default", 1, [(8, "s0", 3), (8, 4, 3)], ""),  # a size unknown
        ("aten.gather.default", 1, [("s0", 10, 3), ("s0", 4, 2)], "index=narrower"),
        ("aten.index_select.default", 0, [(4, 4), (2,)], ""),  # not along a dim's index
    ],
)  # fmt: skip
def test_a_gather_or_scatter_is_keyed_by_how_its_index_fits_its_input(op, dim, shapes, text):
    """Light: an index narrower than the input on a dim other than ``dim``, and a
    scatter's ``src`` wider than its index, are keyed (coremltools wants the shapes equal);
    an index narrower along ``dim`` (K of N) is the ordinary call."""
    from coreml_lint.measured.key import variant_of
    from coreml_lint.program.graph import Node, TensorRef

    refs = [TensorRef(f"t{i}") for i in range(len(shapes))]
    node = Node("n", op, [refs[0], dim, *refs[1:]], {}, ["n"])
    assert variant_of(node, shapes[0], shapes) == ";".join(filter(None, [f"a1={dim}", text]))


def test_a_ceil_keyed_as_adding_a_window_is_one_torch_sizes_otherwise():
    """Against torch's own output sizes, over random pools of every kind and rank: a ceil
    keyed ``True`` changes a size, one keyed otherwise changes none."""
    import random

    torch = pytest.importorskip("torch")
    rnd = random.Random(0)
    compared = 0
    for _ in range(400):
        n, kind = rnd.choice([1, 2, 3]), rnd.choice(["avg", "max"])
        x = torch.randn(1, 2, *[rnd.randint(1, 9) for _ in range(n)])
        k, s = rnd.randint(1, 4), rnd.choice([None, 1, 2, 3])
        args = [[k] * n, [s] * n if s else [], [rnd.randint(0, k // 2)] * n]
        if kind == "max":
            args.append([rnd.randint(1, 2)] * n)
        op = getattr(torch.ops.aten, f"{kind}_pool{n}d").default
        try:
            floor, ceil = op(x, *args, False).shape, op(x, *args, True).shape
        except RuntimeError:  # an illegal pool (a window wider than the padded input)
            continue
        name = f"aten.{kind}_pool{n}d.default"
        text = measured_values.ceil_text(name, [None, *args, True], tuple(x.shape))
        assert (text == "True") == (floor != ceil), (name, tuple(x.shape), args, text)
        compared += 1
    assert compared > 200


def _cells_table(tmp_path, op: str, cells: list[tuple[str, str, str, str, str]]):
    """A table of one op's cells (operands, variant, outcome, message, shape class) measured
    at iOS15; ``op`` in edge spelling."""
    from coreml_lint.sweep.table import build_table, write_table

    results = [
        dict(
            id=f"{operands}{variant}{outcome}{shape}",
            op=op.removeprefix("aten."),
            target=15,
            outcome=outcome,
            message=message,
            keys=[
                dict(op=op, operands=operands, variant=variant, shape=shape, context="")
                | {"placed": "coreml"}
            ],
        )
        for operands, variant, outcome, message, shape in cells
    ]
    path = tmp_path / "behaviour.json"
    write_table(path, build_table(results, {"cases": len(results)}, {}))
    return load_table(path)


def _exact_table(tmp_path, rows: list[tuple[str, str, str]]):
    """A table of ``avg_pool2d`` cells (variant, outcome, message) measured at r4, iOS15."""
    return _cells_table(tmp_path, POOL2, [("float32:in", *row, "r4") for row in rows])


POOL2 = "aten.avg_pool2d.default"


def test_an_exact_value_answers_for_another_of_its_class_only_when_all_measured_agree(tmp_path):
    from coreml_lint.measured.table import CLASS, MEASURED

    agreeing = _exact_table(
        tmp_path, [("a1=[2,2];a2=[2,2]", "ok", ""), ("a1=[2,2];a2=[3,3]", "ok", "")]
    )
    unmeasured = Key(POOL2, "float32:in", "a1=[2,2];a2=[4,4]", "r4")
    answer = agreeing.answer(unmeasured, 15)
    assert answer.entry.outcome == "ok" and answer.basis == CLASS
    measured = Key(POOL2, "float32:in", "a1=[2,2];a2=[3,3]", "r4")
    assert agreeing.answer(measured, 15).basis == MEASURED
    split = _exact_table(
        tmp_path,
        [("a1=[2,2];a2=[2,2]", "ok", ""), ("a1=[2,2];a2=[3,3]", "crash", "E: padding")],
    )
    assert split.lookup(unmeasured, 15) is None  # the class does not decide: not answered
    assert split.lookup(measured, 15).outcome == "crash"


def test_a_table_keyed_by_classes_answers_exact_keys_as_measured(tmp_path):
    from coreml_lint.measured.table import MEASURED

    old = _exact_table(tmp_path, [("a1=ints2;a2=ints2", "crash", "E: rank")])
    answer = old.answer(Key(POOL2, "float32:in", "a1=[3,3];a2=[2,2]", "r4"), 15)
    assert answer.entry.outcome == "crash" and answer.basis == MEASURED


def test_a_crash_one_value_causes_is_predicted_whatever_the_other_arguments(tmp_path):
    """``ceil_mode=True`` crashes where the same call with the default converts (export
    spells out the default padding before it: no change): a call with ceil_mode and another
    kernel and stride is predicted to crash, saying which value; a padding that crashes
    with no measured call differing in the padding alone predicts nothing."""
    from coreml_lint.measured.table import CONTRAST

    pool = _exact_table(
        tmp_path,
        [
            ("a1=[1,1];a2=[1,1]", "ok", ""),
            ("a1=[1,1];a2=[1,1];a3=[0,0];a4=True", "crash", "E: ceil"),
            ("a1=[2,2];a2=[2,2];a3=[1,1]", "crash", "E: padding"),
        ],
    )
    ceil = "a1=[3,3];a2=[3,3];a3=[1,1];a4=True"  # no measured call of these classes
    answer = pool.answer(Key(POOL2, "float32:in", ceil, "r4"), 15)
    assert answer.basis == CONTRAST and answer.cause == "a4=True"
    assert answer.entry.message == "E: ceil"
    from coreml_lint.rules.cml801_measured_op_behaviour import _message

    said = _message(Key(POOL2, "float32:in", ceil, "r4"), answer, 15, pool, None)
    assert "predicted (this combination of arguments was not measured; ceil_mode=True" in said
    assert "differing only in it converts, and the node has ceil_mode=True)" in said
    assert "lowering crashes: `E: ceil`" in said
    padded = "a1=[3,3];a2=[3,3];a3=[1,1];a4=False;a5=False"
    assert pool.answer(Key(POOL2, "float32:in", padded, "r4"), 15) is None
    assert pool.answer(Key(POOL2, "float32:in", ceil, "r3"), 15) is None  # not at r3
    # a value measured converting beside other arguments is no cause of its own
    both = _exact_table(
        tmp_path,
        [
            ("a1=[1,1];a2=[1,1]", "ok", ""),
            ("a1=[1,1];a2=[1,1];a3=[0,0];a4=True", "crash", "E: ceil"),
            ("a1=[2,2];a2=[2,2];a3=[0,0];a4=True", "ok", ""),
        ],
    )
    assert both.answer(Key(POOL2, "float32:in", ceil, "r4"), 15) is None


MATMUL = "aten.matmul.default"
FP16_INPUT = "ValueError: To use fp16 input, please set minimum deployment target to iOS16+"


def test_a_float16_input_refusal_is_not_carried_to_operands_made_inside(tmp_path):
    """Every measured origin of two float16 operands crashed because one of them was a
    float16 partition input (refused below iOS16). ``x.half() @ w`` with a float16 weight
    has none: not predicted to crash. Another reason carries over (ORIGIN)."""
    from coreml_lint.measured.table import ORIGIN

    cells = [
        ("float16:op,float16:in", "", "crash", FP16_INPUT, "r2"),
        ("float16:in,float16:const", "", "crash", FP16_INPUT, "r2"),
        ("float16:in,float16:in", "", "crash", FP16_INPUT, "r2"),
    ]
    island = Key(MATMUL, "float16:op,float16:const", "", "r2")
    assert _cells_table(tmp_path, MATMUL, cells).answer(island, 15) is None
    other = [(o, v, out, "ValueError: E: matmul", sh) for o, v, out, _, sh in cells]
    answer = _cells_table(tmp_path, MATMUL, other).answer(island, 15)
    assert answer is not None and answer.basis == ORIGIN


SUM = "aten.sum.dim_IntList"
RETURNS_INT32 = "interface dtype (output): Core ML returns int32 where eager returns float32"


def _sum_table(tmp_path, rows: list[tuple[str, ...]]):
    """A table of ``sum.dim_IntList`` cells (operands, variant, outcome, message[, shape
    class, r2 if not given]) at iOS15."""
    return _cells_table(tmp_path, SUM, [(*row, "r2") if len(row) == 4 else row for row in rows])


def test_a_dtype_argument_ignored_alike_everywhere_is_predicted_at_other_arguments(tmp_path):
    """``sum(ids, dtype=float32)`` of int32 ids returns int32 at every dim measured: a
    call with other dims, ``keepdim`` and rank is predicted to, naming the dtype value.
    Not from two cells or from one variant, nor where one call with the value converts or
    another message is measured, nor for int64 ids that convert, nor for int32 made in
    the program (another origin than the measured one), nor where the schema names no
    dtype argument."""
    from coreml_lint.measured.table import INTERFACE

    wrong = [
        ("int32:in", variant, "wrong", RETURNS_INT32)
        for variant in ("a1=None;dtype=float32", "a1=[0];dtype=float32", "a1=[1];dtype=float32")
    ]
    wide = [("int64:in", v, "ok", "") for _, v, _, _ in wrong]
    key = Key(SUM, "int32:in", "a1=[1,2];a2=True;dtype=float32", "r3")
    table = _sum_table(tmp_path, [*wrong, *wide])
    answer = table.answer(key, 15)
    assert answer.basis == INTERFACE and answer.cause == "dtype=float32"
    assert answer.entry.message == RETURNS_INT32
    from coreml_lint.rules.cml801_measured_op_behaviour import _message

    said = _message(key, answer, 15, table, None)
    assert "predicted (this combination of arguments was not measured; every call " in said
    assert "with these operands and dtype=float32 returns the same wrong dtype)" in said
    assert RETURNS_INT32 in said
    assert table.answer(replace(key, operands="int64:in"), 15) is None
    assert table.answer(replace(key, operands="int32:op"), 15) is None
    assert table.dtype_args[SUM] == ["dtype"]  # the schema says which value is a dtype
    assert replace(table, dtype_args={}).answer(key, 15) is None
    assert _sum_table(tmp_path, wrong[:2]).answer(key, 15) is None
    # three cells of one variant (two ranks: the table keeps them apart)
    one_variant = [
        ("int32:in", "a1=[0];dtype=float32", "wrong", RETURNS_INT32, shape)
        for shape in ("r2", "r3", "r3u")
    ]
    assert _sum_table(tmp_path, one_variant).answer(key, 15) is None
    assert _sum_table(tmp_path, one_variant + wrong[:1]).answer(key, 15).basis == INTERFACE
    other = [*wrong[:2], (*wrong[2][:3], RETURNS_INT32.replace("float32", "float16"))]
    assert _sum_table(tmp_path, other).answer(key, 15) is None
    fine = ("int32:in", "a1=[0];a2=True;dtype=float32", "ok", "")
    assert _sum_table(tmp_path, [*wrong, fine]).answer(key, 15) is None


def test_the_table_knows_an_op_s_dtype_arguments_from_its_schema():
    """A keyword-only one by name, a positional one as keys name it (``a2``), none for an
    op without one: a string argument spelled like a dtype is not one."""
    pytest.importorskip("torch")
    from coreml_lint.sweep.table import dtype_args

    found = dtype_args({"aten.sum.dim_IntList", "aten.softmax.int", "aten.add.Tensor"})
    assert found == {"aten.sum.dim_IntList": ["dtype"], "aten.softmax.int": ["a2"]}


def test_targets_round_trip():
    assert parse_targets("15-18") == {15, 16, 17, 18}
    assert parse_targets("15,17-18") == {15, 17, 18}
    assert format_targets([18, 15, 16]) == "15-16,18"


POOL = "aten.max_pool1d.default"
BITAND = "aten.bitwise_and.Scalar"
PRELU = "aten.prelu.default"


def _results() -> list[dict]:
    """Synthetic sweep results: amax crashes on bool at every shape and target; gelu tanh
    is wrong; add is ok at rank 2 but crashes at rank 0 (so its shapes stay apart); a
    cell with two outcomes is mixed."""

    def result(op, operands, variant, shape, target, outcome, message="", context=""):
        key = dict(op=op, operands=operands, variant=variant, shape=shape)
        key.update(context=context, placed="coreml")
        return dict(
            id=f"{op}{operands}{variant}{shape}{target}{outcome}{context}",
            op=op.split(".", 1)[1],
            target=target,
            outcome=outcome,
            message=message,
            keys=[key],
        )

    found = []
    for target in (15, 18):
        for shape in ("r2", "r3", "r4"):
            found.append(
                result("aten.amax.default", "bool:op", "", shape, target, "crash", "E: x=1")
            )
        found.append(result("aten.amax.default", "float32:in", "", "r2", target, "ok"))
        found.append(result("aten.amax.default", "float32:in", "a1=ints1", "r2", target, "ok"))
        found.append(
            result("aten.gelu.default", "float32:in", "approximate=tanh", "r2", target, "wrong")
        )
        found.append(result("aten.gelu.default", "float32:in", "", "r2", target, "ok"))
        found.append(result("aten.add.Tensor", "float32:in,float32:in", "", "r2", target, "ok"))
        found.append(
            result("aten.add.Tensor", "float32:in,float32:in", "", "r0", target, "crash", "E")
        )
        for shape in ("r2", "r3", "r4"):  # a pool without stride fails at every shape...
            found.append(result(POOL, "float32:in", "", shape, target, "crash", "E: 2 inputs"))
            found.append(result("aten.neg.default", "float32:in", "", shape, target, "ok"))
        # ... with a stride, measured at r2 only, it fails another way (an unbatched input)
        found.append(result(POOL, "float32:in", "a2=ints1", "r2", target, "crash", "E: rank"))
        found.append(result("aten.neg.default", "bool:in", "", "r2", target, "crash", "K: b"))
        for value in ("a1=0", "a1=int"):  # int64 & x crashes whatever x is
            found.append(result(BITAND, "int64:in", value, "r2", target, "crash", "E: bool only"))
        for shape in ("r2", "r3u"):  # a per-channel PReLU: two shapes agree, a third not
            found.append(
                result(PRELU, "float32:in,float32:const", "", shape, target, "crash", "E: rank")
            )
    found.append(result("aten.sin.default", "float32:in", "", "r2", 15, "ok"))
    found.append(result("aten.sin.default", "float32:in", "", "r2", 15, "crash", "E"))
    return found


@pytest.fixture
def table(tmp_path):
    from coreml_lint.sweep.table import build_table, write_table

    cases = {r["id"]: {"axis": "base"} for r in _results() if r["keys"][0]["variant"] == ""}
    data = build_table(_results(), {"cases": len(_results())}, cases)
    path = tmp_path / "behaviour.json"
    write_table(path, data)
    json.loads(path.read_text())  # one entry per line, and still JSON
    return load_table(path)


def test_the_table_folds_shapes_and_targets_that_agree(table):
    rows = table.entries[("aten.amax.default", "bool:op", "", "")]
    assert len(rows) == 1
    assert rows[0].shape == "*" and rows[0].targets == {15, 18} and rows[0].cases == 6
    adds = table.entries[("aten.add.Tensor", "float32:in,float32:in", "", "")]
    assert {(e.shape, e.outcome) for e in adds} == {("r2", "ok"), ("r0", "crash")}
    # two shape classes agreeing are no evidence for a third: kept apart, r4 unanswered
    prelus = table.entries[(PRELU, "float32:in,float32:const", "", "")]
    assert {e.shape for e in prelus} == {"r2", "r3u"}
    assert table.lookup(Key(PRELU, "float32:in,float32:const", "", "r4"), 15) is None


def test_lookup_is_exact_and_mixed_cells_are_kept_apart(table):
    amax = Key("aten.amax.default", "bool:op", "", "r5")
    assert table.lookup(amax, 15).outcome == "crash"
    assert table.lookup(amax, 16) is None  # not measured at iOS16
    add = Key("aten.add.Tensor", "float32:in,float32:in", "", "r1")
    assert table.lookup(add, 15) is None  # only r2 and r0 were measured
    sin = Key("aten.sin.default", "float32:in", "", "r2")
    assert table.lookup(sin, 15).outcome == "mixed"


def test_one_shape_answers_for_others_only_where_the_base_call_is_ok_at_every_shape(table):
    # neg's base call is ok at r2 and r3: a bool crash measured at r2 holds at r4
    assert table.lookup(Key("aten.neg.default", "bool:in", "", "r4"), 15).outcome == "crash"
    # the pool's base call crashes: its strided variant answers for r2 only, and is not
    # predicted elsewhere from the base call (its variants fail for different reasons)
    strided = Key(POOL, "float32:in", "a2=ints1", "r2")
    assert table.lookup(strided, 15).outcome == "crash"
    batched = Key(POOL, "float32:in", "a2=ints1", "r3")
    assert table.lookup(batched, 15) is None and table.predict(batched, 15) is None
    # a cell measured at one shape stays at that shape in the table
    (gelu,) = table.entries[("aten.gelu.default", "float32:in", "approximate=tanh", "")]
    assert gelu.shape == "r2"


def test_a_batch_of_one_is_answered_from_the_same_rank_where_the_family_held_out(table):
    """The pool's strided call, measured at r2 only (its base call crashes, so no shape
    answers for another), answers a key at r2u (a size-1 dim) as measured at r2, saying
    so; not r3 nor r0's twin; not where the hold-out refused it in the op's family."""
    from coreml_lint.measured.table import UNIT, unit_twin

    assert [unit_twin(s) for s in ("r4", "r4u", "r1", "r3e", "r?")] == ["r4u", "r4", *[None] * 3]
    one = table.answer(Key(POOL, "float32:in", "a2=ints1", "r2u"), 15)
    assert one.basis == UNIT and one.entry.shape == "r2" and one.entry.outcome == "crash"
    assert table.answer(Key(POOL, "float32:in", "a2=ints1", "r3u"), 15) is None
    table.refused = {UNIT: frozenset({"pooling"})}
    assert table.answer(Key(POOL, "float32:in", "a2=ints1", "r2u"), 15) is None


def test_a_crash_every_measured_variant_shows_is_predicted_for_the_others(table):
    one = Key(BITAND, "int64:in", "a1=1", "r2")
    assert table.lookup(one, 15) is None and table.predict(one, 15).outcome == "crash"
    assert table.predict(Key(BITAND, "bool:in", "a1=1", "r2"), 15) is None  # not measured


def test_an_unmeasured_variant_is_predicted_only_when_arguments_change_nothing(table):
    amax = Key("aten.amax.default", "bool:op", "a1=ints1;a2=True", "r2")
    assert table.lookup(amax, 15) is None
    assert table.predict(amax, 15).outcome == "crash"  # amax's float32 variants all agree
    gelu = Key("aten.gelu.default", "float32:in", "approximate=other", "r2")
    assert table.predict(gelu, 15) is None  # gelu's variants disagree


def test_workarounds_name_what_was_measured_ok(table):
    bad = table.lookup(Key("aten.gelu.default", "float32:in", "approximate=tanh", "r2"), 15)
    found = table.workarounds(bad, 15)
    assert any(w.startswith("the call with no other arguments (measured ok") for w in found), found
    bad = table.lookup(Key("aten.amax.default", "bool:op", "", "r2"), 15)
    assert table.workarounds(bad, 15) == []  # float32:in is another origin: not offered


def test_versions_declared_select_a_table_and_say_when_none_matches(tmp_path, monkeypatch):
    shipped = load_table(measured_table.TABLE_PATH)
    other = json.loads(measured_table.TABLE_PATH.read_text())
    other["measured_with"] = dict(other["measured_with"], coremltools="0.0.test")
    (tmp_path / "behaviour.json").write_text(measured_table.TABLE_PATH.read_text())
    (tmp_path / "behaviour-coremltools-0.0.test.json").write_text(json.dumps(other))
    monkeypatch.setattr(measured_versions, "DATA", tmp_path)
    monkeypatch.setattr(measured_versions, "TABLE_PATH", tmp_path / "behaviour.json")
    try:
        declare_versions()
        assert version_note() is None  # the installed versions are the table's
        declare_versions(coremltools="0.0.test")
        assert active_table().measured_with["coremltools"] == "0.0.test"
        assert version_note() is None
        declare_versions(coremltools="7.7")
        assert active_table().measured_with == shipped.measured_with
        note = version_note()
        assert "coremltools 7.7" in note and "0.0.test" in note and "sweep" in note
    finally:
        declare_versions()


def test_check_says_when_the_targeted_coremltools_was_not_measured(tmp_path):
    torch = pytest.importorskip("torch")
    from click.testing import CliRunner

    from coreml_lint.cli.main import main_group

    class M(torch.nn.Module):
        def forward(self, x):
            return x.sin()

    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(M(), (torch.randn(2, 3),)), str(path))
    runner = CliRunner()
    said = runner.invoke(main_group, ["check", str(path), "--target-coremltools", "7.7"])
    assert "note: the measured op behaviour was not measured on coremltools 7.7" in said.stderr
    said = runner.invoke(main_group, ["check", str(path)])
    assert "note:" not in said.stderr
    declare_versions()


def test_string_options_come_from_torch_itself():
    torch = pytest.importorskip("torch")
    from coreml_lint.sweep.schema import schema_args, string_options

    gelu = torch.ops.aten.gelu.default
    (approximate,) = [a for a in schema_args(gelu) if a.name == "approximate"]
    assert string_options(gelu, [torch.randn(2)], {}, approximate) == ["none", "tanh"]


@pytest.mark.parametrize(
    "op, arg, args, words",
    [  # errors that list no words: "Unrecognised padding mode @@", "Invalid normalization
        ("pad", "mode", [[4, 4]], ["constant", "reflect", "replicate", "circular"]),  # mode"
        ("fft_fft", "norm", [], ["forward", "backward", "ortho"]),
        ("searchsorted", "side", [], ["left", "right"]),
    ],
)
def test_string_values_torch_does_not_list_are_found_by_probing(op, arg, args, words):
    """A reflect pad of [4, 4] on a 4-wide input is refused for its width, not its word:
    the word is a value (the legal-call search finds a pad it takes)."""
    torch = pytest.importorskip("torch")
    from coreml_lint.sweep.schema import schema_args, string_options

    packet = getattr(torch.ops.aten, op)
    overload = packet.Tensor if op == "searchsorted" else packet.default
    (found,) = [a for a in schema_args(overload) if a.name == arg]
    operands = [torch.randn(4, 4)] if op != "searchsorted" else [torch.arange(4.0)] * 2
    assert (
        string_options(overload, [*operands[: 1 + (op == "searchsorted")], *args], {}, found)
        == words
    )


def test_the_generator_covers_every_axis_with_calls_torch_accepts():
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.legal import Call, is_legal
    from coreml_lint.sweep.schema import in_scope

    ops = {info.name: info for info in in_scope(load_optable())[0]}
    cases, why = op_cases(ops["pow.Tensor_Scalar"])
    assert why is None
    axes = {"base", "dtype", "variant", "shape", "origin", "context", "inside", "model"}
    assert {c["axis"] for c in cases} == axes | {"module"}  # nn.LPPool2d's pow
    assert {c["target"] for c in cases} == {15, 18}
    dtypes = {c["tensors"][0]["dtype"] for c in cases if c["axis"] == "dtype"}
    assert {"int8", "uint8", "bfloat16", "float16", "int64", "int32"} <= dtypes
    for case in cases[::7]:
        call = Call(case["tensors"], case["args"], case["kwargs"])
        assert is_legal(ops["pow.Tensor_Scalar"], call)
    labels = {c["label"] for c in cases if c["axis"] == "variant"}
    assert {"exponent=frac", "exponent=big"} <= labels  # Scalar values of other classes
    contexts = {c["label"] for c in cases if c["axis"] == "context"}
    assert "exponent=frac -> addmm" in contexts
    amax, _ = op_cases(ops["amax.default"])
    assert "keepdim=True" in {c["label"] for c in amax}  # a bool flipped, from the schema


def test_a_pad_mode_is_measured_where_a_pad_can_take_it():
    """Reflect, replicate and circular pads were never measured: torch's error lists no
    mode, the first pad values are odd-length lists no mode takes, the model call had
    searched its pad again (``[]``), and the shapes took the default mode only."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    (pad,) = [info for info in in_scope(load_optable())[0] if info.name == "pad.default"]
    cases, _ = op_cases(pad)
    labels = {(c["axis"], c["label"]) for c in cases}
    for mode in ("reflect", "replicate", "circular"):
        assert ("pairs", f"pad=[1,0] mode={mode}") in labels  # legal alone: [1, 0]
    assert ("shape", "2x3x1x4 mode=circular") in labels  # a rank-4 circular pad
    (model,) = [c for c in cases if c["label"] == "model" and c["target"] == 15]
    assert model["args"][1] == [4, 4]  # the base call's pad, not the first legal one
    assert any(c["label"].startswith("model mode=") for c in cases)


def test_the_model_axis_measures_calls_as_a_model_makes_them():
    """A model's transposed convolution has a batch of one, and again of two, and constant
    weights and bias: its output_padding (legal only beside a stride) is measured so at
    both batches; a 3-d pool's activation is batched (the base call found an unbatched
    one)."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.legal import Call, is_legal
    from coreml_lint.sweep.schema import in_scope

    ops = {i.name: i for i in in_scope(load_optable())[0]}
    cases, _ = op_cases(ops["conv_transpose2d.input"])
    model = [c for c in cases if c["axis"] == "model"]
    batches = {(c["tensors"][0]["shape"][0], c["label"].startswith("model batch 2")) for c in model}
    assert batches == {(1, False), (2, True)}  # a batch of two is labelled so, one is not
    given = [c for c in model if len(c["tensors"]) == 3]  # the input, a weight and a bias
    assert given and all(t["origin"] == "const" for c in given for t in c["tensors"][1:])
    for batch in (1, 2):
        assert any(
            "output_padding" in c["label"]
            and "stride" in c["label"]
            and c["tensors"][0]["shape"][0] == batch
            for c in given
        )
    for case in model[::5]:
        info = ops["conv_transpose2d.input"]
        assert is_legal(info, Call(case["tensors"], case["args"], case["kwargs"]))
    pool, _ = op_cases(ops["avg_pool3d.default"])
    assert {len(c["tensors"][0]["shape"]) for c in pool if c["axis"] == "model"} == {5}
    assert any(c["label"] == "model ceil_mode=True" for c in pool)
    # a kernel of 3 on the model's 4-wide volume: the ceil adds a window (3-d pools refuse it)
    assert any(c["label"] == "model kernel_size=[3,3,3] ceil_mode=True" for c in pool)


def test_the_pairwise_axis_crosses_arguments_legal_only_together():
    """avg_pool2d's padding may be at most half its kernel: padding [2, 2] alone is refused
    beside the base kernel [2, 2]; crossed with kernel [4, 4] it is legal and measured."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.legal import Call, is_legal
    from coreml_lint.sweep.schema import in_scope

    info = {i.name: i for i in in_scope(load_optable())[0]}["avg_pool2d.default"]
    cases, _ = op_cases(info)
    pairs = [c for c in cases if c["axis"] == "pairs"]
    labels = {c["label"] for c in pairs}
    assert "kernel_size=[4,4] padding=[2,2]" in labels
    assert "padding=[2,2]" not in {c["label"] for c in cases if c["axis"] == "variant"}
    assert any(label.startswith("ceil_mode=True ") for label in labels)
    for case in pairs[::5]:
        assert is_legal(info, Call(case["tensors"], case["args"], case["kwargs"]))


def test_lists_whose_dims_differ_are_crossed_with_the_argument_they_need():
    """An ``output_padding`` of ``[1, 0]`` is legal only beside a stride of 2: one factor at
    a time never makes it, and the pairs of ``[n] * k`` values never make a list whose dims
    differ. Each such list is measured alone where legal (a ``[2, 1]`` stride) and beside
    each other argument, in the model's call with constant weights too."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import _pairs, op_cases
    from coreml_lint.sweep.legal import Call, find_base, is_legal
    from coreml_lint.sweep.schema import in_scope, mixed_lists

    assert mixed_lists(1) == []
    assert mixed_lists(3) == [[1, 0, 1], [2, 1, 2]]
    info = {i.name: i for i in in_scope(load_optable())[0]}["conv_transpose2d.input"]
    cases, _ = op_cases(info)
    labels = {(c["axis"], c["label"]) for c in cases}
    assert ("pairs", "stride=[2,2] output_padding=[1,0]") in labels
    assert ("model", "model batch 2 stride=[2,2] output_padding=[1,0]") in labels
    assert ("variant", "stride=[2,1]") in labels
    assert ("variant", "output_padding=[1,0]") not in labels  # illegal beside stride 1
    mixed = [c for c in cases if "[1,0]" in c["label"] or "[2,1]" in c["label"]]
    for case in mixed[::3]:
        assert is_legal(info, Call(case["tensors"], case["args"], case["kwargs"]))
    base = find_base(info)[0]
    pairs = [label for label, _ in _pairs(info, base)]
    assert len(set(pairs)) == len(pairs)  # no pair made twice (before ids merge copies)


def test_an_op_of_three_operands_is_measured_with_every_one_after_the_first_constant():
    """``clamp(x, lo, hi)`` with both bounds buffers of the model: coremltools reads two
    constant bounds otherwise than one (it compares them), which the second operand alone
    never reaches."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    info = {i.name: i for i in in_scope(load_optable())[0]}["clamp.Tensor"]
    cases, _ = op_cases(info)
    both = [c for c in cases if c["label"] == "operands after the first constant"]
    assert both and all(
        [t["origin"] for t in c["tensors"]] == ["in", "const", "const"] for c in both
    )
    # the bounds never cross (values.ordered_bounds): a lower bound at most 0, an upper one
    # at least 0, in every case that gives both
    bounded = [c for c in cases if len(c["tensors"]) == 3]
    assert bounded and all(
        [t.get("sign") for t in c["tensors"]] == [None, "-", "+"] for c in bounded
    )


def test_a_pointwise_op_on_integers_is_measured_across_dtypes_and_origins():
    """``bitwise_and`` takes integers only: its int64 operands are its data, so it is measured
    in each integer dtype, made inside Core ML and as a constant (``ids & 0xFF`` of a value
    a cast made inside crashes where nothing measured an input of another origin)."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    cases, _ = op_cases(scope["bitwise_and.Tensor"])
    forms = {tuple((t["dtype"], t.get("origin", "in")) for t in c["tensors"]) for c in cases}
    assert (("int64", "op"), ("int64", "in")) in forms
    assert (("int64", "in"), ("int64", "const")) in forms
    assert (("int32", "in"), ("int32", "in")) in forms and (("bool", "in"), ("bool", "in")) in forms
    assert {c["axis"] for c in cases} >= {"dtype", "origin", "shape"}
    # an op taking an index stays on its index (a one_hot of typical values is illegal)
    one_hot, _ = op_cases(scope["one_hot.default"])
    assert all(t["values"] == "index" for c in one_hot for t in c["tensors"])


def test_a_pointwise_ops_later_operand_is_measured_as_a_python_number():
    """``ids * 1000`` exports as ``mul.Tensor(ids, 1000)``: the number stays in the Tensor
    slot, keyed ``a1=int``, which no call with a tensor there measures."""
    pytest.importorskip("torch")
    from coreml_lint.measured.key import Key
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    info = {i.name: i for i in in_scope(load_optable())[0]}["mul.Tensor"]
    cases, _ = op_cases(info)
    scalar = [c for c in cases if c["axis"] == "scalar"]
    made = [c for c in scalar if c["label"] == "int64 made in Core ML operand 1 = big"]
    assert made and all(
        len(c["tensors"]) == 1 and c["args"][1] == 10_000_000 and c["tensors"][0]["origin"] == "op"
        for c in made
    )
    assert {c["label"].split(" = ")[0] for c in scalar} >= {
        "float32 operand 1",
        "int64 operand 1",
        "float16 made in Core ML operand 1",
    }
    # the sweep's program of such a case is keyed as the lint keys a user's ``ids * 1000``
    from test_optable_keys import lint_keys, sweep_keys

    case = next(c for c in scalar if c["label"] == "int64 operand 1 = int")
    assert lint_keys(case) == sweep_keys(case)
    (key,) = sweep_keys(case)
    assert key == Key("aten.mul.Tensor", "int64:in", "a1=int", key.shape)


def test_a_modules_float_spelling_of_integer_defaults_is_measured():
    """``nn.Hardtanh()`` calls ``hardtanh(x, -1.0, 1.0)``: floats where the schema's defaults
    are integers, both at once, which no one-value-at-a-time variant makes."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    info = {i.name: i for i in in_scope(load_optable())[0]}["hardtanh.default"]
    cases, _ = op_cases(info)
    spelled = [c for c in cases if c["label"] == "defaults as floats"]
    assert spelled and all(c["args"][1:] == [-1.0, 1.0] for c in spelled)
    assert any(c["label"] == "defaults as floats float16" for c in cases)


def test_a_pair_illegal_alone_is_measured_beside_the_value_that_makes_it_legal():
    """A decoder's ``ConvTranspose1d(k, stride=2, padding=1, output_padding=1)``: the pair
    of padding and output_padding is illegal at the base call's stride of 1, so it is
    measured beside the first stride that allows it (and a legal pair gets no third)."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    info = {i.name: i for i in in_scope(load_optable())[0]}["conv_transpose1d.default"]
    cases, _ = op_cases(info)
    labels = {c["label"] for c in cases if c["axis"] == "pairs"}
    decoder = "padding=[1] output_padding=[1] with stride=[2]"
    assert decoder in labels
    (call, *_) = [c for c in cases if c["label"] == decoder]
    assert call["args"][3:6] == [[2], [1], [1]]  # stride, padding, output_padding
    assert "stride=[2] padding=[1]" in labels  # legal alone: no third argument


def test_an_index_buffer_and_a_negative_pad_are_measured():
    """A relative position index or the columns an ``index_add`` writes are buffers of the
    model (``int64:const``, which no index input measures), and a U-Net crops its skip
    connection with a negative pad."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    cases, _ = op_cases(scope["index_add.default"])
    buffers = [c for c in cases if c["label"] == "index operands constant"]
    assert buffers and all(
        [(t["dtype"], t["origin"]) for t in c["tensors"]]
        == [("float32", "in"), ("int64", "const"), ("float32", "in")]
        for c in buffers
    )
    model = [c for c in cases if c["label"] == "model batch 2 index operands constant"]
    assert model and all(  # as a model calls it: rank 3, the index a buffer
        [(len(t["shape"]), t["origin"]) for t in c["tensors"]]
        == [(3, "in"), (1, "const"), (3, "in")]
        for c in model
    )
    cases, _ = op_cases(scope["constant_pad_nd.default"])
    assert any(c["args"][1] == [-1, -1] for c in cases if c["axis"] == "variant")


def test_an_index_or_a_mask_made_in_core_ml_is_measured():
    """``x.gather(1, s.argmax(1, keepdim=True))`` and ``x.masked_fill(x < 0, 0.0)`` hand
    Core ML the op that makes the index or the mask (keyed ``int64:op``, ``bool:op``),
    which no index input measures: beside the base call and each variant."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import MADE_WORDS, op_cases
    from coreml_lint.sweep.schema import in_scope

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    for op, made in (
        ("index_fill.int_Scalar", ("int64", "op")),
        ("masked_fill.Scalar", ("bool", "op")),
    ):
        cases, _ = op_cases(scope[op])
        inside = [c for c in cases if MADE_WORDS in c["label"]]
        assert {c["axis"] for c in inside} == {"origin", "variant"}, op
        for c in inside:
            first, later = c["tensors"][0], c["tensors"][1]
            assert first["origin"] == "in" and (later["dtype"], later["origin"]) == made
        # the variant twins keep the variant's arguments
        plain = {c["label"]: c for c in cases if c["axis"] == "variant"}
        for c in inside:
            if c["axis"] == "variant":
                twin = plain[c["label"].removesuffix(f", {MADE_WORDS}")]
                assert (twin["args"], twin["kwargs"]) == (c["args"], c["kwargs"])


def test_a_scalar_argument_is_measured_at_zero_and_every_class():
    """``x < 0`` was never measured: ten classes stopped before -inf and 0."""
    pytest.importorskip("torch")
    from coreml_lint.measured.values import value_text
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope
    from coreml_lint.sweep.values import decode

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    cases, _ = op_cases(scope["lt.Scalar"])
    values = {
        value_text(decode(c["args"][1], []))
        for c in cases
        if c["axis"] == "variant" and c["tensors"][0]["dtype"] == "float32"
    }
    assert {"0", "0.0", "-1.0", "-inf", "1.0", "-1"} <= values


def test_grouped_query_attention_is_measured_and_keyed_apart_from_equal_heads():
    """``enable_gqa=True`` with fewer key/value heads than query heads crashes in
    coremltools 9.0 ("Incompatible dim"); with equal heads the flag changes nothing. The
    sweep measures the grouped call, and both sides key it ``enable_gqa=grouped``."""
    pytest.importorskip("torch")
    from test_optable_keys import lint_keys, sweep_keys

    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    info = {i.name: i for i in in_scope(load_optable())[0]}["scaled_dot_product_attention.default"]
    cases, _ = op_cases(info)
    grouped = [c for c in cases if c["label"] == "grouped heads batch 1 is_causal=True"]
    assert grouped and all(
        [t["shape"][1] for t in c["tensors"]] == [4, 2, 2] and c["kwargs"]["enable_gqa"]
        for c in grouped
    )
    (key,) = sweep_keys(grouped[0])
    assert lint_keys(grouped[0]) == {key}
    assert key.variant == "a3=None;a4=0.0;a5=True;enable_gqa=grouped" and key.shape == "r4u"
    equal = next(c for c in cases if c["label"] == "model batch 2 enable_gqa=True")
    assert all(k.variant.endswith("enable_gqa=True") for k in sweep_keys(equal))


def test_a_narrower_index_is_measured_and_keyed_alike_on_both_sides():
    """A gather of keypoints' x and y (an index narrower than the input off ``dim``) and a
    scatter of an index-shaped corner of a wider ``src`` are measured, the index also a
    buffer; the sweep's program and a user's node key them alike; and the shape axis
    reshapes an index shaped like the input with it (a gather at rank 3)."""
    pytest.importorskip("torch")
    from test_optable_keys import lint_keys, sweep_keys

    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    cases, _ = op_cases(scope["gather.default"])
    narrow = [c for c in cases if c["label"] == "index narrower off dim, index constant"]
    assert narrow and [t["shape"] for t in narrow[0]["tensors"]] == [[4, 4], [2, 4]]
    (key,) = sweep_keys(narrow[0])
    assert lint_keys(narrow[0]) == {key}
    assert key.variant == "a1=1;index=narrower" and key.operands == "float32:in,int64:const"
    model = next(c for c in cases if c["label"] == "model batch 2 index narrower off dim")
    assert [t["shape"] for t in model["tensors"]] == [[2, 4, 4], [2, 4, 2]]  # as a model: r3
    assert any(len(c["tensors"][1]["shape"]) == 3 for c in cases if c["axis"] == "shape")
    cases, _ = op_cases(scope["scatter.src"])
    wide = next(c for c in cases if c["label"] == "index narrower on dim, src wider")
    assert {k.variant for k in sweep_keys(wide)} == {"a1=1;src=wider"}
    k_of_n = next(c for c in cases if c["label"] == "index and src narrower on dim")
    assert {k.variant for k in sweep_keys(k_of_n)} == {"a1=1"}  # the ordinary call


def test_an_op_legal_only_on_coordinates_finds_its_call():
    """``grid_sample`` takes an ``[N, H, W, 2]`` grid beside an image, ``cross`` two
    3-vectors: no cube shape is legal for them, a last dim of coordinates is."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.legal import find_base
    from coreml_lint.sweep.schema import in_scope

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    grid, _, _ = find_base(scope["grid_sampler.default"])
    assert [t["shape"] for t in grid.tensors] == [[4, 4, 4, 4], [4, 4, 4, 2]]
    cross, _, _ = find_base(scope["cross.default"])
    assert [t["shape"][-1] for t in cross.tensors] == [3, 3]


def test_no_shipped_table_spells_a_non_finite_value_as_a_word():
    """The .pt2 reader reads float("-inf") as the number, keyed ``-inf``; a row keyed
    ``-Infinity`` (as the reader once keyed torch's serialized string) answers no node. The
    first run's table is what a build carries rows from, so it is read too."""
    import gzip
    import re
    from pathlib import Path

    import coreml_lint.measured as measured

    data = Path(measured.__file__).parent / "data"
    folders = Path(__file__).parent.parent / "measurements"
    texts = {p.name: p.read_text() for p in data.glob("*behaviour*.json")}
    for path in folders.glob("*/_first_run.json.gz"):
        with gzip.open(path, "rt") as handle:
            texts[str(path)] = handle.read()
    assert len(texts) >= 3
    spelled = re.compile(r'=(-?Infinity|NaN)[;"]')
    found = {name: spelled.findall(text)[:3] for name, text in texts.items()}
    assert {name: words for name, words in found.items() if words} == {}


def test_the_shipped_table_is_measured_on_the_installed_stack():
    table = load_table(measured_table.TABLE_PATH)
    assert set(table.measured_with) == {"torch", "executorch", "coremltools"}
    assert table.sweep["cases"] > 1000 and table.sweep["wall_seconds"] > 0
    outcomes = {e.outcome for rows in table.entries.values() for e in rows}
    assert {"crash", "wrong", "ok"} <= outcomes


# The catalogue's op-level pitfalls the sweep found without being told (the queries only
# read the finished table; see coreml_lint/sweep/report.py).
FOUND = (
    "bool min/max (crash)",
    "rms_norm without eps (crash)",
    "max_pool without stride (crash)",
    "tanh GELU (wrong)",
    "bfloat16 (crash)",
    "8-bit inputs (crash)",
    "integer fills (wrong)",
    "float16 SDPA with scale (crash)",
)


@pytest.mark.parametrize("pitfall", FOUND)
def test_the_sweep_rediscovered_the_catalogue_pitfall(pitfall):
    from coreml_lint.sweep.report import PITFALLS

    table = load_table(measured_table.TABLE_PATH)
    entries = [e for rows in table.entries.values() for e in rows]
    assert any(PITFALLS[pitfall](e) for e in entries)


def test_the_coremltools_pre_release_table_ships_and_records_what_changed():
    """The second shipped table (a sample re-measured on coremltools 9.1.dev1) is chosen by
    declaring that version, and answers where the release fixed a crash."""
    try:
        declare_versions(coremltools="9.1.dev1", executorch="1.5.1")
        newer = active_table()
        assert newer.measured_with["coremltools"] == "9.1.dev1"
        assert version_note() is None
    finally:
        declare_versions()
    released = load_table(measured_table.TABLE_PATH)
    alpha = Key("aten.add.Scalar", "float16:op", "a1=int;a2=frac", "r2")
    assert released.lookup(alpha, 18).outcome == "crash"
    assert newer.lookup(alpha, 18).outcome == "ok"


def test_shards_keep_finished_ops_and_never_replace_a_measured_cell(tmp_path):
    """An op is written to its shard once every generated case is measured; writing again
    adds what the shard lacks and never replaces a result; a store reads shards as
    measured (a sweep resumes from the repository on a fresh machine)."""
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.run import Store

    cases = [{"id": f"a{i}", "op": "abs.default"} for i in range(3)]
    cases.append({"id": "n0", "op": "neg.default"})
    results = {c["id"]: {"id": c["id"], "outcome": "ok", "message": ""} for c in cases[:3]}
    folder = tmp_path / "measurements" / "stack"
    assert shards.write(folder, cases, results) == ["abs.default"]  # neg is not finished
    changed = dict(results, a0={"id": "a0", "outcome": "crash", "message": "E"})
    assert shards.write(folder, cases, changed) == []  # nothing new: nothing written
    kept, _ = shards.read(folder)
    assert kept["a0"]["outcome"] == "ok"
    store = Store(tmp_path / "live", shards=folder)
    store.append(store.results_path, {"id": "a0", "outcome": "crash", "message": "E"})
    assert store.results()["a0"]["outcome"] == "ok"  # the shard's cell wins
    store.append(store.results_path, {"id": "n0", "outcome": "ok", "message": ""})
    assert store.write_shards(cases) == ["neg.default"]
    assert set(shards.read(folder)[0]) == {"a0", "a1", "a2", "n0"}


def test_a_case_the_generator_no_longer_makes_is_retired_not_deleted(tmp_path):
    """A generator that makes the same call with other operand values (a clamp's bounds
    given signs) supersedes the old case: it stays in its shard, measured, but leaves the
    table's cases. A call only an earlier generator made stays, counted apart. Making a case
    again brings it back; other ops are untouched."""
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.run import Store, retire_superseded

    def clamp(i: int, sign: str | None = None, args: list | None = None) -> dict:
        bound = {"shape": [4], "dtype": "float32", **({"sign": sign} if sign else {})}
        return {"id": f"c{i}", "op": "clamp.Tensor", "args": args or [1], "tensors": [bound]}

    old = [clamp(0, args=[0]), clamp(1), clamp(2, args=[2]), dict(clamp(3), target=16)]
    other = [{"id": "n0", "op": "neg.default"}]
    folder = tmp_path / "measurements" / "stack"
    results = {c["id"]: {"id": c["id"], "outcome": "wrong", "message": "W"} for c in old + other}
    shards.write(folder, old + other, results)
    store = Store(tmp_path / "live", shards=folder)
    today = [old[0], clamp(9, "-")]  # c1's call with a signed bound; c2's call no more
    assert retire_superseded(store, today) == 2
    assert shards.retired(folder) == {"c1", "c3"}  # c3: c1's iOS16 copy
    assert shards.retired(folder, shards.EARLIER) == {"c2"}
    assert set(store.cases()) == {"c0", "c2", "n0"}  # c9 is not generated in this folder
    assert set(shards.read(folder)[0]) == {"c0", "c1", "c2", "c3", "n0"}  # every cell kept
    assert retire_superseded(store, old) == 0  # made again: back
    assert set(store.cases()) == {"c0", "c1", "c2", "c3", "n0"}
    assert shards.retired(folder) == shards.retired(folder, shards.EARLIER) == set()


def test_what_is_measured_of_an_unfinished_op_travels_with_the_repository(tmp_path):
    from coreml_lint.sweep import shards

    cases = [{"id": f"a{i}", "op": "abs.default"} for i in range(3)]
    folder = tmp_path / "measurements" / "stack"
    one = {"a0": {"id": "a0", "outcome": "ok", "message": ""}}
    assert shards.write(folder, cases, one) == []
    assert set(shards.read(folder)[0]) == {"a0"}  # kept, though abs is not finished
    every = {c["id"]: {"id": c["id"], "outcome": "ok", "message": ""} for c in cases}
    assert shards.write(folder, cases, every) == ["abs.default"]
    assert shards._rows(folder / shards.UNFINISHED) == []  # moved to abs's own shard
    assert set(shards.read(folder)[0]) == {"a0", "a1", "a2"}


def test_what_the_runs_cost_travels_with_the_repository(tmp_path):
    """A run's folder (its ``costs.jsonl``) stays on its machine: each run's totals are
    kept beside the shards, one file per run, and the table a fresh clone builds says what
    its cells cost."""
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.__main__ import _meta, _record
    from coreml_lint.sweep.run import Store

    folder = tmp_path / "measurements" / "stack"
    store = Store(tmp_path / "live", shards=folder)
    store.save_meta({"wall_seconds": 1.0})
    assert _meta(store)["wall_seconds"] == 1.0  # no run recorded yet: the folder's own
    store.add_cost("measure", 30.0)
    meta = {"run": "here"}
    _record(store, meta, time.monotonic() - 50.0, 2, {"randn.default": "random"})
    store.add_cost("measure", 12.0)
    _record(store, meta, time.monotonic() - 60.0, 2, {"randn.default": "random"})  # replaces
    other = Store(tmp_path / "elsewhere", shards=folder)  # a second machine's run
    other.add_cost("measure", 100.0)
    other.append(other.cases_path, {"op": "glu.default", "cases": [], "why": "no legal call"})
    _record(other, {"run": "there"}, time.monotonic() - 500.0, 4, {})
    clone = _meta(Store(tmp_path / "fresh-clone", shards=folder))
    assert clone["cpu_seconds"] == 142.0 and clone["workers"] == 4
    assert 560.0 <= clone["wall_seconds"] < 610.0  # 50 s of slack: a busy machine passes
    assert sorted(shards.runs(folder)) == ["here", "there"]
    assert clone["left_out"] == {} and clone["no_legal_call"] == ["glu.default"]  # the latest
    partial = Store(tmp_path / "partial", shards=folder)  # an --ops run that found no such op
    time.sleep(1.1)  # a later record
    _record(partial, {"run": "partial"}, time.monotonic(), 2, {})
    assert _meta(partial)["no_legal_call"] == ["glu.default"]  # kept, not replaced by []


def test_a_folder_measuring_into_other_shards_is_another_run(tmp_path, monkeypatch):
    """Its earlier cost was another stack's: the new run records only what it adds."""
    import argparse

    from coreml_lint.sweep import __main__ as sweep_main
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.run import Store

    live, first, second = tmp_path / "live", tmp_path / "stack-a", tmp_path / "stack-b"
    store = Store(live, shards=first)
    store.add_cost("measure", 40.0)
    store.save_meta({"run": "a", "run_shards": str(first), "wall_seconds": 10.0})

    class Stop(Exception):
        pass

    def stop(*_args, **_kwargs):
        raise Stop

    monkeypatch.setattr("coreml_lint.program.optable.load_optable", stop)
    args = argparse.Namespace(target="coreml", out=live, shards=str(second), ops=None)
    with pytest.raises(Stop):
        sweep_main.run(args)
    meta = Store(live).meta()
    assert meta["run"] != "a" and meta["run_shards"] == str(second)
    store.add_cost("measure", 2.0)
    sweep_main._record(Store(live, shards=second), meta, time.monotonic(), 1, {})
    assert shards.run_totals(second)["cpu_seconds"] == 2.0


def test_an_op_is_complete_only_when_every_case_known_for_it_is_measured(tmp_path):
    """A fresh clone knows cases from the shards alone; a newer generator's row for an op
    replaces the older one and makes the op incomplete until its new cases are measured."""
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.run import Store

    folder = tmp_path / "measurements" / "stack"
    cases = [{"id": f"a{i}", "op": "abs.default"} for i in range(2)]
    results = {c["id"]: {"id": c["id"], "op": "abs.default", "outcome": "ok"} for c in cases}
    shards.write(folder, cases, results)
    clone = Store(tmp_path / "fresh", shards=folder)
    assert clone.complete_ops() == {"abs.default"} and set(clone.cases()) == {"a0", "a1"}
    store = Store(tmp_path / "live", shards=folder)
    store.append(store.cases_path, {"op": "abs.default", "cases": cases, "generator": 1})
    newer = [*cases, {"id": "a2", "op": "abs.default"}]
    store.append(store.cases_path, {"op": "abs.default", "cases": newer, "generator": 2})
    assert [len(row["cases"]) for row in store.generated()] == [3]
    assert store.complete_ops() == set()
    store.append(store.results_path, {"id": "a2", "op": "abs.default", "outcome": "crash"})
    assert store.complete_ops() == {"abs.default"}
    partial = [{"id": f"n{i}", "op": "neg.default"} for i in range(2)]  # n1 not measured
    shards.write(folder, partial, {"n0": {"id": "n0", "op": "neg.default", "outcome": "ok"}})
    assert "neg.default" not in Store(tmp_path / "fresh2", shards=folder).complete_ops()


def test_rekey_changes_a_shard_result_keys_and_never_its_outcome(tmp_path):
    from coreml_lint.sweep import shards

    folder = tmp_path / "stack"
    cases = [{"id": "a0", "op": "abs.default"}, {"id": "a1", "op": "abs.default"}]
    old = [{"variant": "a1=ints2"}]
    results = {c["id"]: {"id": c["id"], "outcome": "crash", "keys": old} for c in cases}
    shards.write(folder, cases, results)
    assert shards.rekey(folder, {"a0": [{"variant": "a1=[2,2]"}], "a1": old}) == 1
    kept, _ = shards.read(folder)
    assert kept["a0"] == {"id": "a0", "outcome": "crash", "keys": [{"variant": "a1=[2,2]"}]}
    assert kept["a1"]["keys"] == old


def test_rekey_keys_only_the_cases_asked_for(tmp_path):
    """``sweep rekey --only ids``: a key format change that touches a few cases (the .pt2
    reader's -inf) exports those again, not every case of their ops."""
    from coreml_lint.sweep import run as sweep_run

    store = sweep_run.Store(tmp_path, shards=None)
    cases = [
        {"id": i, "op": "abs.default", "target": 15, "args": [], "kwargs": {}, "tensors": []}
        for i in ("a", "b", "c")
    ]
    store.append(store.cases_path, {"op": "abs.default", "cases": cases, "why": None})
    for i in ("a", "b", "c"):
        row = {"id": i, "op": "abs.default", "outcome": "ok", "keys": [{"v": "old"}]}
        store.append(store.results_path, row)
    submitted: list[list[str]] = []

    class Engine:
        def submit(self, task, first=False):
            submitted.append([c["id"] for c in task.payload])
            task.done({c["id"]: [{"v": "new"}] for c in task.payload})

        def run(self, refill=None):
            return None

    changed = sweep_run.rekey_all(Engine(), store, lambda _: None, only={"b"})
    assert submitted == [["b"]] and changed == 1
    keys = {r["id"]: r["keys"] for r in store.live_results().values()}
    assert keys == {"a": [{"v": "old"}], "b": [{"v": "new"}], "c": [{"v": "old"}]}


def test_a_new_table_carries_what_it_does_not_measure_again():
    """Exact cells supersede the class cell they fall in; another operand kind of a measured
    op, and every op the new sweep did not complete, are carried with their messages."""
    from coreml_lint.sweep.table import carry

    versions = {"torch": "t", "executorch": "e", "coremltools": "c"}
    previous = {
        "measured_with": versions,
        "sweep": {"measured": "2026-11-30", "cases": 10, "note": "partial"},
        "bases": {"aten.abs.default": "", "aten.neg.default": ""},
        "arg_names": {},
        "messages": ["old crash", "neg crash"],
        "ops": {
            "aten.amax.default": [
                ["float32:in", "a1=ints2", "", "*", "15", "crash", 0, 3],
                ["bool:in", "a1=ints2", "", "*", "15", "crash", 0, 1],
            ],
            "aten.neg.default": [["int8:in", "", "", "*", "15", "crash", 1, 1]],
        },
    }
    table = {
        "measured_with": versions,
        "sweep": {"measured": "2026-12-02"},
        "bases": {"aten.amax.default": "a1=[1]"},
        "arg_names": {},
        "messages": ["new crash"],
        "ops": {"aten.amax.default": [["float32:in", "a1=[2,3]", "", "*", "15", "ok", None, 2]]},
    }
    previous["ops"]["aten.amax.default"].append(  # iOS16/17: measured before, not again
        ["float32:in", "a1=ints2", "", "*", "16-17", "ok", None, 2]
    )
    merged = carry(previous, table, "why")
    amax = merged["ops"]["aten.amax.default"]
    assert [(r[:2], r[4]) for r in amax] == [
        (["float32:in", "a1=[2,3]"], "15"),
        (["bool:in", "a1=ints2"], "15"),
        (["float32:in", "a1=ints2"], "16-17"),
    ]
    neg = merged["ops"]["aten.neg.default"][0]
    assert merged["messages"][neg[6]] == "neg crash"
    assert merged["messages"][amax[1][6]] == "old crash"
    assert merged["sweep"]["carried"]["rows"] == 3 and merged["sweep"]["carried"]["ops"] == 2
    assert merged["sweep"]["carried"]["from"]["measured"] == "2026-11-30"
    assert merged["bases"]["aten.neg.default"] == ""
    assert carry(dict(previous, measured_with={}), table, "why") is table  # another stack


def test_a_rebuilt_table_carries_the_first_runs_rows_never_its_own_stale_ones(tmp_path):
    """A table built before a ``rekey`` holds the sweep's rows under the old key: carried
    from it, they came back as other calls, build after build. The carry source is the
    first run's table beside the shards."""
    import gzip
    import json

    from coreml_lint.sweep import __main__ as sweep_main
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.run import Store

    versions = {"torch": "t", "executorch": "e", "coremltools": "c"}
    first_run = {
        "measured_with": versions,
        "sweep": {"measured": "2026-11-30", "cases": 1},
        "messages": [],
        "ops": {"aten.neg.default": [["int8:in", "", "", "*", "15", "ok", None, 1]]},
    }
    old_row = ["float32:in", "a1=OLD", "", "*", "15", "ok", None, 1]
    stale = dict(first_run, ops={"aten.abs.default": [old_row]})
    folder = tmp_path / "shards"
    folder.mkdir()
    with gzip.open(folder / shards.FIRST_RUN, "wt") as handle:
        json.dump(first_run, handle)
    table_path = tmp_path / "behaviour.json"
    table_path.write_text(json.dumps(stale))
    store = Store(tmp_path / "live", shards=folder)
    assert sweep_main._carry_source(store, table_path) == first_run
    assert sweep_main._carry_source(Store(tmp_path / "x"), table_path) == stale  # no shards


def test_a_sweep_measures_the_ops_of_executorchs_operator_suite_first():
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.schema import in_scope
    from coreml_lint.sweep.scope import FIRST, in_order

    names = sorted(info.name for info in in_scope(load_optable())[0])
    assert set(FIRST) <= set(names)  # each one an op the sweep can measure
    ordered = in_order(names)
    assert ordered[: len(FIRST)] == list(FIRST) and sorted(ordered) == names


def _encoded(value):
    """A case's argument as the key's value functions read it (tensors as placeholders)."""
    if isinstance(value, dict):
        return float(value["float"]) if "float" in value else None
    return [_encoded(v) for v in value] if isinstance(value, list) else value


def test_the_shards_keys_carry_todays_shape_derived_values():
    """A key text derived from the operand's shape (a ceil that changes no size, a scale
    factor making a whole size, a squeeze that removes no dim) is what the shards' measured
    keys hold: a change of that rule without ``sweep rekey`` leaves measured cells
    answering the other kind of call."""
    from coreml_lint.measured.key import ONE_OP_DECOMPOSITIONS
    from coreml_lint.measured.values import POOLS, SQUEEZES, ceil_text, squeeze_text
    from coreml_lint.measured.values import value_text as text
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.shards import stack_folder

    folder = stack_folder({"torch": "2.13.0+cpu", "executorch": "1.5.1", "coremltools": "9.0"})
    checked, stale = 0, []
    for path in sorted(folder.glob("*.jsonl.gz")):
        op = "aten." + path.name.removesuffix(".jsonl.gz")
        if op not in POOLS and op not in SQUEEZES and "upsample" not in op:
            continue
        for row in shards._rows(path):
            case, keys = row["case"], row["result"].get("keys") or []
            shape = tuple(case["tensors"][0]["shape"]) if case["tensors"] else None
            args = [_encoded(a) for a in case["args"]]
            if op in POOLS:
                derived = ceil_text(op, args, shape)
                if derived is None:
                    continue
                want = f"a{POOLS[op][5]}={derived}"
            elif op in SQUEEZES:
                if op in ONE_OP_DECOMPOSITIONS:  # squeeze.dim(x, d) is keyed as squeeze.dims
                    into, args = ONE_OP_DECOMPOSITIONS[op](args, shape)
                    keys = [dict(k, op=op) for k in keys if k["op"] == into]
                derived = squeeze_text(op, args, shape)
                if derived is None:
                    continue
                want = f"a1={derived}"
            else:
                scales = [i for i, a in enumerate(args) if isinstance(a, list) and a and all(
                    isinstance(f, float) for f in a)]  # fmt: skip
                if not scales:
                    continue
                want = f"a{scales[0]}={text(args[scales[0]], shape)}"
            for key in (k for k in keys if k["op"] == op):
                checked += 1
                if want not in key["variant"].split(";"):
                    stale.append(f"{op} {case['id']}: {key['variant']} lacks {want}")
    assert checked > 100
    assert stale == [], (
        f"{len(stale)} stale keys (run `python -m coreml_lint.sweep rekey`):\n"
        + "\n".join(stale[:10])
    )


def test_a_cell_answers_every_shape_only_when_three_ranks_agree():
    """A per-channel PReLU crashes at rank 2 and 3 (three shape classes: 2x4, 1x4x4,
    2x4x4) and converts at rank 4: three classes of two ranks stay apart; three ranks fold
    into ``*``."""
    from coreml_lint.sweep.table import fold

    crash = ("crash", "ValueError: prelu op: rank 3 or rank 5 input", 2)
    two_ranks = {(s, 15): crash for s in ("r2", "r3u", "r3")}
    assert sorted(shape for shape, _, _ in fold(two_ranks)) == ["r2", "r3", "r3u"]
    three_ranks = {(s, 15): crash for s in ("r2", "r3u", "r4u")}
    assert [(shape, targets) for shape, targets, _ in fold(three_ranks)] == [("*", {15})]


def test_the_edge_verifiers_refusals_are_read_without_torch(tmp_path):
    """Light: which composite ops the edge verifier refuses once decomposed is a data file
    (``python -m coreml_lint.sweep edges``); a missing file refuses nothing."""
    from coreml_lint.program.edge_refusals import refused_after_decomposition

    path = tmp_path / "edge_refusals.json"
    assert refused_after_decomposition(path) == {}
    refused = {"slogdet.default": "aten._linalg_slogdet.default"}
    path.write_text(
        json.dumps({"refused": refused, "passed_the_verifier": ["special_erf.default"]})
    )
    refused_after_decomposition.cache_clear()
    assert refused_after_decomposition(path) == refused


@pytest.mark.oracle
def test_an_op_decomposed_into_one_the_edge_verifier_refuses_is_found():
    """``slogdet`` is decomposed into ``_linalg_slogdet``, which the edge verifier refuses;
    ``special_erf`` into ``erf``, which Core ML runs; both are sweep candidates."""
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.edges import EDGE_REFUSAL, candidates
    from coreml_lint.sweep.tasks import edge_verdict

    names = candidates(load_optable())
    assert {"slogdet.default", "special_erf.default"} <= set(names)
    refused = edge_verdict("slogdet.default")
    assert refused["outcome"] == "crash"
    assert EDGE_REFUSAL.search(refused["message"]).group(1) == "_linalg_slogdet.default"
    assert edge_verdict("special_erf.default")["outcome"] == "ok"


def test_an_integer_or_bool_operand_beside_floats_is_measured():
    """``torch.outer(positions, inv_freq)`` with an int64 ``arange`` crashes where both
    float32 convert: one operand of each kind beside float32 ones is its own axis, keyed
    with its own dtype and origin."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.legal import Call, is_legal
    from coreml_lint.sweep.schema import in_scope

    ops = {info.name: info for info in in_scope(load_optable())[0]}
    cases, _ = op_cases(ops["outer.default"])
    mixed = [c for c in cases if c["axis"] == "mixed"]
    kinds = {tuple((t["dtype"], t["origin"]) for t in c["tensors"]) for c in mixed}
    assert (("int64", "op"), ("float32", "in")) in kinds
    assert (("float32", "in"), ("bool", "op")) in kinds
    for case in mixed:
        assert is_legal(ops["outer.default"], Call(case["tensors"], case["args"], case["kwargs"]))
    single, _ = op_cases(ops["sin.default"])  # one float operand: nothing to mix
    assert not [c for c in single if c["axis"] == "mixed"]


def test_an_op_to_edge_decomposes_and_one_with_size_nodes_are_keyed_as_written():
    """A case whose one node is its own op decomposed by ``to_edge`` (``narrow``,
    ``repeat_interleave``) is keyed as the user writes it, and the table says so
    (``measured_decomposed``); another op's decomposition is not. The nodes export adds to
    compute a data-dependent output's size (``sym_size``, ``_operator.ge``) are not the op,
    and only beside such an op."""
    from coreml_lint.sweep.table import build_table, keyed

    def result(op, keys, outcome="crash"):
        return dict(id=op, op=op, target=15, outcome=outcome, message="E", keys=keys)

    def key(op, placed):
        shape = dict(operands="float32:in", variant="", shape="r2", context="")
        return dict(op=op, placed=placed, **shape)

    narrow = result("narrow.default", [key("aten.narrow.default", "dec")], "ok")
    other = result("hardtanh.default", [key("aten.clamp.default", "dec")])
    sized = [
        key("aten.repeat_interleave.self_Tensor", "dec"),
        key("aten.sym_size.int", "coreml"),
        key("_operator.ge", "cpu"),
    ]
    repeat = result("repeat_interleave.self_Tensor", sized)
    two = result("add.Tensor", [key("aten.add.Tensor", "coreml"), key("aten.mul.Tensor", "cpu")])
    # a size node beside an op whose output size does not depend on its data (a dynamic
    # shape's) may be what crashes: that case is not the op's alone
    dynamic = result("view.default", [key("aten.view.default", "coreml"), sized[1]])
    assert keyed(dynamic) is None
    assert keyed(narrow)["op"] == "aten.narrow.default"
    assert keyed(repeat)["op"] == "aten.repeat_interleave.self_Tensor"
    assert keyed(other) is None and keyed(two) is None
    data = build_table([narrow, other, repeat, two], {"cases": 4}, {})
    assert data["measured_decomposed"] == [
        "aten.narrow.default",
        "aten.repeat_interleave.self_Tensor",
    ]
    assert set(data["ops"]) == {"aten.narrow.default", "aten.repeat_interleave.self_Tensor"}


def test_the_module_axis_holds_the_calls_torch_nn_layers_make():
    """``InstanceNorm2d(track_running_stats=True)`` calls ``instance_norm`` with
    ``use_input_stats=False`` at its default ``eps`` on a 4-d input, its buffers constant: a
    call the search around one legal call never made. The shipped calls are what the layers
    make on this torch (``collect``), and the generator measures them as they are."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.modules import _calls, collect
    from coreml_lint.sweep.schema import in_scope

    made = collect(["InstanceNorm2d"])["instance_norm.default"]
    shipped = [c for c in _calls()["instance_norm.default"] if "InstanceNorm2d" in c["module"]]
    assert made == shipped
    (info,) = [i for i in in_scope(load_optable())[0] if i.name == "instance_norm.default"]
    cases, _ = op_cases(info)
    running = [
        c
        for c in cases
        if c["axis"] == "module"
        and "track_running_stats=True" in c["label"]
        and len(c["tensors"][0]["shape"]) == 4
    ]
    assert running and all(c["args"][5] is False and c["args"][7] == 1e-05 for c in running)
    constants = {t["origin"] for c in running for t in c["tensors"][1:]}
    assert constants == {"const"}
    assert {c["target"] for c in running} == {15, 18}


def test_a_resize_is_measured_at_an_output_size_of_each_ratio_class():
    """Each ratio class ``values.sized_text`` keys, on the base call's input and on a batch
    of one, without changing the base call (its specs share shape lists with copies)."""
    pytest.importorskip("torch")
    from coreml_lint.measured.values import sized_text
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    (info,) = [i for i in in_scope(load_optable())[0] if i.name == "upsample_bilinear2d.vec"]
    cases, _ = op_cases(info)
    (base,) = [c for c in cases if c["axis"] == "base" and c["target"] == 15]
    assert base["tensors"][0]["shape"][0] != 1  # not made a batch of one by a later axis
    sized = [c for c in cases if c["label"].startswith("output_size=") and c["target"] == 15]
    batches = {c["tensors"][0]["shape"][0] for c in sized}
    assert batches == {1, base["tensors"][0]["shape"][0]}
    texts = {
        sized_text(f"aten.{info.name}", c["args"], tuple(c["tensors"][0]["shape"])) for c in sized
    }
    assert {f"[{w},{w}]" for w in ("same", "up", "up(frac)", "down(frac)")} <= texts


def test_a_recurrent_layer_is_measured_as_torch_nn_calls_it_with_its_state_as_input():
    """``nn.LSTM`` starts its state with ``zeros``; the key reads a float32 value made in
    Core ML as a partition input, so the case takes ``h0`` and ``c0`` as inputs, its
    weights constant. Eager torch does not check an LSTM's weights against its flags, so
    the op is measured only as its layer calls it (flags, two layers, a projection), in
    float32 and float16: never a ``num_layers`` changed beside one layer's weights. A
    time-major layer (the default) takes its batch second, and two stacked layers are
    also measured bidirectional. Each call is also measured with only its first output
    read (keyed ``outputs=partly-unused``, as a model's node is)."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.modules import _calls, collect
    from coreml_lint.sweep.schema import in_scope

    made = collect(["LSTM"])["lstm.input"]
    assert made == [c for c in _calls()["lstm.input"] if c["module"].startswith("LSTM(")]
    (info,) = [i for i in in_scope(load_optable())[0] if i.name == "lstm.input"]
    cases, why = op_cases(info)
    assert why is None and {c["axis"] for c in cases} == {"module"}
    layers = {c["label"].removesuffix(" float16") for c in cases}
    wanted = {"LSTM()", "LSTM(num_layers=2)", "LSTM(bidirectional=True, num_layers=2)"}
    assert {f"module {layer}" for layer in wanted} <= layers
    plain = [c for c in cases if c["label"] == "module LSTM()"]
    assert {tuple(c["tensors"][0]["shape"]) for c in plain} == {(8, 1, 4), (8, 2, 4)}
    first = {tuple(c["tensors"][0]["shape"]) for c in cases if "batch_first=True" in c["label"]}
    assert first == {(1, 8, 4), (2, 8, 4)}
    assert [t["origin"] for t in plain[0]["tensors"]] == ["in"] * 3 + ["const"] * 4
    half = next(c for c in cases if c["label"] == "module LSTM() float16")
    assert {t["dtype"] for t in half["tensors"]} == {"float16"}
    # ``out, _ = self.lstm(x)``: the states unread, as a model mostly calls it
    alone = [c for c in cases if c.get("returns") == [0]]
    assert len(alone) * 2 == len(cases)

    def call(case, *drop):
        return {k: v for k, v in case.items() if k not in ("id", "returns", *drop)}

    for case in alone:
        label = case["label"].removesuffix(", output only")
        assert label != case["label"] and call(case, "label") in [
            call(c, "label") for c in cases if c["label"] == label
        ]


def test_only_a_recurrent_layer_s_zero_state_becomes_an_input_operand():
    """A ``zeros`` made in ``forward`` is a state only where a recurrent layer starts
    from it; elsewhere it is a value made inside, which the module axis does not
    record as an input."""
    torch = pytest.importorskip("torch")
    from coreml_lint.sweep.modules import _op_calls

    class Shifted(torch.nn.Module):
        def forward(self, x):
            return torch.add(x, torch.zeros(x.shape[-1]))

    ep = torch.export.export(Shifted(), (torch.randn(2, 4),), strict=False)
    assert [op for op, _ in _op_calls(ep)] == []
    ((op, call),) = _op_calls(ep, zero_states=True)
    assert op == "add.Tensor" and [t["origin"] for t in call["tensors"]] == ["in", "in"]


def test_ops_whose_operands_must_fit_together_are_measured_from_a_seed():
    """``index_fill`` with a 0-d value beside an int64 index, ``affine_grid`` with
    ``[N, 2, 3]`` matrices beside a size list of ``N``: the generic search changes one
    operand at a time and finds neither. A seed's operands are not reshaped alone."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    scope = {i.name: i for i in in_scope(load_optable())[0]}
    for name, shapes in (
        ("index_fill.int_Tensor", [[4, 4], [2], []]),
        ("affine_grid_generator.default", [[2, 2, 3]]),
    ):
        cases, why = op_cases(scope[name])
        assert why is None
        base = next(c for c in cases if c["axis"] == "base")
        assert [t["shape"] for t in base["tensors"]] == shapes
        assert {"dtype", "origin"} <= {c["axis"] for c in cases}
        assert not {"shape", "rank"} & {c["axis"] for c in cases}


def test_a_dtype_argument_is_measured_on_integer_data_beside_each_other_argument():
    """``ids.sum(0, dtype=torch.float32)`` of int32 ids came back int32; the table had
    measured ``dtype=`` on int64 data with ``dim=None`` only. The dtype values models ask
    for are crossed with int32, int64 and bool data, alone and beside a ``dim``."""
    pytest.importorskip("torch")
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.generate import op_cases
    from coreml_lint.sweep.schema import in_scope

    (info,) = [i for i in in_scope(load_optable())[0] if i.name == "sum.dim_IntList"]
    cases, _ = op_cases(info)
    found = {
        (
            c["tensors"][0]["dtype"],
            json.dumps(c["args"][1:]),
            c["kwargs"].get("dtype", {}).get("dtype"),
        )
        for c in cases
    }
    for data in ("int32", "int64", "bool"):
        assert (data, "[[0]]", "float32") in found
        assert (data, "[null]", "float16") in found
