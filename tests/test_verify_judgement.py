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
