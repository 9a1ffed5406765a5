"""The parts of verify that need no lowering: how values are judged, how inputs are made,
what the report says and which exit code it means, and that importing the package is light.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from coreml_lint.verifier.compare import (  # noqa: E402
    FLOAT16,
    FLOAT16_TOL,
    SEMANTIC,
    SEMANTIC_HALF,
    compare,
)
from coreml_lint.verifier.inputs import index_bound, load_inputs, random_inputs  # noqa: E402
from coreml_lint.verifier.report import (  # noqa: E402
    Divergence,
    PartitionResult,
    PassResult,
    VerifyReport,
)


# ------------------------------------------------------------------ judging
def test_semantic_is_tight_and_scale_aware():
    eager = torch.tensor([2.0, 1.0, 1e-6, -3.0])
    assert compare(eager.numpy() * (1 + 2e-6), eager, SEMANTIC).ok
    # an error of 5e-4 on a unit value is wrong semantics (tanh vs exact GELU is 4.7e-4)
    assert compare(eager.numpy() + np.array([0, 5e-4, 0, 0], np.float32), eager, SEMANTIC).kind
    # a value that cancelled to ~0 is judged against the tensor's scale, not its own size
    assert compare(eager.numpy() + np.array([0, 0, 5e-6, 0], np.float32), eager, SEMANTIC).ok


def test_float16_forgives_rounding_not_nan_inf_or_integers():
    eager = torch.randn(4, 8)
    rounded = eager.half().float().numpy()
    assert compare(rounded, eager, FLOAT16).ok
    assert not compare(rounded, eager, SEMANTIC).ok
    broken = rounded.copy()
    broken[0, 0] = np.nan
    numbers = compare(broken, eager, FLOAT16)
    assert numbers.kind == "nan" and numbers.nan == 1 and numbers.index == (0, 0)
    broken[0, 0] = -np.inf
    assert compare(broken, eager, FLOAT16).kind == "inf"
    off = rounded + FLOAT16_TOL * 2 * np.abs(eager.numpy()).max()
    assert compare(off, eager, FLOAT16).kind == "values"
    ints = torch.tensor([3001, 7, -2])
    numbers = compare(np.array([3000, 7, -2], np.int32), ints, FLOAT16)
    assert numbers.kind == "integer" and numbers.expected == 3001 and numbers.actual == 3000


def test_eager_nan_positions_and_half_models():
    eager = torch.tensor([float("nan"), 1.0, float("-inf")])
    assert compare(np.array([0.0, 1.0, -30000.0], np.float32), eager, SEMANTIC).ok
    half = torch.tensor([1.0, 2.0, 3.0])
    assert compare(half.numpy() * (1 + 1e-3), half, SEMANTIC_HALF).ok
    assert not compare(half.numpy() * (1 + 1e-2), half, SEMANTIC_HALF).ok


def test_shape_mismatch_is_a_divergence():
    assert compare(np.zeros(3), torch.zeros(4), SEMANTIC).kind == "shape"
    assert compare(np.zeros((1, 4)), torch.zeros(4), SEMANTIC).ok  # same values, reshaped


# ------------------------------------------------------------------ inputs
class _Indexer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(50, 4)
        self.register_buffer("rows", torch.randn(7, 4))

    def forward(self, ids, picks, scale, flags):
        picked = torch.index_select(self.rows, 0, picks.view(-1))
        return self.table(ids).sum() + picked.sum() * scale + flags.float().sum()


def test_random_inputs_respect_index_consumers():
    ids, picks = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 1]])
    ep = torch.export.export(_Indexer(), (ids, picks, torch.randn(3, 2), torch.ones(2).bool()))
    first = random_inputs(ep, seed=0, use_examples=False)
    made_ids, made_picks, scale, flags = first
    assert made_ids.dtype == torch.int64 and made_ids.shape == (1, 3)
    assert made_ids.min() == 0 and made_ids.max() == 49  # padding row and last row included
    assert made_picks.min() >= 0 and made_picks.max() == 6  # through a view, into index_select
    assert scale.dtype == torch.float32 and {1e-3, -1e-3} <= {
        round(v, 6) for v in scale.view(-1).tolist()
    }
    assert flags.dtype == torch.bool
    again = random_inputs(ep, seed=0, use_examples=False)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))  # seeded
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    assert index_bound(placeholders[-4]) == 50
    own = random_inputs(ep, seed=0)  # by default an integer input is the program's example
    assert torch.equal(own[0], ids) and torch.equal(own[1], picks)


def test_load_inputs_reads_tuples_without_unpickling_code(tmp_path):
    path = tmp_path / "inputs.pt"
    torch.save((torch.ones(2), torch.zeros(3, dtype=torch.int64)), path)
    loaded = load_inputs(path)
    assert len(loaded) == 2 and loaded[1].dtype == torch.int64
    torch.save({"x": torch.ones(1)}, path)
    with pytest.raises(ValueError, match="tuple of tensors"):
        load_inputs(path)


# ------------------------------------------------------------------ report
def _partition(semantic: str = "agree", float16: str = "agree") -> PartitionResult:
    result = PartitionResult(index=0, name="lowered_module_0")
    result.interface = PassResult(status="agree")
    result.semantic = PassResult(status=semantic)
    result.float16 = PassResult(status=float16)
    return result


@pytest.mark.parametrize(
    "parts, lowering_error, not_verified, status, code",
    [
        ([_partition()], None, [], "agree", 0),
        ([_partition(float16="diverge")], None, [], "diverge", 1),
        ([], "ValueError: boom", [], "lowering_crash", 1),
        ([_partition(semantic="not_verified")], None, ["op lstm"], "could_not_run", 2),
        ([_partition(semantic="error")], None, [], "could_not_run", 2),
    ],
)
def test_exit_codes(parts, lowering_error, not_verified, status, code):
    report = VerifyReport(
        partitions=parts, lowering_error=lowering_error, not_verified=not_verified
    ).finish()
    assert (report.status, report.exit_code) == (status, code)


def test_report_json_and_summary():
    report = VerifyReport(partitions=[_partition(float16="diverge")])
    report.divergences.append(
        Divergence(
            partition=0,
            check="float16",
            kind="nan",
            output="output 0 (out)",
            message="3 NaN",
            node="aten_add_tensor",
            source="model.py:12",
            rule="CML999",
        )
    )
    report.timings["lower"] = 1.5
    data = json.loads(json.dumps(report.finish().to_json()))
    assert data["status"] == "diverge" and data["exit_code"] == 1
    assert data["partitions"][0]["status"] == "diverge"
    assert data["divergences"][0]["rule"] == "CML999"
    assert "model.py:12" in report.summary() and "CML999" in report.summary()


def test_importing_the_package_is_light():
    code = (
        "import sys, coreml_lint.verifier, coreml_lint.verifier.report, coreml_lint.verifier.mil;"
        "print(any(m in sys.modules for m in ('torch', 'coremltools', 'executorch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ explaining


def _finding(code: str, line: int, severity: str, outcome: str, shows_at: int | None = None):
    from coreml_lint.core.findings import Finding, Location, Outcome, Severity

    return Finding(
        code=code,
        name=code.lower(),
        severity=Severity(severity),
        outcome=Outcome(outcome),
        message="",
        file="m.pt2",
        location=Location("model.py", line),
        shows_at=Location("model.py", shows_at) if shows_at else None,
    )


def _explained(findings, source: str) -> str | None:
    from coreml_lint.cli.verify import explain_by_line

    div = Divergence(0, "float16", "nan", "output 0", "", source=source)
    explain_by_line(VerifyReport(divergences=[div]), findings)
    return div.rule


def test_a_divergence_is_explained_where_a_finding_is_or_where_its_wrong_value_shows():
    mask = _finding("CML310", 3, "warning", "silent", shows_at=4)  # attended on line 4
    assert _explained([mask], "model.py:3") == "CML310"
    assert _explained([mask], "model.py:4") == "CML310"
    assert _explained([mask], "other.py:4") is None


def test_a_finding_merely_upstream_explains_nothing():
    """verify names the first op that departs: what comes before it agrees with eager, so
    a warning three lines up (an -inf mask) is not why an exp on line 9 overflows."""
    mask = _finding("CML310", 3, "warning", "silent", shows_at=4)
    assert _explained([mask], "model.py:9") is None


def test_an_error_at_a_line_comes_before_a_warning_there():
    both = [_finding("CML999", 3, "error", "silent"), _finding("CML310", 3, "warning", "silent")]
    assert _explained(both, "model.py:3") == "CML999"
    assert _explained(both[::-1], "model.py:3") == "CML999"


def test_what_explains_no_value_the_program_computed():
    """A crash prediction (the program ran) and a warning of anything but a silent wrong
    value (a CPU fallback) or a note explain no divergence; each finding a merged one
    stands for is judged on its own."""
    for severity, outcome in [("error", "crash"), ("warning", "cpu-fallback"), ("info", "silent")]:
        finding = _finding("CML999", 3, severity, outcome)
        assert _explained([finding], "model.py:3") is None, (severity, outcome)
    head = _finding("CML801", 3, "warning", "crash")
    head.merged = [_finding("CML801", 3, "warning", "silent")]
    assert _explained([head], "model.py:3") == "CML801"
    head = _finding("CML801", 3, "warning", "silent")
    head.merged = [_finding("CML801", 5, "warning", "cpu-fallback")]
    assert _explained([head], "model.py:5") is None
