"""The op table's keys are the lint's keys: a model a user writes for the call a table entry
describes gets, from the linter, exactly that entry's key.

The sweep keys its own programs with the linter's ``KeyMaker`` (``sweep/measure.py``), but
its programs are scaffolding (cases grouped as submodules, operands made by a ``prefix``
module, constants as buffers, an anchor input). Here each case the generator makes is
written again the way a user would write it (a plain module calling the op, constants as
parameters, casts and comparisons in ``forward``), exported with ``torch.export`` (nothing
is lowered), and the lint's key of its op node must be the key the sweep's own program of
that case gets, which is the key its table entry carries. ``lower``'s refuse hook keys the
``torch.fx`` node with its own function (``fx_keys``): its keys must include the lint's.
"""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from coreml_lint.core.settings import PartitionerSettings  # noqa: E402
from coreml_lint.measured.key import Key, KeyMaker  # noqa: E402
from coreml_lint.measured.versions import active_table  # noqa: E402

TARGET = 15


class UserModel(torch.nn.Module):
    """The call a case describes, as a model's author writes it."""

    def __init__(self, case: dict[str, Any]) -> None:
        from coreml_lint.sweep.build import _op
        from coreml_lint.sweep.values import make_tensor, seed_of

        super().__init__()
        self.case = case
        self.op = _op(case["op"])
        for j, spec in enumerate(case["tensors"]):
            if spec.get("origin") != "const":
                continue
            value = make_tensor(spec, seed_of(case, j))
            if value.is_floating_point():  # a weight: a parameter, not a buffer
                setattr(self, f"k{j}", torch.nn.Parameter(value, requires_grad=False))
            else:
                self.register_buffer(f"k{j}", value)

    def forward(self, *xs: Any) -> tuple[Any, ...]:
        from coreml_lint.sweep.values import decode, flat_outputs, torch_dtype

        given = iter(xs)
        tensors = []
        for j, spec in enumerate(self.case["tensors"]):
            origin = spec.get("origin")
            if origin == "const":
                tensors.append(getattr(self, f"k{j}"))
            elif origin == "op":
                x, dtype = next(given), torch_dtype(spec["dtype"])
                tensors.append(x > 0 if dtype == torch.bool else x.to(dtype))
            else:
                tensors.append(next(given))
        args = [decode(a, tensors) for a in self.case["args"]]
        kwargs = {k: decode(v, tensors) for k, v in self.case["kwargs"].items()}
        out = flat_outputs(self.op(*args, **kwargs))
        return (*out, *([xs[0] * 2.0] if not tensors and xs else []))


def _inputs(case: dict[str, Any]) -> tuple[Any, ...]:
    from coreml_lint.sweep.build import _source_spec
    from coreml_lint.sweep.values import make_tensor, seed_of

    found = []
    for j, spec in enumerate(case["tensors"]):
        if spec.get("origin") == "const":
            continue
        source = _source_spec(spec) if spec.get("origin") == "op" else spec
        found.append(make_tensor(source, seed_of(case, j)))
    return tuple(found) or (torch.randn(2),)


def lint_keys(case: dict[str, Any]) -> set[Key]:
    """The lint's keys of the case's op nodes in the user's model."""
    from coreml_lint.engine.exported import graph_of
    from coreml_lint.program.canonical import canonicalize
    from coreml_lint.program.placement import predict_placement

    ep = torch.export.export(UserModel(case).eval(), _inputs(case), strict=False)
    graph = canonicalize(graph_of(ep))
    settings = PartitionerSettings(minimum_deployment_target=case["target"])
    maker = KeyMaker(graph, predict_placement(graph, settings))
    # The op's own nodes return the model's outputs (a cast making an operand is also a
    # ``_to_copy`` when the op is one; export may call the op another: reshape_as -> view).
    returned = {o.name for o in graph.outputs[: len(graph.outputs) - (not case["tensors"])]}
    return {maker.key(n) for n in graph.nodes if returned & set(n.outputs)}


