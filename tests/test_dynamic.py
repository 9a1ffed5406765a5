"""Dynamic shapes on the light path: the reader's range constraints and symbolic sizes,
the size evaluator, and the dynamic rules on programs in memory (no lowering here; the
oracle is tests/test_dynamic_oracle.py)."""

from __future__ import annotations

import io
from fractions import Fraction

import pytest

from coreml_lint.program import symbolic

torch = pytest.importorskip("torch")

from torch.export import Dim  # noqa: E402

import coreml_lint  # noqa: E402
from coreml_lint.program.pt2 import read_pt2_stream  # noqa: E402
from coreml_lint.rulekit.examples import dynamic_cases  # noqa: E402
from coreml_lint.rules import all_rules  # noqa: E402

all_rules()
CASES = {c.id: c for c in dynamic_cases()}


def _saved(case_id: str):
    model, inputs, shapes = CASES[case_id].make()
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    (graph,) = read_pt2_stream(buffer, case_id)
    return ep, graph


def test_reader_keeps_range_constraints_and_symbolic_ints():
    _ep, graph = _saved("fcn-dynamic-resize")
    ranges = graph.meta["range_constraints"]
    assert sorted(ranges.values()) == [(1, 8), (16, 512), (16, 512)]
    assert symbolic.symbol_ranges(graph.meta) == {k: v for k, v in ranges.items()}
    assert sorted(symbolic.example_sizes(graph.meta).values()) == [32, 48]
    x = graph.tensors["x"].shape
    assert all(symbolic.is_symbolic(size) for size in (x[0], x[2], x[3])) and x[1] == 3


def test_derived_dims_are_read_as_expressions():
    _ep, graph = _saved("derived-dims-saved")
    keys = graph.meta["range_constraints"]
    derived = [k for k in keys if not k.isidentifier()]
    assert len(derived) == 2 and all(k.startswith("16*") for k in derived)
    (h,) = symbolic.symbols(derived[0])
    assert symbolic.evaluate(derived[0], {h: 3}) == 48


@pytest.mark.parametrize(
    "text, env, value",
    [
        ("Mul(Integer(16), Symbol('s1', positive=True, integer=True))", {"s1": 3}, 48),
        (
            "Add(FloorDiv(Add(Symbol('s0', integer=True), Integer(-1)), Integer(2)), Integer(1))",
            {"s0": 33},
            17,
        ),
        ("TruncToInt(Mul(Float('0.5', precision=53), ToFloat(Symbol('s0'))))", {"s0": 9}, 4),
        ("Max(2, s0 - 1)", {"s0": 1}, 2),
        ("(s0 + 1)//2 + s1 % 3", {"s0": 4, "s1": 5}, 4),
    ],
)
def test_evaluate(text, env, value):
    assert symbolic.evaluate(text, env) == Fraction(value)


def test_unknown_expressions_are_unknown_not_guessed():
    assert symbolic.evaluate("Symbol('s0')", {}) is None
    assert symbolic.evaluate("__import__('os').getcwd()", {}) is None
    assert symbolic.evaluate("Foo(s0)", {"s0": 1}) is None
    assert symbolic.evaluate("Pow(Pow(Pow(Integer(10), 64), 64), 64)", {}) is None
    assert symbolic.evaluate("s0 ** 64 ** 64", {"s0": 3}) is None
    assert symbolic.pretty("Mul(Integer(2), Symbol('s9', positive=True))") == "(2*s9)"


def test_unbounded_dim_is_sampled_from_its_example_size():
    meta = {
        "range_constraints": {"s0": (2, None)},
        "sym_values": {"sym_size_int": ("Symbol('s0', positive=True, integer=True)", 6)},
    }
    assert symbolic.symbol_ranges(meta) == {"s0": (2, 6 * symbolic.UNBOUNDED_FACTOR)}
    points = list(symbolic.sample_points(meta))
    assert {"s0": 2} in points and {"s0": 6} in points and {"s0": 48} in points


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_saved_case_gets_exactly_its_expected_errors(case_id):
    from coreml_lint.engine.program import lint_graph

    _ep, graph = _saved(case_id)
    found = {f.code for f in lint_graph(graph).findings if f.severity.value == "error"}
    assert found == set(CASES[case_id].expect)


def test_derived_dims_in_memory_are_not_flagged():
    """Before saving, the program lowers (measured): lint_program must not cry wolf."""
    model, inputs, shapes = CASES["derived-dims-saved"].make()
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    assert not [f for f in coreml_lint.lint_program(ep).findings if f.code == "CML608"]


