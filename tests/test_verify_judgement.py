"""How verify judges a value, without lowering anything (the fast tier): float16 holds what
it can hold, a name is matched to a node only when the layout is certain, a float16 round
trip is not float16 computation, the program's example inputs come first, and nearest
resizing answers only when the convention cannot matter.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("coremltools")

from coreml_lint.verifier.compare import FLOAT16, SEMANTIC, compare  # noqa: E402
from coreml_lint.verifier.eager import run_partition  # noqa: E402
from coreml_lint.verifier.inputs import default_inputs  # noqa: E402
from coreml_lint.verifier.localize import judge_certain  # noqa: E402
from coreml_lint.verifier.mil.k_resize import _nearest  # noqa: E402
from coreml_lint.verifier.mil.registry import Unsupported  # noqa: E402
from coreml_lint.verifier.partition import computes_in_half  # noqa: E402


def test_float16_forgives_values_below_its_normal_range():
    eager = np.array([7.76015e-09, -3e-9, 1e-12], dtype=np.float32)
    assert compare(np.zeros(3, np.float32), eager, FLOAT16).ok  # MobileNetV2's logits
    assert compare(np.array([5.96e-08, 0, 0], np.float32), eager, FLOAT16).ok  # a subnormal
    assert not compare(np.zeros(3, np.float32), eager, SEMANTIC).ok  # float32 holds them


def test_float16_still_judges_nan_inf_integers_and_lost_values():
    eager = np.array([1e-9, 2e-9, 3e-9], dtype=np.float32)
    assert compare(np.array([np.nan, 0, 0]), eager, FLOAT16).kind == "nan"
    assert compare(np.array([np.inf, 0, 0]), eager, FLOAT16).kind == "inf"
    assert compare(np.array([1, 2, 4]), np.array([1, 2, 3]), FLOAT16).kind == "integer"
    # a value the model pushed out of fp16 inside (x * 1e-7 ...) shows at the output's scale
    big = np.array([0.5, 1.0, -0.25], dtype=np.float32)
    assert compare(np.array([0.0, 1.0, 0.0]), big, FLOAT16).kind == "values"


def test_a_var_in_another_layout_is_not_a_certain_match():
    eager = torch.randn(1, 4, 4, 4)
    nhwc = eager.permute(0, 2, 3, 1).numpy()  # same shape, another layout
    assert judge_certain(nhwc, eager, SEMANTIC) is None
    wrong = eager.numpy() * 1.01
    numbers = judge_certain(wrong, eager, SEMANTIC)
    assert numbers is not None and numbers.kind == "values"
    assert judge_certain(eager.numpy(), eager, SEMANTIC).ok
    assert judge_certain(eager.numpy()[..., :2], eager, SEMANTIC) is None  # other shape
    ints = torch.arange(8)
    assert judge_certain(ints.numpy().astype(np.float32), ints, SEMANTIC) is None  # kind


class _RoundTrip(torch.nn.Module):
    def forward(self, x):
        return x.half().float() * 3


class _Half(torch.nn.Module):
    def forward(self, x):
        return (x.half() * 3).float()


@pytest.mark.parametrize("module, half", [(_RoundTrip(), False), (_Half(), True)])
def test_a_float16_round_trip_is_not_float16_computation(module, half):
    x = torch.randn(2, 4)
    ep = torch.export.export(module, (x,)).run_decompositions({})
    run = run_partition(ep, [x])
    assert computes_in_half(run, ep.graph_module) is half
    assert computes_in_half(run) is True  # without the graph: any half value


class _TwoInputs(torch.nn.Module):
    def forward(self, x, ids):
        return x * 2, ids + 1


def test_the_programs_example_inputs_come_first():
    x, ids = torch.randn(2, 3) * 100, torch.randint(0, 5, (2,))
    ep = torch.export.export(_TwoInputs(), (x, ids))
    made, how = default_inputs(ep)
    assert how == ["example", "example"]
    assert torch.equal(made[0], x) and torch.equal(made[1], ids)
    ep.example_inputs = None  # a program saved without them
    made, how = default_inputs(ep)
    assert how == ["random", "random"] and made[0].shape == x.shape
    assert not torch.equal(made[0], x)


def test_nearest_resize_at_a_fractional_ratio_answers_only_when_the_convention_cannot_matter():
    blocks = np.kron(np.array([[1.0, 2.0], [3.0, 4.0]]), np.ones((32, 32)))[None]
    assert np.array_equal(_nearest(blocks, 2, 2), np.array([[[1.0, 2.0], [3.0, 4.0]]]))
    assert np.array_equal(_nearest(np.ones((1, 64, 64)), 2, 2), np.ones((1, 2, 2)))
    with pytest.raises(Unsupported, match="64x64 -> 2x2"):
        _nearest(np.random.default_rng(0).normal(size=(1, 64, 64)), 2, 2)
    whole = np.arange(4.0).reshape(1, 2, 2)  # integer scale: defined, unchanged
    assert np.array_equal(_nearest(whole, 4, 4)[0, :, 0], [0, 0, 2, 2])


# ------------------------------------------------ float32 judged against float64 (issue 30)


def _against(actual, eager, exact, spread=None):
    exact = np.asarray(exact, np.float64)
    spread = np.zeros_like(exact) if spread is None else np.asarray(spread, np.float64)
    actual = np.asarray(actual, np.float32)
    return compare(actual, torch.tensor(eager), SEMANTIC, 0.0, (exact, spread))


def test_a_tiny_element_is_judged_by_its_own_digits_not_the_outputs_scale():
    exact = np.array([1.4e-5, 0.3, -0.25])
    eager = exact.astype(np.float32)
    off = eager.copy()
    off[0] *= 1 + 1.4e-3  # log(1 + x): 3 digits lost where the output's scale hides it
    numbers = _against(off, eager, exact)
    assert numbers.kind == "values" and numbers.index == (0,)
    assert 1e-3 < numbers.rel_error < 2e-3 and numbers.ulps > 1e3
    text = numbers.describe()
    assert "relative error 0.0014" in text and "float32 ulps" in text and "at [0]" in text
    assert _against(eager * (1 + 5e-5), eager, exact).ok  # under 1e-4: no digit a user reads


def test_an_ill_conditioned_element_is_judged_by_how_hard_it_is():
    exact = np.array([2.3e-3, 1.0])  # a cancelling sum: float32 is 3e-5 off by itself
    eager = np.array([2.3e-3 * (1 + 3e-5), 1.0], np.float32)
    other_order = np.array([2.3e-3 * (1 - 4e-5), 1.0], np.float32)  # 1.7e-4 from eager
    assert _against(other_order, eager, exact).ok
    # the perturbed runs' spread alone makes an element hard (eager exact there by luck)
    lucky = exact.astype(np.float32)
    spread = np.array([2.3e-3 * 3e-5, 0.0])
    assert _against(other_order, lucky, exact, spread).ok
    wrong = np.array([2.3e-3 * (1 + 1e-2), 1.0], np.float32)  # 300x eager's own error
    assert _against(wrong, eager, exact).kind == "values"


def test_exact_zeros_and_non_finite_values_under_the_float64_judge():
    exact = np.array([0.0, 1.0, np.inf])
    eager = np.array([0.0, 1.0, np.inf], np.float32)
    assert _against(eager, eager, exact).ok  # eager's inf is left out, as before
    assert _against([1e-3, 1.0, 0.0], eager, exact).kind == "values"  # not zero at all
    assert _against([np.nan, 1.0, 0.0], eager, exact).kind == "nan"
    assert _against([1e-39, 1.0, 0.0], eager, exact).ok  # below float32's normal range


class _Branches(torch.nn.Module):
    def forward(self, x):
        index = (x * 3).long().clamp(0, 7)  # a float turned into an index
        return torch.arange(8.0)[index] + x / 3


def test_the_float64_run_follows_eager_float32s_discrete_decisions():
    from coreml_lint.verifier.reference import float64_reference

    # 3 * 2.3333333 is 7.0 in float32, 6.99999976 in float64: float64 alone reads row 6
    x = torch.tensor([2.3333332538604736, 0.5, 1.0])
    ep = torch.export.export(_Branches(), (x,)).run_decompositions({})
    run = run_partition(ep, [x])
    reference = float64_reference(ep, [x], run.values)
    assert reference.failure is None
    (out,) = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    exact, spread = reference.of(out.name)
    assert exact.dtype == torch.float64 and spread.shape == exact.shape
    assert float(exact[0]) == pytest.approx(7 + 2.3333332538604736 / 3, abs=1e-12)
    assert torch.allclose(exact, run.outputs[0].double(), rtol=1e-6)  # the same branch
    assert 0 < float(spread.max()) < 1e-5


class _Quantized(torch.nn.Module):
    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_tensor(x, 0.05, 3, 0, 255, torch.uint8)
        y = torch.ops.quantized_decomposed.dequantize_per_tensor(q, 0.05, 3, 0, 255, torch.uint8)
        return y * 2


def test_an_op_without_a_float64_kernel_computes_in_float32_in_the_reference():
    import torch.ao.quantization.fx._decomposed  # registers quantized_decomposed

    from coreml_lint.verifier.reference import float64_reference

    x = torch.rand(2, 4) * 5
    ep = torch.export.export(_Quantized(), (x,))
    run = run_partition(ep, [x])
    reference = float64_reference(ep, [x], run.values)
    assert reference.failure is None
    (out,) = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    exact, _ = reference.of(out.name)
    assert exact.dtype == torch.float64 and torch.equal(exact.float(), run.outputs[0])


def test_a_rounding_inside_a_decomposable_op_widens_the_spread():
    from coreml_lint.verifier.reference import UNIT_ROUNDOFF, float64_reference

    # group_norm's shift cancels its scaled input at the first element: y = 1 * 1 - 1 ~ 0.
    # Core ML computes the scale and the shift apart, so float32 rounds there at the size
    # of the terms (1), not of the result; the reference must allow for that rounding.
    norm = torch.nn.GroupNorm(1, 2).eval()
    with torch.no_grad():
        norm.bias.fill_(-1.0)
    x = torch.tensor([[[1.0 + 1e-6], [-1.0]]])  # normalized: ~[1, -1]
    ep = torch.export.export(norm, (x,)).run_decompositions({})
    run = run_partition(ep, [x])
    reference = float64_reference(ep, [x], run.values)
    assert reference.failure is None
    (out,) = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    exact, spread = reference.of(out.name)
    assert abs(float(exact.flatten()[0])) < 1e-5  # the cancelling element
    # a rounding of the terms, not of the near-zero result (that would be ~1e-5 * 6e-8)
    assert float(spread.flatten()[0]) > 0.25 * UNIT_ROUNDOFF


def test_each_op_of_an_edge_program_is_rounded_once_and_a_view_not_at_all():
    """verify judges a partition's edge module, whose targets are edge ops wrapping ATen
    ops: each rounds once (the input, the relu and the pad, which makes a new tensor: at
    most 3 roundings), a slice (an edge ``slice_copy`` of a view) not at all, and the pad,
    which writes its input into a view of its output, keeps its values (a perturbed copy of
    that view would leave the output unwritten)."""
    exir = pytest.importorskip("executorch.exir")
    from coreml_lint.verifier.reference import UNIT_ROUNDOFF, float64_reference

    class Padded(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.pad(torch.relu(x)[:, 1:], (2, 0))

    x = torch.rand(4, 64) + 0.5
    ep = exir.to_edge(torch.export.export(Padded(), (x,))).exported_program()
    run = run_partition(ep, [x])
    reference = float64_reference(ep, [x], run.values)
    assert reference.failure is None
    (out,) = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    exact, spread = reference.of(out.name)
    assert torch.equal(exact[:, :2], torch.zeros(4, 2, dtype=torch.float64))
    assert torch.allclose(exact[:, 2:], run.outputs[0][:, 2:].double(), rtol=1e-6)
    assert float((spread[:, 2:] / exact[:, 2:]).max()) <= 3 * UNIT_ROUNDOFF * (1 + 1e-6)
