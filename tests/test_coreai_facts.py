"""Every measured fact of Core AI that the tool relies on, against the real converter
(coreai-torch 0.4.3) and runtime (coreai-core 1.0.0b3) on Linux: what Core ML gets wrong and
Core AI gets right, and Core AI's own pitfalls. Each test runs the model on Core AI and in
eager and asserts what really happens (no number here is copied from a run)."""

from __future__ import annotations

import pytest

pytest.importorskip("coreai_torch", reason="needs coreai-torch (pip install coreml-lint[coreai])")
pytest.importorskip("coreai.runtime", reason="needs coreai-core (pip install coreml-lint[coreai])")

import numpy as np
import torch
import torch.nn.functional as F
from coreai_cases import KVCache, Lambda, avg_pool, run_both

from coreml_lint.coreai_stack import CONVERT_STAGE, RUN_STAGE

pytestmark = pytest.mark.oracle
EXACT = 0.0
FLOAT32 = 1e-5  # relative to the output's scale: float32 rounding, nothing more


def _agrees(compared, tol=FLOAT32):
    assert compared.run.ok, compared.run.message
    assert compared.max_error() <= tol, compared.max_error()


# -- Core ML pitfalls that Core AI does not have ---------------------------------------------


def test_tanh_gelu_is_computed_as_tanh_gelu():
    x = torch.randn(4, 8) * 3
    compared = run_both(Lambda(lambda x: F.gelu(x, approximate="tanh")), (x,))
    _agrees(compared)
    exact_gelu = F.gelu(x).numpy()  # what Core ML computes instead: Core AI is not that
    assert np.abs(compared.run.outputs[0] - exact_gelu).max() > 1e-4


def test_integer_full_is_exact_int32():
    x = torch.randint(0, 5, (2, 8), dtype=torch.int32)
    compared = run_both(Lambda(lambda x: x + torch.full((2, 8), 3000001)), (x,))
    _agrees(compared, EXACT)
    assert compared.run.output_dtypes == ["int32"]


def test_rms_norm_without_eps_converts_and_agrees():
    _agrees(run_both(torch.nn.RMSNorm(8), (torch.randn(2, 8),)))


def test_uint8_input_is_accepted():
    x = torch.randint(0, 255, (2, 8), dtype=torch.uint8)
    _agrees(run_both(Lambda(lambda x: x.float() * 2), (x,)), EXACT)


def test_zeros_like_bool_with_float_dtype_is_float():
    model = Lambda(lambda x: torch.zeros_like(x > 0, dtype=torch.float) + x)
    _agrees(run_both(model, (torch.randn(2, 8),)), EXACT)


def test_finfo_min_mask_gives_no_nan():
    mask = torch.tensor([[True] * 4 + [False] * 4, [False] * 8])  # row 1: fully masked
    model = Lambda(
        lambda s, m: torch.softmax(s.masked_fill(~m, torch.finfo(torch.float32).min), -1)
    )
    compared = run_both(model, (torch.randn(2, 8), mask))
    _agrees(compared)
    assert not np.isnan(compared.run.outputs[0]).any()


def test_max_pool_without_stride_converts_and_agrees():
    _agrees(run_both(Lambda(lambda x: F.max_pool2d(x, 2)), (torch.randn(1, 3, 8, 8),)), EXACT)


def test_returned_clone_is_its_own_output():
    compared = run_both(Lambda(lambda x: (x, x.clone() * 1)), (torch.randn(2, 8),))
    _agrees(compared, EXACT)
    compared = run_both(Lambda(lambda x: (x, x.clone())), (torch.randn(2, 8),))
    _agrees(compared, EXACT)
    assert len(compared.run.outputs) == 2


def test_kv_cache_state_is_exact_over_two_steps():
    first = (torch.randn(1, 1, 8), torch.tensor([0]))
    second = (torch.randn(1, 1, 8), torch.tensor([3]))
    compared = run_both(KVCache(), first, second)
    assert compared.run.ok, compared.run.message
    assert compared.max_error(0) <= FLOAT32 and compared.max_error(1) <= FLOAT32  # a softmax
    eager = KVCache()
    eager(*first)
    eager(*second)
    (state,) = compared.run.states.values()
    assert list(compared.run.states) == ["keys"]
    np.testing.assert_array_equal(state, eager.keys.numpy())  # both writes kept


def test_float16_model_runs_in_float16():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU("tanh")).half()
    compared = run_both(model, (torch.randn(2, 8).half(),))
    assert compared.run.ok, compared.run.message
    assert compared.run.output_dtypes == ["float16"]
    assert compared.max_error() < 4e-3  # a few float16 ulps


# -- Core AI's own pitfalls ------------------------------------------------------------------


@pytest.mark.parametrize(
    "reduce, op",
    [
        (lambda b: b.amax(-1), "reduce_max"),
        (lambda b: b.amin(-1), "reduce_min"),
        (lambda b: b.max(-1).values, "reduce_max"),
    ],
    ids=["amax", "amin", "max-dim"],
)
def test_bool_min_max_reduction_fails_conversion(reduce, op):
    compared = run_both(Lambda(lambda x: reduce(x > 0)), (torch.randn(4, 8),))
    assert compared.run.stage == CONVERT_STAGE
    assert f"'coreai.{op}' op operand #0 must be" in compared.run.message
    assert "tensor<4x8xi1>" in compared.run.message


class _BoolAmax(torch.nn.Module):
    def forward(self, x):
        return (x > 0).amax(-1)


def test_bool_min_max_failure_names_the_source_line():
    import inspect

    compared = run_both(_BoolAmax(), (torch.randn(4, 8),))
    line = inspect.getsourcelines(_BoolAmax.forward)[1] + 1
    assert f'loc("{__file__}":{line}:' in compared.run.message


