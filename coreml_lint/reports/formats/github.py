"""``github``: GitHub Actions workflow commands (annotations on the pull request)."""

from __future__ import annotations

from typing import Any

from coreml_lint.reports import machine

NAME = "github"


def render(view: Any) -> str:
    return machine.render_github(view.findings)


RENDERERS = {"check": render, "verify": render}
