"""SARIF for Core AI: ``check --target coreai`` and ``verify --target coreai`` list the Core AI
rules (CAI codes) in the driver with the same metadata as Core ML's, so every result's
``ruleId`` resolves; a finding of a rule outside the target's list (CML001 for a source
file that does not parse) still brings its rule."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.reports.formats import sarif
from coreml_lint.rules import all_rules

KEYS = {"id", "name", "shortDescription", "fullDescription"}


def _view(findings, target):
    return SimpleNamespace(findings=findings, target=target)


def _finding(code: str) -> Finding:
    return Finding(code, "n", Severity.ERROR, Outcome.CRASH, "m", "p.pt2")


def test_core_ai_run_lists_core_ai_rules_with_core_ml_metadata():
    document = json.loads(sarif.check(_view([_finding("CAI105")], "coreai")))
    rules = document["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules("coreai")]
    coreml = json.loads(sarif.check(_view([], "coreml")))["runs"][0]["tool"]["driver"]["rules"]
    assert all(set(r) == KEYS for r in rules + coreml)
    cai105 = next(r for r in rules if r["id"] == "CAI105")
    assert cai105["name"] == "coreai-bool-min-max"
    assert "reduce_max" in cai105["fullDescription"]["text"]  # the rule's documentation
    assert document["runs"][0]["results"][0]["ruleId"] == "CAI105"


def test_a_finding_of_another_target_brings_its_rule():
    document = json.loads(sarif.check(_view([_finding("CML001")], "coreai")))
    ids = [r["id"] for r in document["runs"][0]["tool"]["driver"]["rules"]]
    assert ids[-1] == "CML001" and ids.count("CML001") == 1


def test_cli_check_target_coreai_sarif(tmp_path: Path, capsys):
    import pytest

    torch = pytest.importorskip("torch")
    from coreml_lint.cli.main import main

    class Model(torch.nn.Module):
        def forward(self, x):
            return (x > 0).amax(-1).float()

    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(Model(), (torch.randn(4, 8),)), path)
    code = main(["--isolated", "--target", "coreai", str(path), "--output-format", "sarif"])
    document = json.loads(capsys.readouterr().out)
    assert code == 1
    results = document["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["CAI105"]
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] > 0
    ids = {r["id"] for r in document["runs"][0]["tool"]["driver"]["rules"]}
    assert ids == {r.code for r in all_rules("coreai")}