def test_bool_any_all_convert_and_agree():
    x = torch.randn(4, 8)
    _agrees(run_both(Lambda(lambda x: ((x > 0).any(-1), (x > -1).all(-1))), (x,)), EXACT)


def test_int64_scalar_past_int32_fails_conversion():
    compared = run_both(Lambda(lambda x: x + 2**40), (torch.randint(0, 5, (2, 8)),))
    assert compared.run.stage == CONVERT_STAGE
    assert compared.run.message.startswith("OverflowError: ")
    assert "out of bounds for int32" in compared.run.message


def test_int64_tensor_constant_past_int32_is_silently_wrapped():
    compared = run_both(
        Lambda(lambda x: x + torch.tensor([2**33 + 5])), (torch.randint(0, 5, (2, 8)),)
    )
    assert compared.run.ok, compared.run.message
    assert compared.max_error() > 0.5  # int32 wraps 2**33 + 5 to 5


def test_int64_within_int32_is_narrowed_and_exact():
    compared = run_both(Lambda(lambda x: x * 3 + 2**30), (torch.randint(0, 5, (2, 8)),))
    _agrees(compared, EXACT)
    assert compared.eager[0][0].dtype == np.int64
    assert compared.run.output_dtypes == ["int32"]


def test_int64_input_fed_as_int64_fails_at_run_time():
    compared = run_both(Lambda(lambda x: x * 3), (torch.randint(0, 5, (2, 8)),), narrow_int64=False)
    assert compared.run.stage == RUN_STAGE
    assert "invalid scalar type: int64, expected: int32" in compared.run.message


@pytest.mark.parametrize("size", [8, 7])  # 7: ceil_mode gives the same output size
def test_avg_pool_excluding_padding_computes_wrong_border_windows(size):
    x = torch.randn(1, 3, size, size)
    compared = run_both(avg_pool(count_include_pad=False, ceil_mode=size == 7), (x,))
    assert compared.run.ok, compared.run.message
    error = np.abs(compared.run.outputs[0] - compared.eager[0][0])
    assert compared.max_error() > 0.1
    assert error[..., 1:-1, 1:-1].max() < 1e-5  # interior windows agree: only the border


def test_avg_pool_including_padding_agrees():
    _agrees(run_both(avg_pool(), (torch.randn(1, 3, 8, 8),)))


def test_avg_pool_excluding_padding_without_padding_agrees():
    model = Lambda(lambda x: F.avg_pool2d(x, 3, 2, 0, count_include_pad=False))
    _agrees(run_both(model, (torch.randn(1, 3, 9, 9),)))


def test_avg_pool_ceil_mode_fails_conversion_with_index_error():
    compared = run_both(avg_pool(ceil_mode=True), (torch.randn(1, 3, 7, 7),))
    assert compared.run.stage == CONVERT_STAGE
    assert compared.run.message.startswith("IndexError: ")


# -- the Linux runtime's limits and Core AI's debugging tools --------------------------------


class _Log(torch.nn.Module):
    def forward(self, x):
        return torch.log(x) * 2


def _converted(model, inputs):
    import coreai_torch

    ep = torch.export.export(model, inputs).run_decompositions(coreai_torch.get_decomp_table())
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    return ep, coreai_torch.TorchConverter().add_exported_program(ep, input_names=names)


def test_only_the_asset_executable_runs_on_linux(tmp_path):
    import asyncio

    from coreai.runtime import AIModel

    _, converter = _converted(_Log(), (torch.ones(1, 3),))
    path = tmp_path / "m.aimodel"
    asset = converter.to_coreai().save_asset(path)
    with pytest.raises(RuntimeError, match="No such file or directory"):
        asyncio.run(AIModel.load(path))

    async def specialized():
        async with asset.executable(specialization_options=object()):
            pass

    with pytest.raises(RuntimeError, match="only available on macOS"):
        asyncio.run(specialized())


def test_nan_check_and_source_annotation_work_on_linux():
    import asyncio
    import io

    from coreai_torch.debugging.source_annotator import annotate_source_with_operations
    from coreai_torch.debugging.validator import create_validator_for_exported_program

    x = torch.tensor([[1.0, -1.0, 2.0]])  # log(-1) is NaN
    ep, converter = _converted(_Log(), (x,))
    result = asyncio.run(create_validator_for_exported_program(ep).check_for_nans((x,)))
    assert [n.name for n in result.failed_nodes] == ["log", "mul"]
    annotated = io.StringIO()
    annotate_source_with_operations(converter.to_coreai(), annotated)
    assert f"# === {__file__} [_Log$1] ===" in annotated.getvalue()


def test_program_validator_and_intermediates_need_macos():
    import asyncio

    from coreai_torch.debugging.intermediates import compare_program_intermediates
    from coreai_torch.debugging.validator import create_validator_for_coreai_program

    x = torch.tensor([[1.0, 2.0]])
    ep, converter = _converted(_Log(), (x,))
    program = converter.to_coreai()

    async def validate():
        validator = await create_validator_for_coreai_program(program, "main")
        return await validator.check_for_nans({"x": x.numpy()})

    with pytest.raises(RuntimeError, match="only available on macOS"):
        asyncio.run(validate())
    with pytest.raises(RuntimeError, match="only available on macOS"):
        asyncio.run(compare_program_intermediates(ep, program, {"x": x}))


def test_core_ai_installs_beside_the_released_core_ml_stack():
    from importlib.metadata import version

    pytest.importorskip("executorch")
    pytest.importorskip("coremltools")
    assert torch.__version__.split("+")[0] == "2.13.0"
    assert (version("executorch"), version("coremltools")) == ("1.5.1", "9.0")
    assert (version("coreai-torch"), version("coreai-core")) == ("0.4.3", "1.0.0b3")
