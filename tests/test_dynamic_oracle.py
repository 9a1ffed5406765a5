"""Dynamic-shape programs: the stock lowering really does what the rules say, and
``coreml-lint lower`` turns each failing one into a ``.pte``.

The cases are declared beside their rules with ``@dynamic_case`` (exported with
``torch.export.Dim``s, saved and loaded back as a user's ``.pt2`` would be).
"""

from __future__ import annotations

import io
import re
from functools import cache

import pytest

torch = pytest.importorskip("torch")

from coreml_lint.rulekit.examples import dynamic_cases  # noqa: E402
from coreml_lint.rules import all_rules  # noqa: E402

all_rules()  # imports every rule module, which registers its cases
CASES = {c.id: c for c in dynamic_cases()}
pytestmark = pytest.mark.oracle


@cache
def _archive(case_id: str) -> bytes:
    model, inputs, dynamic_shapes = CASES[case_id].make()
    buffer = io.BytesIO()
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    torch.export.save(ep, buffer)
    return buffer.getvalue()


def loaded(case_id: str):
    return torch.export.load(io.BytesIO(_archive(case_id)))


def _errors(case_id: str) -> set[str]:
    from coreml_lint.engine.program import lint_graph
    from coreml_lint.program.pt2 import read_pt2_stream

    (graph,) = read_pt2_stream(io.BytesIO(_archive(case_id)), case_id)
    report = lint_graph(graph)
    return {f.code for f in report.findings if f.severity.value == "error"}


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_stock_lowering_behaves_as_predicted(case_id):
    from oracle import lower

    case = CASES[case_id]
    assert _errors(case_id) == set(case.expect)
    lowered = lower(loaded(case_id), **case.settings)
    if case.crash:
        assert not lowered.ok, "predicted a crash, but the stock partitioner lowered it"
        assert re.search(case.crash, lowered.message, re.S), lowered.message
    else:
        assert lowered.ok, f"{lowered.stage}: {lowered.message}"


def _answered(case_id: str) -> bool:
    from coreml_lint.rules import rule_by_code

    return all(rule_by_code(code).lowers() for code in CASES[case_id].expect)  # type: ignore[union-attr]


@pytest.mark.parametrize("case_id", sorted(c for c in CASES if CASES[c].crash and _answered(c)))
def test_lower_writes_a_pte(case_id):
    import coreml_lint

    case = CASES[case_id]
    ios = case.settings.get("ios")
    if case.lowered_fails:
        from coreml_lint.lowering.run import LoweringError

        with pytest.raises(LoweringError) as raised:
            coreml_lint.lower(loaded(case_id), minimum_deployment_target=ios)
        assert re.search(case.lowered_fails, str(raised.value)) and "\n" not in str(raised.value)
        return
    result = coreml_lint.lower(loaded(case_id), minimum_deployment_target=ios, verify=True)
    assert result.buffer[4:8] == b"ET12"
    assert result.report.placement.delegates >= 1, "nothing was left on Core ML"
    assert result.report.verify.status == "agree", result.report.verify.summary()


@pytest.mark.parametrize("case_id", sorted(c for c in CASES if not _answered(c)))
def test_lower_stops_before_lowering_with_the_reason(case_id):
    import coreml_lint
    from coreml_lint.lowering.run import LoweringError

    with pytest.raises(LoweringError) as raised:
        coreml_lint.lower(loaded(case_id))
    assert any(code in str(raised.value) for code in CASES[case_id].expect)


def test_verify_runs_a_dynamic_program_at_the_edges_of_its_sizes(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "resize.pt2"
    path.write_bytes(_archive("resize-by-two-dynamic"))
    cli = str(Path(sys.executable).with_name("coreml-lint"))
    run = subprocess.run([cli, "verify", str(path), "-q"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert "at the smallest sizes (1x3x16x16): verify: agree" in run.stdout
    assert "largest sizes not run" in run.stdout  # 8x3x512x512: over the element budget


def _unet_skip():
    """A U-Net step resized to its skip's size, with derived dims (H = 32 * _h): the ratio
    is exactly 2, yet the size is read off another tensor, not computed as size * 2."""
    import torch.nn.functional as F

    class Up(torch.nn.Module):
        def forward(self, x):
            y = F.max_pool2d(x, 2, 2) * 2
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear") + x

    _h = torch.export.Dim("_h", min=1, max=16)
    shapes = ({2: 32 * _h, 3: 32 * _h},)
    return torch.export.export(Up(), (torch.randn(1, 3, 64, 64),), dynamic_shapes=shapes)


def test_resize_to_a_skip_size_crashes_even_at_a_fixed_ratio_and_lower_answers_it():
    import coreml_lint
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.stack import lower_program, stock_partitioner

    codes = {f.code for f in coreml_lint.lint_program(_unet_skip()).findings}
    assert codes == {"CML607"}
    lowering = lower_program(_unet_skip(), stock_partitioner(PartitionerSettings()))
    assert "Unable to map torch_upsample_bilinear" in str(lowering.error)
    result = coreml_lint.lower(_unet_skip(), verify=True)
    assert result.report.verify.status == "agree", result.report.verify.summary()
    assert any("upsample" in op for op in result.report.placement.cpu_ops)
