"""Where verify says a divergence starts: at the first op whose inputs agree with eager and
whose output does not. Judged on a real MIL program run by the interpreter, with one kernel
made wrong on purpose, without lowering anything (the fast tier)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("coremltools")

from coreml_lint.verifier.compare import FLOAT16, SEMANTIC, compare  # noqa: E402
from coreml_lint.verifier.localize import first_departure, input_scale  # noqa: E402
from coreml_lint.verifier.mil.program import Plan  # noqa: E402

X = np.array([[-900.0, -0.5, 0.25, 0.75, 3.0, 900.0]], dtype=np.float32)


def _clamp_then_add():
    """``clamp(x, 0, 1) + 0.5`` as coremltools names it (vars after their edge nodes): the
    clamp's inputs reach 900, its output stays within [0, 1]."""
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=X.shape)])
    def program(x):
        clamped = mb.clip(x=x, alpha=0.0, beta=1.0, name="aten_clamp_default")
        return mb.add(x=clamped, y=np.float32(0.5), name="aten_add_tensor")

    return Plan.of(program)


def _eager() -> dict[str, torch.Tensor]:
    x = torch.from_numpy(X)
    clamped = torch.clamp(x, 0.0, 1.0)
    return {"x": x, "aten_clamp_default": clamped, "aten_add_tensor": clamped + 0.5}


def _clip_to_two(op, args):
    """A wrong clip: the upper bound taken as 2 (3.0 comes out 2.0, not 1.0)."""
    return np.clip(args["x"], args["alpha"], 2.0)


def test_a_wrong_value_is_blamed_where_it_is_made_not_where_it_shows():
    plan = _clamp_then_add()
    clip = next(step for step in plan.steps if step.op.op_type == "clip")
    clip.kernel = _clip_to_two
    values = plan.run({"x": X})
    eager = _eager()
    add = next(step for step in plan.steps if step.op.op_type == "add")
    # the add's output diverges at its own scale; the clamp's error (1.0) hides under the
    # scale of its inputs (900), so judged alone at its own op it passes
    output = compare(values["aten_add_tensor"], eager["aten_add_tensor"], FLOAT16, 1.0)
    assert not output.ok
    at_clamp = input_scale(clip, values)
    assert compare(values["aten_clamp_default"], eager["aten_clamp_default"], FLOAT16, at_clamp).ok
    assert input_scale(add, values) < at_clamp
    culprit = first_departure(plan, values, eager, "aten_add_tensor", FLOAT16)
    assert culprit is not None
    op, var, node, numbers = culprit
    assert (op.op_type, var, node) == ("clip", "aten_clamp_default", "aten_clamp_default")
    assert not numbers.ok


def test_an_op_whose_inputs_agree_is_still_blamed():
    """The same program with a correct clip and a wrong add: the add made the error."""
    plan = _clamp_then_add()
    add = next(step for step in plan.steps if step.op.op_type == "add")
    add.kernel = lambda op, args: args["x"] + args["y"] + 0.25
    values = plan.run({"x": X})
    culprit = first_departure(plan, values, _eager(), "aten_add_tensor", FLOAT16)
    assert culprit is not None
    assert (culprit[0].op_type, culprit[2]) == ("add", "aten_add_tensor")


# ---------------------------------------------------------- a requantize's near-tie

STEP = 0.05
Q = np.linspace(-1.0, 1.0, 128, dtype=np.float32).reshape(1, 128)


def _requantized():
    """``dequantize(quantize(x))`` at one step of 0.05, as a pt2e program's activations run
    in Core ML (iOS17 ops), and eager's value of each var."""
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=Q.shape)], opset_version=ct.target.iOS17)
    def program(x):
        q = mb.quantize(
            input=x,
            scale=np.float32(STEP),
            zero_point=np.int8(0),
            output_dtype="int8",
            name="quantize_per_tensor",
        )
        return mb.dequantize(
            input=q, scale=np.float32(STEP), zero_point=np.int8(0), name="dequantize_per_tensor"
        )

    plan = Plan.of(program)
    values = plan.run({"x": Q})
    return plan, values, values["dequantize_per_tensor"]


def _excused(plan, values, actual, expected) -> bool:
    from coreml_lint.verifier.localize import quantum_flip

    out = "dequantize_per_tensor"
    eager = {"x": torch.from_numpy(Q), out: torch.from_numpy(expected)}
    numbers = compare(actual, expected, SEMANTIC, 1.0)
    return quantum_flip(plan, values, eager, out, SEMANTIC, numbers, actual, expected)


def test_one_element_one_quantization_step_off_is_a_near_tie_not_a_divergence():
    """torch's requantize rounded one near-tie the other way: one step at one element."""
    plan, values, actual = _requantized()
    expected = actual.copy()
    expected[0, 40] += STEP
    assert not compare(actual, expected, SEMANTIC, 1.0).ok  # a divergence without the excuse
    assert _excused(plan, values, actual, expected)


def test_a_wrong_scale_or_a_bigger_error_is_still_a_divergence():
    plan, values, actual = _requantized()
    shifted = actual + STEP  # every element one step off: a wrong zero point
    assert not _excused(plan, values, actual, shifted)
    farther = actual.copy()
    farther[0, 40] += 2 * STEP  # one element two steps off
    assert not _excused(plan, values, actual, farther)
    scaled = actual * 1.5  # a wrong scale
    assert not _excused(plan, values, actual, scaled)


def test_a_step_off_that_no_dequantize_made_is_not_excused():
    """The same error at the output of a plain add: no requantize rounded anything."""
    from coreml_lint.verifier.localize import quantum_flip

    plan = _clamp_then_add()
    values = plan.run({"x": X})
    eager = _eager()
    expected = eager["aten_add_tensor"].numpy().copy()
    expected[0, 2] += STEP
    actual = values["aten_add_tensor"]
    eager["aten_add_tensor"] = torch.from_numpy(expected)
    numbers = compare(actual, expected, SEMANTIC, 1.0)
    assert not numbers.ok
    assert not quantum_flip(
        plan, values, eager, "aten_add_tensor", SEMANTIC, numbers, actual, expected
    )