def test_fcn_finding_names_the_stock_crash_and_the_sizes():
    model, inputs, shapes = CASES["fcn-dynamic-resize"].make()
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    (finding,) = [f for f in coreml_lint.lint_program(ep).findings if f.code == "CML607"]
    assert "Unable to map torch_upsample_bilinear to core upsample" in finding.message
    assert "// 2" in finding.message  # the strided encoder's size, printed readably
    assert finding.partitioner == {
        "skip_ops_for_coreml_delegation": ["aten.upsample_bilinear2d.vec"]
    }
    assert finding.lower_fixes


def test_resize_with_only_dynamic_batch_is_not_flagged():
    class Up(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x[:, :, ::2, ::2], size=x.shape[-2:])

    ep = torch.export.export(Up(), (torch.randn(2, 3, 8, 8),), dynamic_shapes=({0: Dim("b")},))
    assert not [f for f in coreml_lint.lint_program(ep).findings if f.code == "CML607"]


def test_verify_sizes_are_the_edges_of_the_constraints():
    from coreml_lint.verifier.sizes import edge_inputs, is_dynamic

    model, inputs, shapes = CASES["scale-factor-dynamic"].make()
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    assert is_dynamic(ep)
    sizes, notes = edge_inputs(ep)
    assert [tuple(t.shape) for t in sizes["smallest"]] == [(1, 3, 16, 16)]
    assert "largest" not in sizes and "over" in notes[0]  # 8x3x512x512 is too large to run
    static = torch.export.export(model, inputs)
    assert not is_dynamic(static)


def test_verify_sizes_of_derived_dims_and_unbounded_dims():
    from coreml_lint.verifier.sizes import edge_inputs

    model, inputs, shapes = CASES["derived-dims-saved"].make()
    sizes, _ = edge_inputs(torch.export.export(model, inputs, dynamic_shapes=shapes))
    assert [tuple(t.shape) for t in sizes["smallest"]] == [(2, 3, 32, 32)]  # 16 * 2
    assert [tuple(t.shape) for t in sizes["largest"]] == [(2, 3, 512, 512)]  # 16 * 32
    unbounded = {"x": {0: Dim("b")}}
    sizes, notes = edge_inputs(torch.export.export(model, inputs, dynamic_shapes=unbounded))
    assert "largest" not in sizes and "no upper bound" in notes[0]


def test_adaptive_pool_needs_a_1x1_output_when_any_input_size_is_dynamic():
    class Pool(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.adaptive_avg_pool2d(x * 2, (1, 4))

    ep = torch.export.export(
        Pool(), (torch.randn(1, 3, 16, 16),), dynamic_shapes=({2: Dim("h", min=8, max=64)},)
    )
    assert [f.code for f in coreml_lint.lint_program(ep).findings] == ["CML607"]


def test_a_resize_read_off_another_tensor_says_so_even_at_a_fixed_ratio():
    """A U-Net skip: the output is exactly twice the input at every size the derived dims
    allow, and still crashes, because the size is another tensor's. The finding says that
    (not "not one fixed scale", which its own fix, scale_factor=2, seemed to contradict)."""

    class Skip(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down = torch.nn.Conv2d(3, 3, 2, stride=2)

        def forward(self, x):
            y = self.down(x)
            return x + torch.nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear")

    half = Dim("half", min=8, max=128)
    shapes = {"x": {2: 2 * half, 3: 2 * half}}
    ep = torch.export.export(Skip(), (torch.randn(1, 3, 32, 32),), dynamic_shapes=shapes)
    (finding,) = [f for f in coreml_lint.lint_program(ep).findings if f.code == "CML607"]
    assert "the ratio is always 2, but the output size is another tensor's size" in (
        finding.message
    )
    assert "not one fixed scale" not in finding.message
    assert finding.fix.startswith(
        "compute the output size from the resized tensor's own size, as in "
        "`F.interpolate(y, scale_factor=2)`"
    )


def test_a_resize_whose_ratio_changes_says_its_size_does_not_follow_its_input():
    model, inputs, shapes = CASES["fixed-size-resize-dynamic-input"].make()
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    (finding,) = [f for f in coreml_lint.lint_program(ep).findings if f.code == "CML607"]
    assert "its output size does not follow its input size" in finding.message
