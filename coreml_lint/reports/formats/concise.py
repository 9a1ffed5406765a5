"""``concise``: one line per finding (and per checked advice), then the summary."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports import text

NAME = "concise"
CHECK_ADVICE = True


def check(view: Any) -> str:
    parts = [text.render_concise(view.findings)]
    parts += [
        text.render_checked_advice(str(file), report.advice)
        for file, report in view.reports
        if report.advice is not None and report.advice.checked is not None
    ]
    parts += view.summary
    return "\n".join(part for part in parts if part)


def verify(view: Any) -> str:
    return "\n".join([text.render_concise(view.findings), view.summary]).strip()


RENDERERS = {"check": check, "verify": verify}
