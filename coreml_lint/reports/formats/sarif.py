"""``sarif``: SARIF 2.1.0 for code-scanning tools."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports import machine

NAME = "sarif"


def check(view: Any) -> str:
    from coreml_lint.rules import all_rules

    return machine.render_sarif(view.findings, all_rules())


def verify(view: Any) -> str:
    return machine.render_sarif(view.findings, view.rules)


RENDERERS = {"check": check, "verify": verify}
