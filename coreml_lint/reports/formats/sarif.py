"""``sarif``: SARIF 2.1.0 for code-scanning tools."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports import machine

NAME = "sarif"


def rules_of(findings: list[Any], rules: Any) -> list[Any]:
    """``rules`` (the target's: Core ML's or Core AI's), and the rule of any finding not
    among them (a source file that does not parse is CML001 for either target), so every
    result's ``ruleId`` has its metadata in the driver."""
    from coreml_lint.rules import rule_by_code

    listed = list(rules)
    known = {rule.code for rule in listed}
    for code in dict.fromkeys(f.code for f in findings):
        rule = rule_by_code(code) if code not in known else None
        if rule is not None:
            listed.append(rule)
            known.add(code)
    return listed


def check(view: Any) -> str:
    from coreml_lint.rules import all_rules

    return machine.render_sarif(view.findings, rules_of(view.findings, all_rules(view.target)))


def verify(view: Any) -> str:
    return machine.render_sarif(view.findings, rules_of(view.findings, view.rules))


RENDERERS = {"check": check, "verify": verify}
