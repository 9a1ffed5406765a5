"""``json``: the findings and each command's report as JSON, for tools."""

from __future__ import annotations

import json
from typing import Any

from coreml_lint.reports import machine

NAME = "json"
CHECK_ADVICE = True


def check(view: Any) -> str:
    return machine.render_json(view.findings, view.programs_json)


def verify(view: Any) -> str:
    return json.dumps(
        {"verify": view.report.to_json(), "findings": [f.to_json() for f in view.findings]},
        indent=2,
        default=str,
    )


def lower(view: Any) -> str:
    return json.dumps(view.report.to_json(), indent=2, default=str)


def migrate(view: Any) -> str:
    return json.dumps(view.to_json(), indent=2)


RENDERERS = {"check": check, "verify": verify, "lower": lower, "migrate": migrate}
