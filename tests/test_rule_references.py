"""Each rule's documentation cites the upstream reports and fixes of its pitfall (issue 32):
a References section, shown by ``coreml-lint rule CODE``, whose links are the coremltools
and ExecuTorch issues, pull requests and sources checked by hand when they were added (a
link not in ``VERIFIED`` is one nobody checked); a rule with none found says so."""

from __future__ import annotations

import re

from coreml_lint.cli.main import main
from coreml_lint.rules import all_rules

CT = "https://github.com/apple/coremltools"
ET = "https://github.com/pytorch/executorch"
# Read on 2026-12-01 (title and state as the docs describe them).
VERIFIED = {
    *(f"{CT}/issues/{n}" for n in (759, 1570, 2565, 2569, 2573, 2821, 2826)),
    *(f"{CT}/pull/{n}" for n in (779, 1623, 1911, 2592, 2669, 2773, 2863, 2864)),
    *(f"{CT}/pull/{n}" for n in (2339, 2725)),  # read on 2026-12-04, against 9.0's converter
    *(f"{ET}/issues/{n}" for n in (4209, 11686, 21855, 21951)),
    *(f"{ET}/issues/{n}" for n in (6330, 11086)),  # read on 2026-12-04 (CML611's related)
    *(f"{ET}/pull/{n}" for n in (5165, 12532, 18531, 19245, 19394)),
    f"{ET}/blob/main/backends/apple/coreml/partition/coreml_partitioner.py",
}
_URL = re.compile(r"https?://\S+")


def _references(doc: str) -> str:
    _, _, section = doc.partition("\nReferences\n")
    return section


def test_every_rule_documents_its_references_or_says_it_has_none():
    for rule in all_rules():
        section = _references(rule.documentation())
        assert section.strip(), f"{rule.code}: no References section"
        links = _URL.findall(section)
        assert links or section.strip().startswith("None"), rule.code
        for link in links:
            assert link in VERIFIED, f"{rule.code}: {link} was not checked"


def test_the_references_cite_upstream_for_the_known_pitfalls():
    cited = {r.code: _URL.findall(_references(r.documentation())) for r in all_rules()}
    assert f"{CT}/pull/2863" in cited["CML305"]
    assert f"{ET}/issues/11686" in cited["CML101"]
    assert f"{CT}/pull/2773" in cited["CML311"]
    assert f"{ET}/issues/21951" in cited["CML609"]


def test_rule_shows_the_references(capsys):
    assert main(["rule", "CML305"]) == 0
    out = capsys.readouterr().out
    assert "References" in out and f"{CT}/pull/2863" in out
