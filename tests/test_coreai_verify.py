"""``coreml-lint verify --target coreai``: the whole program converted by coreai-torch, run on
Core AI's runtime on Linux and compared with eager, through the real CLI. Which programs
agree and which do not is Core AI's doing (tests/test_coreai_facts.py measures each)."""

from __future__ import annotations

import json

import pytest

from coreml_lint.cli.main import main
from coreml_lint.verifier.coreai import crash_location, crash_summary

CRASH = (
    "RuntimeError: Failed to run the pre-compilation rewrite pipeline: at "
    '#debuginfo.location<loc("/m/model.py":12:0) in @main metadata = [<"call_stack": '
    "[\"L$1\"]>]>: 'coreai.reduce_max' op operand #0 must be CoreAI Tensor of ..., but got "
    "'tensor<4x8xi1>'\nat #debuginfo.location<...>: see current operation: %4 = ..."
)


def test_crash_summary_keeps_the_error_and_the_source_line():
    assert crash_location(CRASH) == ("/m/model.py", 12)
    assert crash_summary(CRASH) == (
        "RuntimeError: Failed to run the pre-compilation rewrite pipeline: 'coreai.reduce_max' "
        "op operand #0 must be CoreAI Tensor of ..., but got 'tensor<4x8xi1>' "
        "(at /m/model.py:12)"
    )
    assert crash_location('loc("-":0:0)') == (None, None)
    assert crash_summary("IndexError: tuple index out of range") == (
        "IndexError: tuple index out of range"
    )


def _lint_finding(code, line, op, outcome="crash", node="amax"):
    from coreml_lint.core.findings import Finding, Location, Outcome, Severity

    return Finding(
        code=code,
        name="rule",
        severity=Severity.ERROR,
        outcome=Outcome(outcome),
        message="m",
        file="p.pt2",
        node=node,
        op=op,
        location=Location("/m/model.py", line, None, "y = m.amax(1)"),
    )


def _crash_report(message):
    from coreml_lint.verifier.coreai import CONVERT_STAGE
    from coreml_lint.verifier.report import VerifyReport

    report = VerifyReport(lowering_error=crash_summary(message), lowering_stage=CONVERT_STAGE)
    return report.finish()


def test_a_crash_is_found_where_the_converter_says_and_names_the_rule_that_predicted_it():
    from coreml_lint.verifier.coreai_findings import findings_of

    assert crash_location(crash_summary(CRASH)) == ("/m/model.py", 12)
    lint = [_lint_finding("CAI105", 12, "aten.amax.default")]
    (crash,) = findings_of(_crash_report(CRASH), "p.pt2", lint)
    assert (crash.location.path, crash.location.line) == ("/m/model.py", 12)
    assert crash.location.source_line == "y = m.amax(1)"  # the lint finding's, shown
    assert crash.fix == "predicted by CAI105: see `coreml-lint rule CAI105`"
    (crash,) = findings_of(_crash_report(CRASH), "p.pt2", [])
    assert crash.fix.startswith("no Core AI rule predicted it")
    assert (crash.location.path, crash.location.line) == ("/m/model.py", 12)


def test_a_crash_naming_an_op_is_found_at_the_finding_on_that_op():
    """``unsupported ATen ops: aten.X`` names no line: the one finding on aten.X predicted
    it and places it; a finding predicting wrong values (not a crash) predicts no crash."""
    from coreml_lint.verifier.coreai_findings import findings_of

    error = (
        "ValueError: The exported program contains unsupported ATen ops: "
        "aten.remainder.Scalar. Use register_torch_lowering() to provide a custom lowering."
    )
    lint = [
        _lint_finding("CAI603", 7, "aten.remainder.Scalar", node="remainder"),
        _lint_finding("CAI105", 9, "aten.amax.default"),
        _lint_finding("CAI311", 3, "aten.avg_pool2d.default", outcome="silent"),
    ]
    (crash,) = findings_of(_crash_report(error), "p.pt2", lint)
    assert crash.fix == "predicted by CAI603: see `coreml-lint rule CAI603`"
    assert crash.location.line == 7
    (crash,) = findings_of(_crash_report(error), "p.pt2", lint[2:])
    assert crash.fix.startswith("no Core AI rule predicted it") and crash.location is None


