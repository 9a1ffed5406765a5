"""``model-explorer``: Model Explorer's node-data overlay of one program."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports.html import HtmlProgram
from coreml_lint.reports.model_explorer import render_model_explorer

NAME = "model-explorer"


def check(view: Any) -> str:
    """One program only: the overlay format holds one graph."""
    if len(view.reports) != 1:
        view.errors.append(
            "--output-format model-explorer overlays one program: give exactly one .pt2 "
            f"(got {len(view.reports)} linted methods)"
        )
        return ""
    file, report = view.reports[0]
    return render_model_explorer(HtmlProgram.from_report(report, source=str(file)))


RENDERERS = {"check": check}
