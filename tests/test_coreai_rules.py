"""The Core AI rules (``--target coreai``): every program case declared in a rule module is
linted (the codes the rule must report, and no other Core AI error) and, in the oracle
tier, converted and run on the real Core AI stack: a flagged case really crashes with the
error the rule names, or really computes wrong values; a clean twin really agrees with
eager. Plus each rule's source examples, the registry's separation of targets, and the
guided fixes through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coreml_lint.core.config import LintConfig
from coreml_lint.core.findings import Severity
from coreml_lint.engine.source import lint_source
from coreml_lint.fixers.apply import compute_fix, selected_edits
from coreml_lint.rules import all_rules, rule_by_code

COREAI = LintConfig(target="coreai")
RULES = all_rules("coreai")
CASES = [(rule, case) for rule in RULES for case in rule.program_cases()]
EXAMPLES = [(rule, example) for rule in RULES if rule.source_triggers for example in rule.examples]


def test_targets_keep_their_rules_apart():
    assert RULES and all(r.code.startswith("CAI") and r.target == "coreai" for r in RULES)
    assert all(r.code.startswith("CML") and r.target == "coreml" for r in all_rules())
    assert rule_by_code("CAI105").target == "coreai"  # `coreml-lint rule CAI105` finds it
    assert {c.module for _, c in CASES} == {r.__module__ for r in RULES if r.program_cases()}


def test_core_ai_rules_do_not_run_for_core_ml():
    text = "import torch\nm = (x > 0).amax(dim=1)\n"
    assert {f.code for f in lint_source(text, "m.py")} == {"CML105"}
    assert {f.code for f in lint_source(text, "m.py", COREAI)} == {"CAI105"}


@pytest.mark.parametrize(
    "pair", EXAMPLES, ids=[f"{r.code}-{r.examples.index(e)}" for r, e in EXAMPLES]
)
def test_source_example(pair):
    rule, example = pair
    text = example.source()
    found = [f for f in lint_source(text, "example.py", COREAI) if f.code == rule.code]
    assert bool(found) == example.flagged, [f.message for f in found]
    if example.flagged and example.expected_fix() is not None:
        edits = selected_edits(found, unsafe=True)
        fixed = compute_fix("example.py", text, edits)
        assert fixed.error is None and fixed.fixed == example.expected_fix()


def _exported(case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model, inputs = case.make()
    return torch.export.export(model.eval(), inputs), inputs


@pytest.mark.parametrize("pair", CASES, ids=[c.id for _, c in CASES])
def test_case_is_linted_as_declared(pair):
    from coreml_lint.engine.exported import lint_exported_program

    _, case = pair
    ep, _ = _exported(case)
    findings = lint_exported_program(ep, COREAI).findings
    errors = {f.code for f in findings if f.severity is Severity.ERROR}
    assert errors == set(case.expect), [f.message for f in findings]
    if case.warnings is not None:
        warnings = {f.code for f in findings if f.severity is Severity.WARNING}
        assert warnings == set(case.warnings)


def test_cai110_says_what_core_ai_does_in_a_sentence():
    from coreml_lint.engine.exported import lint_exported_program

    by_id = {case.id: case for _, case in CASES}
    said = {}
    for id in ("coreai-int-clamp-2**40", "coreai-int-add-2**40"):
        ep, _ = _exported(by_id[id])
        (finding,) = [f for f in lint_exported_program(ep, COREAI).findings if f.code == "CAI110"]
        said[id] = finding.message
    assert said["coreai-int-clamp-2**40"].endswith(
        "outside int32: Core AI narrows it to int32 without a word, and it wraps"
    )
    overflow = "outside int32: Core AI conversion fails: `OverflowError: Python integer"
    assert overflow in said["coreai-int-add-2**40"]


def test_the_lower_hint_agrees_with_what_lower_does():
    """A bool max(dim) has no bool twin: ``lower --target coreai`` refuses it (CAI105's
    ``unanswered``), so its finding must not say lower answers it; a bool amax's does."""
    from coreml_lint.engine.exported import lint_exported_program
    from coreml_lint.reports.text import render_full

    by_id = {case.id: case for _, case in CASES}
    hinted = {}
    for id in ("coreai-bool-min-dim", "coreai-bool-amax"):
        ep, _ = _exported(by_id[id])
        (finding,) = lint_exported_program(ep, COREAI).findings
        hinted[id] = (finding.lower_fixes, "or lower:" in render_full([finding]))
    assert hinted == {"coreai-bool-min-dim": (False, False), "coreai-bool-amax": (True, True)}


