"""``full``: every finding with its source line and fix, then the command's summary."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports import text

NAME = "full"
CHECK_ADVICE = True


def check(view: Any) -> str:
    parts = []
    if view.show_placement:
        parts += [report.placement.describe(str(file)) for file, report in view.reports]
    parts.append(text.render_full(view.findings))
    parts += view.advice_blocks
    parts += view.summary
    return "\n".join(part for part in parts if part)


def verify(view: Any) -> str:
    return "\n\n".join(part for part in (text.render_full(view.findings), view.summary) if part)


def lower(view: Any) -> str:
    return view.report.render(str(view.output))


def migrate(view: Any) -> str:
    return view.render_text()


RENDERERS = {"check": check, "verify": verify, "lower": lower, "migrate": migrate}
