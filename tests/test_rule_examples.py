"""Every rule's own examples, declared beside it (Fixit's VALID/INVALID): an invalid snippet
gets the rule's finding where its ``at`` pins it (line and column in the snippet, as
Fixit's ``range``) and, when the rule says so, fixes to exactly the expected text,
and fixing again changes nothing; a valid snippet gets no finding of the rule."""

from __future__ import annotations

import pytest

from coreml_lint.engine.source import lint_source
from coreml_lint.fixers.apply import compute_fix, selected_edits
from coreml_lint.rules import all_rules

EXAMPLES = [(rule, example) for rule in all_rules() for example in rule.examples]


def _id(pair):
    rule, example = pair
    kind = "invalid" if example.flagged else "valid"
    return f"{rule.code}-{kind}-{rule.examples.index(example)}"


def _fix(text: str) -> str:
    findings = lint_source(text, "example.py")
    result = compute_fix("example.py", text, selected_edits(findings, unsafe=True))
    assert result.error is None, result.error
    return result.fixed


@pytest.mark.parametrize("pair", EXAMPLES, ids=[_id(p) for p in EXAMPLES])
def test_rule_example(pair):
    rule, example = pair
    text = example.source()
    found = [f for f in lint_source(text, "example.py") if f.code == rule.code]
    if not example.flagged:
        assert not found, [f.message for f in found]
        return
    assert found, f"{rule.code} did not flag:\n{text}"
    first = min((f.location.line, f.location.column) for f in found)
    assert example.position(*first) == example.at, "the finding points elsewhere"
    expected = example.expected_fix()
    if expected is None:
        assert all(f.edit is None for f in found), "a fix exists: give the example its text"
        return
    fixed = _fix(text)
    assert fixed == expected
    assert _fix(fixed) == fixed, "fixing twice changes something"


def test_every_source_rule_has_flagged_and_clean_examples():
    for rule in all_rules():
        if not rule.source_triggers:
            continue
        kinds = {example.flagged for example in rule.examples}
        assert kinds == {True, False}, f"{rule.code} needs Invalid and Valid examples"
        if rule.fixes_source():
            assert any(e.fixed for e in rule.examples), f"{rule.code}: show its fix"
        for example in rule.examples:  # Fixit's range: an Invalid example says where
            assert not example.flagged or example.at is not None, f"{rule.code}: pin `at`"
