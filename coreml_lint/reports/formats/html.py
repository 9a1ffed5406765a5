"""``html``: one self-contained page per run, about where each program's nodes run."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports.html import HtmlProgram, render_html

NAME = "html"
CHECK_ADVICE = True


def check(view: Any) -> str:
    """Every linted program (the findings of model sources are in the text formats: a page
    is about placement)."""
    if not view.reports:
        view.errors.append("--output-format html shows programs: give a .pt2")
        return ""
    return render_html([HtmlProgram.from_report(r, source=str(f)) for f, r in view.reports])


def verify(view: Any) -> str:
    page = HtmlProgram.from_report(view.lint, source=str(view.program), verify=view.status())
    page.findings = [*page.findings, *view.found]
    return render_html([page])


def lower(view: Any) -> str:
    """The delegation page of the program as linted, with what lower did to it."""
    from coreml_lint.engine.program import lint_pt2

    status = view.status()
    pages = [
        HtmlProgram.from_report(
            linted, source=str(view.program), verify=status, lowering=view.report
        )
        for linted in lint_pt2(view.program, view.config)
    ]
    return render_html(pages)


def migrate(view: Any) -> str:
    """The migration view: Core ML at each target and Core AI side by side."""
    from coreml_lint.reports.html_migration import render_migration_html

    return render_migration_html(view)


RENDERERS = {"check": check, "verify": verify, "lower": lower, "migrate": migrate}
