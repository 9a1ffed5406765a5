"""``coreml-lint lower`` on quantized programs (CML107's cases): below a scheme's target it
stops before lowering and names the target; ``dequantize_on_cpu`` dequantizes on the CPU where
ExecuTorch has a kernel for it, and says it did. At or above the target ``lower`` is the stock
lowering (``tests/test_lower.py`` checks the MIL keeps ``constexpr_`` ops there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _archive, exported, settings_of

pytestmark = pytest.mark.oracle


@pytest.mark.parametrize(
    "case_id, cpu_ops",
    [
        (
            "pt2e-int8-weight-per-tensor-ios16",
            {"quantized_decomposed.dequantize_per_tensor.default"},
        ),
        (
            "pt2e-uint8-activation-ios16",
            {
                "quantized_decomposed.quantize_per_tensor.default",
                "quantized_decomposed.dequantize_per_tensor.default",
            },
        ),
        (
            "int8-transposed-dequantize-ios16",
            {"aten.permute_copy.default", "quantized_decomposed.dequantize_per_channel.default"},
        ),
        (
            "int8-transposed-cast-ios16",
            {"aten.permute_copy.default", "dim_order_ops._to_dim_order_copy.default"},
        ),
        (
            "torchao-int8-weight-only-ios15",
            {"aten.permute_copy.default", "dim_order_ops._to_dim_order_copy.default"},
        ),
    ],
)
def test_dequantize_on_cpu_keeps_the_dequantize_on_the_cpu(case_id, cpu_ops):
    from coreml_lint.lowering.run import lower

    result = lower(exported(case_id), settings=settings_of(case_id), dequantize_on_cpu=True)
    report = result.report
    assert result.buffer[4:8] == b"ET12"
    assert set(report.cpu_ops_after) == cpu_ops
    assert report.refused and all("--dequantize-on-cpu" in r for r in report.refused.values())
    assert not report.findings_after


def test_below_the_target_lower_stops_before_converting_anything():
    from oracle import _capture

    from coreml_lint.lowering.run import LoweringError, lower

    case_id = "torchao-int8-per-channel-ios15"
    converted: list = []
    with _capture(converted), pytest.raises(LoweringError) as raised:
        lower(exported(case_id), settings=settings_of(case_id))
    assert not converted
    message = str(raised.value)
    assert message.startswith("not lowered, CML107: torchao int8 per-channel weights")
    assert message.endswith("need iOS16: lower with --ios 16")


def test_without_a_cpu_kernel_dequantize_on_cpu_says_so_in_one_line():
    from coreml_lint.lowering.run import LoweringError, lower

    case_id = "torchao-int8-per-channel-ios15"
    with pytest.raises(LoweringError, match=r"no CPU kernel for torchao\.dequantize_affine") as e:
        lower(exported(case_id), settings=settings_of(case_id), dequantize_on_cpu=True)
    assert "\n" not in str(e.value) and "--ios 16" in str(e.value)


def test_cli_dequantize_on_cpu(tmp_path):
    program = tmp_path / "q.pt2"
    program.write_bytes(_archive("pt2e-int8-weight-per-tensor-ios16"))
    out = tmp_path / "q.pte"
    exe = Path(sys.executable).with_name("coreml-lint")
    args = [str(exe), "lower", str(program), "-o", str(out), "--ios", "16", "--quiet"]
    result = subprocess.run(
        [*args, "--dequantize-on-cpu"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.read_bytes()[4:8] == b"ET12"
    assert "runs on the CPU with ExecuTorch's quantized kernels" in result.stdout