def sweep_keys(case: dict[str, Any]) -> set[Key]:
    """The keys the sweep's own program of the case gets (what its table entry carries)."""
    from coreml_lint.sweep.build import build
    from coreml_lint.sweep.measure import case_keys

    built = build([case])
    with torch.no_grad():  # as the sweep exports it
        ep = torch.export.export(built.module, tuple(built.inputs), strict=False)
    return {Key(k["op"], k["operands"], k["variant"], k["shape"]) for k in case_keys(ep, [case])[0]}


@cache
def _ops() -> dict[str, Any]:
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.schema import in_scope

    return {info.name: info for info in in_scope(load_optable())[0]}


def _info(op: str) -> Any:
    """One op's schema (without listing every op in scope, which takes seconds)."""
    from coreml_lint.sweep.build import _op
    from coreml_lint.sweep.schema import OpInfo, schema_args

    packet = _op(op)
    return OpInfo(op, packet, tuple(schema_args(packet)))


def _cases(op: str) -> list[dict[str, Any]]:
    from coreml_lint.sweep.generate import op_cases

    cases, _ = op_cases(_info(op))
    return [c for c in cases if c["target"] == TARGET and not c["context"]]


def compare(cases: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(entries compared, mismatches): a case counts when the table holds its key."""
    table = active_table()
    compared, wrong = 0, []
    for case in cases:
        try:
            theirs = sweep_keys(case)
        except Exception:  # the sweep's export fails too: an "export" result, no entry
            continue
        if not any(table.lookup(k, TARGET) is not None for k in theirs):
            continue  # not measured (the sweep stopped early on some axes)
        compared += 1
        mine = lint_keys(case)
        if mine != theirs:
            wrong.append(f"{case['op']} {case['label']}: lint {mine} != table {theirs}")
    return compared, wrong


@pytest.mark.parametrize(
    "op",
    [
        "topk.default",
        "pixel_unshuffle.default",
        "pow.Scalar",
        "amax.default",
    ],
)
def test_a_users_model_of_a_measured_call_has_the_entrys_key(op):
    cases = _cases(op)
    base = [c for c in cases if c["axis"] == "base"]  # measured wherever the op is
    picked = base + random.Random(op).sample(cases, min(3, len(cases)))
    compared, wrong = compare(picked)
    assert compared >= 1 and wrong == []


@pytest.mark.oracle  # the slow tier: about a thousand exports
def test_lint_keys_are_the_tables_keys_for_500_entries():
    names = sorted(_ops())
    random.Random(22).shuffle(names)
    compared, wrong = 0, []
    for op in names:
        try:
            cases = _cases(op)
        except Exception:  # an op the generator cannot call: nothing to compare
            continue
        done, bad = compare(cases[:40])
        compared += done
        wrong += bad
        if compared >= 500:
            break
    assert wrong == [], "\n".join(wrong[:20])
    assert compared >= 500


def _fx_keys_of_returned(case: dict[str, Any]) -> set[Key]:
    """The keys ``lower``'s refuse hook computes (``fx_keys``) for the nodes that return the
    model's outputs, on the decomposed ATen graph the partitioner is handed."""
    from coreml_lint.rules.cml801_measured_op_behaviour import fx_keys

    ep = torch.export.export(UserModel(case).eval(), _inputs(case), strict=False)
    graph = ep.run_decompositions({}).graph
    output = next(n for n in graph.nodes if n.op == "output")
    returned = set(output.all_input_nodes)
    found = set()
    for node in graph.nodes:
        getitems = [u for u in node.users if "getitem" in str(u.target)]
        if node.op == "call_function" and (node in returned or returned & set(getitems)):
            found |= {key for key, context in fx_keys(node) if not context}
    return found


@pytest.mark.parametrize("op", ["topk.default", "pow.Scalar"])
def test_the_lowering_hooks_keys_include_the_lints(op):
    cases = random.Random(op).sample(_cases(op), 4)
    for case in cases:
        mine = lint_keys(case)
        assert mine and mine <= _fx_keys_of_returned(case), case["label"]


@pytest.mark.parametrize(
    "op, argument, derived",
    [
        ("upsample_bilinear2d.vec", "scale_factors", "frac(whole)"),
        ("avg_pool3d.default", "ceil_mode", "True(same size)"),
        ("max_pool2d.default", "ceil_mode", "True(same size)"),
        ("matmul.default", "operands at ranks", "ranks="),
        ("upsample_bilinear2d.vec", "output_size=up(frac)", "a1=[up(frac),up(frac)]"),
    ],
)
def test_shape_derived_values_are_keyed_alike_by_the_lint_the_sweep_and_the_hook(
    op, argument, derived
):
    """Scale factors (a whole output size or not) and a ceil mode (changing a size or not)
    are keyed against the operand's shape: all three key makers must see the same shape."""
    cases = [c for c in _cases(op) if argument in c["label"]]
    variants = set()
    for case in cases[:8]:
        mine = lint_keys(case)
        assert mine == sweep_keys(case), case["label"]
        assert mine <= _fx_keys_of_returned(case), case["label"]
        variants |= {k.variant for k in mine}
    assert any(derived in v for v in variants), variants


def test_an_argument_spelled_out_at_its_default_is_the_call_that_leaves_it_out():
    """A default keys record exactly (an integer, a list, a bool) spelled out is the call
    that leaves it out. A float equal to an integer default is not: ``elu``'s default alpha
    is the integer 1, which coremltools fails to convert, and ``nn.ELU`` passes 1.0, which
    converts (ExecuTorch's own ELU tests); nor is a float class (it holds other values)."""
    from coreml_lint.measured.table import MEASURED

    table = active_table()
    elu = "aten.elu.default"
    assert table.arg_defaults[elu]["a1"] == "1"
    spelled = Key(elu, "float32:in", "a1=1", "r2")  # F.elu(x, 1): the integer default
    base = table.spelled(spelled)
    assert base.variant == table.bases[elu] == ""
    answer = table.answer(spelled, TARGET)
    assert answer is not None and answer.basis == MEASURED
    assert answer.entry is table.answer(base, TARGET).entry and answer.entry.outcome == "crash"
    module = Key(elu, "float32:in", "a1=1.0", "r2")  # nn.ELU(): alpha=1.0
    assert table.spelled(module) == module
    found = table.answer(module, TARGET)
    assert found is None or found.entry.outcome != "crash"
    assert table._spelling("aten.softplus.default", "a1=whole;a2=whole") == "a1=whole;a2=whole"
    assert table._spelling("aten.softplus.default", "a1=1;a2=3") == "a2=3"
    from coreml_lint.measured.values import is_exact_text

    assert all(map(is_exact_text, ("1", "-1", "[1,1]", "True", "None")))
    assert not any(map(is_exact_text, ("whole", "[whole,whole]", "ints2", "big")))


def test_a_repeated_operand_is_keyed_alike_by_the_lint_and_the_hook():
    """``x.scatter(1, index, x)`` and ``x * x`` hold one tensor twice: the light graph keys
    each operand slot, and so must ``lower``'s refuse hook (a node's ``all_input_nodes``
    lists it once)."""
    from coreml_lint.engine.exported import graph_of
    from coreml_lint.program.canonical import canonicalize
    from coreml_lint.program.placement import predict_placement
    from coreml_lint.rules.cml801_measured_op_behaviour import fx_keys

    class Repeated(torch.nn.Module):
        def forward(self, x, index):
            return x.scatter(1, index, x), x * x

    inputs = (torch.randn(3, 4), torch.tensor([[0, 1, 2, 3]] * 3))
    ep = torch.export.export(Repeated().eval(), inputs, strict=False)
    graph = canonicalize(graph_of(ep))
    maker = KeyMaker(graph, predict_placement(graph, PartitionerSettings()))
    mine = {
        maker.key(n) for n in graph.nodes if n.target in ("aten.scatter.src", "aten.mul.Tensor")
    }
    assert {k.operands.count(",") for k in mine} == {1, 2}  # every slot keyed
    hooked = ep.run_decompositions({}).graph
    found = {k for n in hooked.nodes for k, context in fx_keys(n) if not context}
    assert mine <= found


def test_a_symbolic_size_is_keyed_alike_by_the_lint_and_the_hook():
    """A dynamic batch read with ``x.shape[0]`` is a ``sym_size`` node: the hook keys it as
    the light graph does (``sym``), not as a tensor operand."""
    from coreml_lint.engine.exported import graph_of
    from coreml_lint.program.canonical import canonicalize
    from coreml_lint.program.placement import predict_placement
    from coreml_lint.rules.cml801_measured_op_behaviour import fx_keys

    class Flatten(torch.nn.Module):
        def forward(self, x):
            return x.view(x.shape[0], -1) * 2.0

    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(
        Flatten().eval(), (torch.randn(4, 3, 2),), dynamic_shapes=({0: batch},), strict=False
    )
    graph = canonicalize(graph_of(ep))
    maker = KeyMaker(graph, predict_placement(graph, PartitionerSettings()))
    mine = {maker.key(n) for n in graph.nodes if n.target == "aten.view.default"}
    assert mine and all("sym" in k.variant for k in mine)
    hooked = ep.run_decompositions({}).graph
    found = {k for n in hooked.nodes for k, context in fx_keys(n) if not context}
    assert mine <= found


def test_a_factorys_placement_keywords_are_keyed_as_the_sweeps_calls_leave_them_out():
    """Export writes ``device=cpu, pin_memory=False`` into every factory call a model makes;
    the sweep's calls mostly leave them out. Neither the lint nor the hook keys them, and a
    memory format is spelled as the light graph spells it."""
    from coreml_lint.engine.exported import graph_of
    from coreml_lint.program.canonical import canonicalize
    from coreml_lint.program.placement import predict_placement
    from coreml_lint.rules.cml801_measured_op_behaviour import fx_keys

    class Factories(torch.nn.Module):
        def forward(self, x):
            steps = torch.arange(4, device=x.device, dtype=torch.float32)
            kept = x.clone(memory_format=torch.contiguous_format)
            return kept + torch.zeros(4, 4, device=x.device) + steps

    ep = torch.export.export(Factories().eval(), (torch.randn(4, 4),), strict=False)
    graph = canonicalize(graph_of(ep))
    maker = KeyMaker(graph, predict_placement(graph, PartitionerSettings()))
    factories = ("aten.arange.default", "aten.zeros.default", "aten.clone.default")
    mine = {maker.key(n) for n in graph.nodes if n.target in factories}
    assert {k.variant for k in mine} >= {"a0=[4,4]", "a0=4;dtype=float32"}
    assert not any(w in k.variant for k in mine for w in ("device", "pin_memory", "layout"))
    hooked = ep.run_decompositions({}).graph
    found = {k for n in hooked.nodes for k, context in fx_keys(n) if not context}
    assert mine <= found
    zeros = next(k for k in mine if k.op == "aten.zeros.default")
    answer = active_table().answer(zeros, TARGET)
    assert answer is not None and answer.entry.outcome == "ok"  # a measured call, answered


def test_a_folds_overlapping_windows_are_keyed_apart():
    """Kernel and stride decide together whether coremltools folds patches back: a call
    whose stride is below its kernel in some dim is keyed ``window=overlap`` beside its
    exact values; tiling and gapped calls are not."""
    from coreml_lint.measured.values import OVERLAP, overlap_text

    col2im = "aten.col2im.default"
    assert overlap_text(col2im, ["x", [24, 24], [8, 8], [1, 1], [0, 0], [4, 4]]) == OVERLAP
    assert overlap_text(col2im, ["x", [24, 24], [8, 8], [1, 1], [0, 0], [8, 4]]) == OVERLAP
    assert overlap_text(col2im, ["x", [24, 24], [4, 4], [1, 1], [0, 0], [4, 4]]) is None
    assert overlap_text(col2im, ["x", [24, 24], [2, 2], [1, 1], [0, 0], [4, 4]]) is None
    assert overlap_text("aten.im2col.default", ["x", [3, 3], [1, 1], [1, 1], [1, 1]]) == OVERLAP
    assert overlap_text("aten.conv2d.default", ["x", "w", None, [1, 1], [0, 0]]) is None


def test_a_matmul_is_keyed_by_its_operands_ranks_where_they_differ():
    """A vector times a matrix converts right, a vector times a batch of matrices is typed
    (1, n) for (b, n): the first operand's shape class alone cannot tell them apart."""
    from coreml_lint.measured.values import ranks_text

    matmul = "aten.matmul.default"
    assert ranks_text(matmul, [(4,), (3, 4, 12)]) == "ranks=1x3"
    assert ranks_text(matmul, [(2, 3, 4), (4,)]) == "ranks=3x1"
    assert ranks_text(matmul, [(3, 4), (4, 5)]) is None  # equal ranks: the shape class says it
    assert ranks_text(matmul, [(4,), None]) is None
    assert ranks_text("aten.add.Tensor", [(4,), (3, 4, 12)]) is None


def test_a_resize_output_size_is_keyed_by_its_ratio_to_the_input():
    """coremltools picks a resize's MIL op by the ratio of each output dim to the input's,
    so ``size=(8, 8)`` of a 20x20 input answers for ``size=(3, 3)`` of a 4x4 one."""
    from coreml_lint.measured.values import sized_text

    bilinear = "aten.upsample_bilinear2d.vec"
    assert sized_text(bilinear, ["x", [8, 8], False, None], (1, 3, 20, 20)) == (
        "[down(frac),down(frac)]"
    )
    assert sized_text(bilinear, ["x", [10, 40], False, None], (1, 3, 20, 20)) == "[down,up]"
    assert sized_text(bilinear, ["x", [30, 20], False, None], (1, 3, 20, 20)) == ("[up(frac),same]")
    assert sized_text(bilinear, ["x", [1, 1], False, None], (1, 3, 4, 4)) == "[1,1]"
    assert sized_text(bilinear, ["x", None, False, [2.0, 2.0]], (1, 3, 4, 4)) is None
    assert sized_text(bilinear, ["x", [8, 8], False, None], (1, 3, "s0", 4)) is None
    assert sized_text("aten.adaptive_avg_pool2d.default", ["x", [2, 2]], (1, 3, 4, 4)) is None
    # a nearest resize is right or not by whether its sizes share a divisor
    nearest = "aten.upsample_nearest2d.vec"
    assert sized_text(nearest, ["x", [8, 3], None], (1, 3, 20, 4)) == "[down(common),down(coprime)]"
    assert sized_text(nearest, ["x", [6, 5], None], (1, 3, 4, 4)) == "[up(common),up(coprime)]"
    assert sized_text(nearest, ["x", [2, 8], None], (1, 3, 4, 4)) == "[down(common),up]"
    assert sized_text(nearest, ["x", [4, 1], None], (1, 3, 4, 4)) == "[same,1]"
    # from 100 rows on verify's kernel reads the shifted row as whole: exact sizes key
    assert sized_text(nearest, ["x", [112, 112], None], (1, 3, 224, 224)) is None
    assert (
        sized_text("aten._upsample_nearest_exact2d.vec", ["x", [8, 8], None], (1, 3, 4, 4)) is None
    )


@pytest.mark.parametrize(
    "key",
    [
        # F.interpolate(x, size=(8, 8), mode="bilinear", antialias=True) of a 20x20 input
        Key(
            "aten._upsample_bilinear2d_aa.vec",
            "float32:in",
            "a1=[down(frac),down(frac)];a2=False;a3=None;size=down",
            "r4u",
        ),
        # torch.matmul(v, t) of a vector and a batch of matrices: declared (1, n)
        Key("aten.matmul.default", "float32:in,float32:in", "ranks=1x3", "r1"),
        # F.interpolate(x, size=(8, 8)) of a 20x20 input: nearest, sizes sharing a divisor
        Key(
            "aten.upsample_nearest2d.vec",
            "float32:in",
            "a1=[down(common),down(common)];a2=None",
            "r4",
        ),
        # nn.InstanceNorm2d(8, affine=True, track_running_stats=True) on a 4-d input
        Key(
            "aten.instance_norm.default",
            ",".join(["float32:in"] + ["float32:const"] * 4),
            "a5=False;a6=frac;a7=tiny;a8=False",
            "r4u",
        ),
    ],
)
def test_the_table_answers_a_models_call_of_the_new_keys_as_measured(key):
    """The calls the session's keys and axes reach, as a model's node keys them: measured
    wrong at the default target, not predicted."""
    answer = active_table().answer(key, TARGET)
    assert answer is not None and answer.basis == "measured", key
    assert answer.entry.outcome == "wrong"


@pytest.mark.parametrize(
    "key, basis",
    [
        # nn.MaxPool2d(3, stride=2, dilation=2, ceil_mode=True): every measured dilation of
        # 2 crashes; the class of [2,2] also holds [1,1], measured ok beside a ceil
        (
            Key(
                "aten.max_pool2d.default",
                "float32:in",
                "a1=[3,3];a2=[2,2];a3=[0,0];a4=[2,2];a5=True",
                "r4",
            ),
            "contrast",
        ),
        # nn.ConvTranspose1d(6, 4, 4, stride=3, groups=2, output_padding=2): stride 3 with
        # output_padding 2 crashes; the base call's cell is "2 ok; 1 edge", a control
        (
            Key(
                "aten.conv_transpose1d.default",
                "float32:in,float32:const,float32:const",
                "a3=[3];a4=[0];a5=[2];a6=2",
                "r3",
            ),
            "factor",
        ),
    ],
)
def test_a_measured_crash_cause_is_predicted_over_a_class_that_converts(key, basis):
    """A value measured to crash wherever it is given outranks a class reading from other
    values of its class that convert, and a base call that always converts (ok or edge,
    a mixed cell) is a control for what a change causes."""
    answer = active_table().answer(key, TARGET)
    assert answer is not None and answer.entry.outcome == "crash", key
    assert answer.basis == basis


def test_an_antialiased_resize_is_keyed_by_whether_it_shrinks():
    """Antialiasing changes a resize only where it shrinks a dim (coremltools drops it):
    an output size below the input's in some dim, or a scale factor below 1, is keyed
    ``size=down``; a growing or same-size call, or a plain resize, is not."""
    from coreml_lint.measured.values import DOWNSIZED, downsized_text

    aa = "aten._upsample_bilinear2d_aa.vec"
    assert downsized_text(aa, ["x", [12, 16], False, None], (1, 3, 32, 40)) == DOWNSIZED
    assert downsized_text(aa, ["x", [12, 60], False, None], (1, 3, 32, 40)) == DOWNSIZED
    assert downsized_text(aa, ["x", [12, 16], False, None], (1, 3, 4, 4)) is None
    assert downsized_text(aa, ["x", [4, 4], False, None], (1, 3, 4, 4)) is None
    assert downsized_text(aa, ["x", None, False, [0.5, 0.5]], (1, 3, 4, 4)) == DOWNSIZED
    assert downsized_text(aa, ["x", None, False, [2.0, 2.0]], (1, 3, 4, 4)) is None
    default = "aten._upsample_bilinear2d_aa.default"
    assert downsized_text(default, ["x", [2, 2], False], (1, 3, 4, 4)) == DOWNSIZED
    plain = "aten.upsample_bilinear2d.vec"
    assert downsized_text(plain, ["x", [2, 2], False, None], (1, 3, 4, 4)) is None
    assert downsized_text(aa, ["x", [2, 2], False, None], None) is None


def test_the_judges_worst_value_sign_is_not_a_reason():
    """Two wrong cells whose messages differ only in the sign of the worst value are one
    reason; a hyphen after a word or a closing bracket (a name, a difference) stays."""
    from coreml_lint.measured.outcomes import normalized

    a = "semantic values (upsample_bilinear): worst at [0, 3]: Core ML -0.18, float64 0.02"
    b = "semantic values (upsample_bilinear): worst at [0, 1]: Core ML 0.41, float64 -0.3"
    assert normalized(a) == normalized(b)
    assert normalized("a-1") == "a-N" and normalized("x[-2]") == "x[N]"
    assert normalized("a]-1") == "a]-N" and normalized("f(x)-1") == "f(x)-N"
    assert normalized("KeyError: torch.int8") != normalized("KeyError: torch.uint8")