def test_core_ml_verify_names_the_rule_that_predicted_a_crash_as_lower_does():
    from coreml_lint.verifier.findings import findings_of
    from coreml_lint.verifier.report import VerifyReport

    report = VerifyReport(lowering_error="ValueError: bool", lowering_stage="coremltools")
    lint = [_lint_finding("CML105", 9, "aten.amax.default")]
    (crash,) = findings_of(report.finish(), "p.pt2", lint)
    assert crash.fix == "predicted by CML105: see `coreml-lint rule CML105`"
    (crash,) = findings_of(report.finish(), "p.pt2")  # no lint given: none consulted
    assert crash.fix == "see the lint findings of this program for a rule that predicted it"


def _unread_archive(tmp_path, monkeypatch):
    """A file these refusals never read: the archive check (tested with real archives in
    test_cli) is passed over, so the refusal under test is the one that answers."""
    import coreml_lint.cli.verify as verify_cli

    monkeypatch.setattr(verify_cli, "damaged_archive", lambda programs: None)
    program = tmp_path / "p.pt2"
    program.write_bytes(b"not read")
    return program


def test_partitioner_settings_are_refused_for_core_ai(tmp_path, capsys, monkeypatch):
    program = _unread_archive(tmp_path, monkeypatch)
    assert main(["verify", "--target", "coreai", "--ios", "17", str(program)]) == 2
    assert "apply to Core ML, not --target coreai" in capsys.readouterr().err


def test_missing_core_ai_is_one_line(tmp_path, capsys, monkeypatch):
    import coreml_lint.coreai_stack as stack

    monkeypatch.setattr(stack, "coreai_missing", lambda: "coreai-core")
    program = _unread_archive(tmp_path, monkeypatch)
    assert main(["verify", "--target", "coreai", "-q", "--isolated", str(program)]) == 2
    err = capsys.readouterr().err
    assert "needs coreai-core" in err and "coreml-lint[coreai]" in err and "Traceback" not in err


# -- against the real converter and runtime -------------------------------------------------

torch = pytest.importorskip("torch")


def _needs_coreai():
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")


class Pool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False)


class BoolAmax(torch.nn.Module):
    def forward(self, x):
        return (x > 0).amax(-1).float() + x.sum(-1)


class Gelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


class Cache(torch.nn.Module):
    """Writes a buffer (Core AI state); ``pool``: writes it through the wrong avg_pool."""

    def __init__(self, pool: bool = False) -> None:
        super().__init__()
        self.pool = pool
        self.register_buffer("cache", torch.zeros(1, 3, 4, 4))

    def forward(self, x, pos):
        value = Pool()(x) if self.pool else x[..., ::2, ::2]
        self.cache.copy_(value)
        return self.cache.sum() + pos.sum()


class PoolThenRelu(torch.nn.Module):
    """The wrong pool (CAI311) on one line, the output it feeds on the next."""

    def forward(self, x):
        p = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        return torch.nn.functional.relu(p) * 2.0


class EpochOffset(torch.nn.Module):
    """An int64 constant past int32 (CAI112, on the node reading it, which torch's own
    functionalization names otherwise), then arithmetic on later lines."""

    def forward(self, t):
        base = torch.tensor([2**33 + 12345])
        shifted = (t * 1000).long() + base
        return shifted.float() / 1000.0


def _explained(model, inputs):
    """What ``explain`` says of each output node of the verified (functional) program."""
    from coreml_lint.core.config import LintConfig
    from coreml_lint.engine.exported import lint_exported_program
    from coreml_lint.verifier.coreai import _output_nodes
    from coreml_lint.verifier.coreai_findings import rule_for_node

    ep = torch.export.export(model, inputs)
    explain = rule_for_node(lint_exported_program(ep, LintConfig(target="coreai")).findings)
    return [explain(node) for node in _output_nodes(ep.run_decompositions({}))]


def test_a_wrong_value_is_explained_by_a_finding_upstream_of_it():
    assert _explained(PoolThenRelu(), (torch.randn(1, 2, 6, 6),)) == ["CAI311"]
    assert _explained(EpochOffset(), (torch.rand(4),)) == ["CAI112"]
    assert _explained(Gelu(), (torch.randn(4, 8),)) == [None]


def test_a_crash_prediction_upstream_explains_no_wrong_value():
    from coreml_lint.verifier.coreai_findings import rule_for_node

    graph = torch.export.export(BoolAmax(), (torch.randn(4, 8),)).run_decompositions({}).graph
    (out,) = next(n for n in graph.nodes if n.op == "output").args[0]  # add, below the amax
    crash = _lint_finding("CAI105", 1, "aten.amax.default")  # on the node "amax"
    silent = _lint_finding("CAI999", 1, "aten.amax.default", outcome="silent")
    assert rule_for_node([crash])(out) is None  # the program ran: it predicted no value
    assert rule_for_node([silent])(out) == "CAI999"


