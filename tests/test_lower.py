"""``coreml-lint lower`` against the stock partitioner, on every case of the catalogue.

A model that crashes or mislowers with the stock partitioner must lower with ``lower`` to a
program whose Core ML MIL carries none of the wrong-value signatures; a model the stock
partitioner lowers correctly must keep the same placement.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cases import BY_ID, CASE_IDS
from conftest import _archive, exported, settings_of

pytestmark = pytest.mark.oracle


def _unanswerable(case_id):
    """The codes of a case's errors ``lower`` has no answer for (quantized weights below
    their scheme's target, a dtype the edge verifier rejects that no rewrite changes), as
    the rules themselves say: ``lower`` stops before
    lowering and names them. The oracle checks those errors are real."""
    from coreml_lint import lint_program
    from coreml_lint.core.config import LintConfig
    from coreml_lint.core.findings import Severity
    from coreml_lint.rules import rule_by_code

    report = lint_program(exported(case_id), LintConfig(partitioner=settings_of(case_id)))
    codes = {
        f.code
        for f in report.findings
        if f.severity is Severity.ERROR and rule_by_code(f.code)().unanswered(f)
    }
    return "|".join(sorted(codes))


# A known limit met while lowering: a library's custom op without an out variant cannot run
# on the CPU, and Core ML has no converter for it.
CANNOT_FIX = {"custom-op-on-cpu": "CML603"}


def _lower(case_id):
    from oracle import Lowered, _capture

    from coreml_lint.lowering.run import lower

    settings = BY_ID[case_id].settings
    delegates: list = []
    with _capture(delegates):
        result = lower(
            exported(case_id),
            minimum_deployment_target=settings.get("ios"),
            skip_ops_for_coreml_delegation=settings.get("skip"),
            take_over_mutable_buffer=settings.get("take_over_mutable_buffer", True),
            take_over_constant_data=settings.get("take_over_constant_data", True),
            lower_full_graph=settings.get("lower_full_graph", False),
        )
    return result, Lowered(delegates=delegates)


# A silent case whose finding is a warning only (its cost depends on the values, and the
# rule has no rewrite that keeps them) is not ``lower``'s to fix: verify shows it diverging.
FAILING = [c for c in CASE_IDS if BY_ID[c].crash or (BY_ID[c].silent and BY_ID[c].expect)]
CLEAN = [c for c in CASE_IDS if not BY_ID[c].expect]


@pytest.mark.parametrize("case_id", FAILING)
def test_lower_fixes_what_the_stock_partitioner_breaks(case_id):
    from coreml_lint.lowering.run import LoweringError

    if case_id in CANNOT_FIX:
        with pytest.raises(LoweringError, match=CANNOT_FIX[case_id]):
            _lower(case_id)
        return
    if _unanswerable(case_id):
        with pytest.raises(LoweringError, match=rf"^not lowered, ({_unanswerable(case_id)}): "):
            _lower(case_id)
        return
    result, lowered = _lower(case_id)
    assert result.buffer[4:8] == b"ET12", "not an ExecuTorch program"
    assert not result.report.mil_problems, result.report.mil_problems
    assert not result.report.findings_after, [f.message for f in result.report.findings_after]
    case = BY_ID[case_id]
    if case.silent:
        assert not case.silent(lowered), "the wrong-value signature is still in the MIL"


@pytest.mark.parametrize("case_id", CLEAN)
def test_lower_keeps_the_stock_placement_of_clean_models(case_id):
    from oracle import lower as stock_lower

    stock = stock_lower(exported(case_id), **BY_ID[case_id].settings)
    assert stock.ok
    result, lowered = _lower(case_id)
    report = result.report
    # only a warning whose rule's rewrite is exact is answered (1 / x of integers)
    exact = {f.code for f in report.findings_before if f.rewrite_as_warning}
    assert {r.partition(":")[0] for r in report.rewrites} <= exact and not report.refused
    assert report.partitions_after == stock.delegate_calls
    assert sorted(report.cpu_ops_after) == sorted(stock.edge_cpu_ops)
    if BY_ID[case_id].clean:
        assert BY_ID[case_id].clean(lowered)


def _cli(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("coreml-lint")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, check=False)


def test_cli_lower_writes_a_program(tmp_path):
    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    out = tmp_path / "gelu.pte"
    result = _cli("lower", str(program), "-o", str(out), "--quiet")
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.read_bytes()[4:8] == b"ET12"
    assert "tanh GELU written out as torch's decomposition" in result.stdout


def test_cli_lower_failure_is_one_line_and_writes_nothing(tmp_path):
    """Below a quantization scheme's target lower stops before lowering, in one line that
    names the scheme and the target to use."""
    program = tmp_path / "q.pt2"
    program.write_bytes(_archive("pt2e-int8-weight-per-tensor-ios16"))
    out = tmp_path / "q.pte"
    result = _cli("lower", str(program), "-o", str(out), "--quiet", "--ios", "16")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {program}: not lowered, CML107: PT2E int8 weights")
    assert "lower with --ios 17" in last
    assert "Traceback" not in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".q.pte*"))


def test_cli_lower_rejects_a_corrupt_archive(tmp_path):
    program = tmp_path / "bad.pt2"
    program.write_bytes(b"nope")
    result = _cli("lower", str(program), "-o", str(tmp_path / "x.pte"), "--quiet")
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"error: {program}: not a .pt2 archive (not a zip file)"
    )


def test_cli_lower_rejects_an_unwritable_output_before_lowering(tmp_path):
    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = _cli("lower", str(program), "-o", str(blocker / "x.pte"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {blocker / 'x.pte'}: cannot write: {blocker} is not a folder"
    ]  # one line, and no progress: nothing was lowered


@pytest.mark.parametrize("examples", ["kept", "dropped"])
def test_lower_checks_keyword_programs_and_leaves_their_state_alone(examples):
    """A program exported with keyword inputs (as transformers' static-cache wrapper is) gets
    its rewrites checked and applied, and the eager check does not change the caller's
    mutable buffers (``ep.module()`` runs on the program's own tensors)."""
    import torch
    import torch.nn.functional as F
    from oracle import Lowered, _capture

    from coreml_lint.lowering.run import lower

    class Stateful(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("seen", torch.zeros(1, 4))

        def forward(self, *, x):
            self.seen.add_(x)
            return F.gelu(x + self.seen, approximate="tanh")

    ep = torch.export.export(Stateful(), (), {"x": torch.randn(1, 4)})
    if examples == "dropped":
        ep._example_inputs = None
    delegates: list = []
    with _capture(delegates):
        result = lower(ep, minimum_deployment_target=18)
    assert not result.report.rejected_rewrites, result.report.rejected_rewrites
    assert any(r.startswith("CML305") for r in result.report.rewrites), result.report.rewrites
    assert 'mode="EXACT"' not in Lowered(delegates=delegates).mil
    assert torch.equal(ep.state_dict["seen"], torch.zeros(1, 4))


FLOAT32_REWRITES = {"CML304", "CML313"}  # fp16 norms, fp16 activations (and int bounds)


@pytest.mark.parametrize("case_id", [c for c in FAILING if BY_ID[c].expect & FLOAT32_REWRITES])
def test_lower_keeps_float16_norms_and_activations_on_core_ml(case_id):
    """The float32 rewrite keeps an fp16 norm or activation in the delegate instead of
    refusing it to the CPU, where it would split the partition."""
    result, _ = _lower(case_id)
    (code,) = BY_ID[case_id].expect & FLOAT32_REWRITES
    assert not result.report.refused, result.report.refused
    assert any(r.startswith(code) for r in result.report.rewrites), result.report.rewrites
    assert result.report.partitions_after == 1


CUSTOM_OP_LIBRARY = """
import torch

torch.library.define("mylib::twice", "(Tensor x) -> Tensor")


@torch.library.impl("mylib::twice", "CompositeExplicitAutograd")
def twice(x):
    return x * 2


@torch.library.register_fake("mylib::twice")
def _(x):
    return torch.empty_like(x)
"""


def test_cli_lower_names_an_unregistered_custom_op_and_imports_it(tmp_path):
    """A program that uses a custom op of the library that exported it: without the import
    that registers it, one line naming the op and the option; with --import, it loads."""
    import os

    (tmp_path / "mylib_ops.py").write_text(CUSTOM_OP_LIBRARY)
    export = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import mylib_ops\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x): return torch.ops.mylib.twice(x) + 1\n"
        "torch.export.save(torch.export.export(M(), (torch.randn(2),)), sys.argv[2])\n"
    )
    program = tmp_path / "custom.pt2"
    subprocess.run([sys.executable, "-c", export, str(tmp_path), str(program)], check=True)
    out = tmp_path / "custom.pte"
    result = _cli("lower", str(program), "-o", str(out), "--quiet")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "mylib::twice.default" in last and "--import MODULE" in last, last
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    exe = Path(sys.executable).with_name("coreml-lint")
    again = subprocess.run(
        [str(exe), "lower", str(program), "-o", str(out), "--quiet", "--import", "mylib_ops"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert "custom ops no imported module registers" not in again.stderr, again.stderr
    assert "torch.export.load failed" not in again.stderr, again.stderr


def test_float16_activation_rewrite_widens_only_what_fails_at_the_target():
    """At iOS17 a float16 leaky_relu lowers as it is; only the ReLU6 beside it (which fails
    at every target) is computed in float32."""
    import torch

    from coreml_lint import lower

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.leaky_relu(torch.nn.functional.hardtanh(x, 0.0, 6.0))

    ep = torch.export.export(Net().eval(), (torch.randn(2, 8).half(),))
    result = lower(ep, minimum_deployment_target=17)
    (rewrite,) = [r for r in result.report.rewrites if r.startswith("CML313")]
    assert "hardtanh" in rewrite and "leaky_relu" not in rewrite, rewrite
    assert result.report.partitions_after == 1


def test_lower_shows_the_warnings_it_had_no_answer_for():
    """Weights that lower but lose their quantization: the .pte is written, and the text
    report says so (not only the JSON)."""
    result, _ = _lower("int8-transposed-cast-ios17")
    text = result.report.render("q.pte")
    assert "warning CML107:" in text and "dense" in text, text


def test_cli_lower_refuses_a_missing_output_folder(tmp_path):
    """A typo in an output folder is one line and exit 2: no folder is created, nothing is
    lowered or written."""
    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    missing = tmp_path / "nonexistent" / "dir"
    result = _cli("lower", str(program), "-o", str(missing / "y.pte"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {missing / 'y.pte'}: cannot write: no such folder {missing}"
    ]
    assert not (tmp_path / "nonexistent").exists()
    result = _cli("lower", str(program), "-o", str(tmp_path / "y.pte"), "--report", str(missing))
    assert result.returncode == 2 and not (tmp_path / "nonexistent").exists()
    assert not (tmp_path / "y.pte").exists()


@pytest.mark.parametrize(
    ("case_id", "code", "mil"),
    [
        ("reciprocal-of-a-count", "CML311", r"real_div\("),  # a warning, answered exactly
        ("bool-count-gather-index", "CML314", r"gather_along_axis\("),
        ("count-nonzero-gather-index", "CML314", r"gather_along_axis\("),
        ("topk-index-floor-div-gather", "CML314", r"gather_along_axis\("),  # past a top-k
        ("float-range-outer-input", "CML315", r"matmul\("),  # the range cast, then outer
    ],
)
def test_lower_answers_these_by_a_rewrite_kept_on_core_ml(case_id, code, mil):
    """The rule's rewrite is what answers the case (not a CPU fallback): the rewritten op
    is in the delegate's MIL."""
    import re

    result, lowered = _lower(case_id)
    assert any(r.startswith(f"{code}: ") for r in result.report.rewrites), result.report.rewrites
    assert not result.report.refused and not result.report.cpu_ops_after
    assert re.search(mil, lowered.mil), lowered.mil