@pytest.mark.oracle
@pytest.mark.parametrize("pair", CASES, ids=[c.id for _, c in CASES])
def test_case_on_the_real_core_ai_stack(pair):
    """A crash case crashes with its regex; a silent case converts and its largest output
    error (relative to the output's scale) passes its ``silent`` test; a clean case agrees
    with eager within float32 rounding."""
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")
    import re

    from coreai_cases import Compared

    from coreml_lint.coreai_stack import run_program
    from coreml_lint.rules.cai101_int64_input import CoreAIInt64Input

    rule, case = pair
    ep, inputs = _exported(case)
    narrow = rule is not CoreAIInt64Input  # CAI101's cases feed what the program declares
    run = run_program(ep, [inputs], narrow_int64=narrow)
    if case.crash:
        assert not run.ok and re.search(case.crash, run.message), run.message or "no crash"
        return
    assert run.ok, run.message
    model, _ = case.make()  # the same seed: the same weights (the builders have none)
    out = model.eval()(*inputs)
    eager = [[o.detach().numpy() for o in (out if isinstance(out, tuple) else (out,))]]
    error = Compared(run, eager).max_error()
    if case.silent is not None:
        assert case.silent(error), error
    else:
        assert error <= 1e-5, error


# -- the guided fixes through the CLI, on a saved program ------------------------------------

MODEL = """import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def forward(self, x, ids):
        hit = (x > 0).amax(-1)
        far = ids.masked_fill(ids > 2, torch.iinfo(torch.int64).max)
        return hit, far


if __name__ == "__main__":
    inputs = (torch.randn(4, 8), torch.randint(0, 5, (4, 8), dtype=torch.int32))
    torch.export.save(torch.export.export(Model(), inputs), "model.pt2")
"""


# the CLI with torch, numpy and the stacks made unimportable: the light path must not need them
LIGHT = """import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "numpy", "executorch", "coremltools", "coreai_torch"):
            raise ImportError("the light path imported " + name)
sys.meta_path.insert(0, Block())
from coreml_lint.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _cli(*args: str, cwd: Path, light: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *(["-c", LIGHT] if light else ["-m", "coreml_lint"]), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(Path(__file__).parents[1]), "PATH": "/usr/bin:/bin"},
    )


def test_program_findings_fix_the_model_source(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text(MODEL)
    built = subprocess.run(
        [sys.executable, "model.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert built.returncode == 0, built.stderr
    run = _cli("--isolated", "--target", "coreai", "model.pt2", cwd=tmp_path, light=True)
    assert run.returncode == 1, run.stderr
    assert "CAI105" in run.stdout and "CAI110" in run.stdout
    assert "CML" not in run.stdout  # Core ML's rules are not asked
    fixed = _cli(
        "--isolated", "--target", "coreai", "model.pt2", "--fix", "--unsafe-fixes", cwd=tmp_path
    )
    text = (tmp_path / "model.py").read_text()
    assert "(x > 0).any(-1)" in text, fixed.stdout + fixed.stderr
    assert "torch.iinfo(torch.int32).max" in text
    again = subprocess.run([sys.executable, "model.py"], cwd=tmp_path, capture_output=True)
    assert again.returncode == 0
    assert _cli("--isolated", "--target", "coreai", "model.pt2", cwd=tmp_path).returncode == 0


def test_the_json_report_carries_no_core_ml_placement(tmp_path):
    pytest.importorskip("torch")
    import json

    (tmp_path / "model.py").write_text(MODEL)
    subprocess.run([sys.executable, "model.py"], cwd=tmp_path, check=True)
    run = _cli(
        "--isolated",
        "--target",
        "coreai",
        "model.pt2",
        "--output-format",
        "json",
        cwd=tmp_path,
        light=True,
    )
    (program,) = json.loads(run.stdout)["programs"]
    assert set(program) == {"method", "target", "source"}  # no partitions, no settings
    assert (program["target"], program["source"]) == ("coreai", "model.pt2")


def test_core_ml_only_options_are_refused_with_core_ai(tmp_path):
    run = _cli("--target", "coreai", "--ios", "17", str(tmp_path), cwd=tmp_path)
    assert run.returncode == 2
    assert "Core ML only, not with --target coreai" in run.stderr
    assert "Traceback" not in run.stderr