def _verify(tmp_path, capsys, model, inputs, *extra):
    _needs_coreai()
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(model, inputs), path)
    code = main(["verify", "--target", "coreai", "-q", "--isolated", str(path), *extra])
    return code, capsys.readouterr().out


@pytest.mark.oracle
def test_clean_program_agrees(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, Gelu(), (torch.randn(4, 8),))
    assert code == 0, out
    assert "verify --target coreai: agree (the whole program on Core AI)" in out
    assert "inputs: example float32[4, 8]" in out


@pytest.mark.oracle
def test_quiet_leaves_standard_error_empty(tmp_path, capfd):
    """Not even the runtime's own log line (``ODIE [default]: Loading function 'main'``,
    written by native code)."""
    _needs_coreai()
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(Gelu(), (torch.randn(4, 8),)), path)
    assert main(["verify", "--target", "coreai", "-q", "--isolated", str(path)]) == 0
    assert capfd.readouterr().err == ""


@pytest.mark.oracle
def test_wrong_border_windows_diverge_at_the_source_line(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, Pool(), (torch.randn(1, 3, 8, 8),))
    assert code == 1, out
    assert "CAI901 [error, silent] [semantic] output 0 (avg_pool2d)" in out
    assert "count_include_pad=False)" in out  # the model's source line is shown
    assert "verify --target coreai: diverge" in out


@pytest.mark.oracle
def test_a_divergence_below_the_flagged_line_is_explained_by_its_rule(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, PoolThenRelu(), (torch.randn(1, 2, 6, 6),))
    assert code == 1, out
    assert "CAI901 [error, silent] [semantic] output 0 (mul)" in out
    assert "fix: explained by CAI311: see `coreml-lint rule CAI311`" in out


@pytest.mark.oracle
def test_conversion_crash_is_a_finding_at_the_source_line(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, BoolAmax(), (torch.randn(4, 8),))
    assert code == 1, out
    assert "CAI902 [error, crash] crashed in Core AI conversion (coreai-torch)" in out
    assert "'coreai.reduce_max' op operand #0 must be" in out
    assert f"{__file__}:" in out  # the converter's location, as the finding's
    code, out = _verify(
        tmp_path, capsys, BoolAmax(), (torch.randn(4, 8),), "--output-format", "json"
    )
    (crash,) = json.loads(out)["findings"]
    assert crash["location"]["path"].endswith("test_coreai_verify.py")  # CAI105's line
    assert "(x > 0).amax(-1)" in crash["location"]["source_line"]
    assert crash["fix"] == "predicted by CAI105: see `coreml-lint rule CAI105`"


@pytest.mark.oracle
def test_state_is_compared_and_int64_inputs_are_fed_as_int32(tmp_path, capsys):
    inputs = (torch.randn(1, 3, 8, 8), torch.tensor([3]))
    code, out = _verify(tmp_path, capsys, Cache(), inputs, "--output-format", "json")
    data = json.loads(out)["verify"]
    assert code == 0, out
    assert data["partitions"][0]["states"] == ["cache"]
    assert "state cache" in data["partitions"][0]["semantic"]["outputs"]
    assert "int64 inputs fed as int32 (Core AI declares them int32)" in data["notes"]
    code, out = _verify(tmp_path, capsys, Cache(pool=True), inputs, "--output-format", "json")
    data = json.loads(out)
    assert code == 1
    rules = {d["output"]: d["rule"] for d in data["verify"]["divergences"]}
    assert "state cache" in rules  # the written buffer is judged, not only the output
    assert rules["state cache"] == "CAI311"  # the pool that writes it
    assert {f["code"] for f in data["findings"]} == {"CAI901"}


@pytest.mark.oracle
def test_half_model_is_judged_in_its_own_float16(tmp_path, capsys):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU("tanh")).half()
    code, out = _verify(
        tmp_path, capsys, model, (torch.randn(2, 8).half(),), "--output-format", "json"
    )
    data = json.loads(out)["verify"]
    assert code == 0, out
    assert data["inputs"] == ["example float16[2, 8]"]
    assert data["partitions"][0]["float16"]["status"] == "agree"
