"""Placement and findings as a node-data overlay for Google's Model Explorer.

Teams that already look at their exported program in Model Explorer can load this file as
"node data" on top of it and see which nodes coreml-lint predicts on Core ML (coloured by
partition), which on the CPU (grey), and which carry a finding (red or amber label).

The format is Model Explorer's ``GraphNodeData`` (``model_explorer/node_data_builder.py``):
``{"results": {node_id: {"value", "bgColor", "textColor"}}, "thresholds": [...]}``. The
single-graph form is used because it needs no graph id. Node ids in Model Explorer's
PyTorch adapter are the ``ExportedProgram``'s node names, which the linted graph keeps;
nodes coreml-lint adds while canonicalising (``*_contiguous``, ``*_scatter``) have no
counterpart there and Model Explorer ignores them.

``value`` is the partition id plus one for a Core ML node and 0 for a CPU node, so the
aggregated statistics Model Explorer shows for a layer count its CPU nodes.
"""

from __future__ import annotations

import colorsys
import json
from typing import Any

from coreml_lint.program.placement import COREML
from coreml_lint.reports.html_data import HtmlProgram

CPU_COLOR = "#c7ccd3"
FINDING_TEXT = {"error": "#b71c1c", "warning": "#8a5300", "info": "#0d47a1"}


def _partition_color(pid: int) -> str:
    """The HTML report's hue for the partition, as a light hex colour."""
    hue = round((pid * 137.508 + 200) % 360) / 360.0
    r, g, b = colorsys.hls_to_rgb(hue, 0.80, 0.60)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def model_explorer_data(program: HtmlProgram) -> dict[str, Any]:
    """The overlay as a dict (see the module docstring)."""
    worst: dict[str, str] = {}
    rank = {"error": 0, "warning": 1, "info": 2}
    for finding in program.findings:
        severity = str(getattr(finding.severity, "value", finding.severity))
        node = finding.node
        if node and rank.get(severity, 3) < rank.get(worst.get(node, ""), 3):
            worst[node] = severity
    results: dict[str, dict[str, Any]] = {}
    for node in program.graph.nodes:
        where = program.placement.nodes[node.name]
        if where.where == COREML and where.partition is not None:
            entry: dict[str, Any] = {
                "value": where.partition + 1,
                "bgColor": _partition_color(where.partition),
            }
        else:
            entry = {"value": 0, "bgColor": CPU_COLOR}
        if node.name in worst:
            entry["textColor"] = FINDING_TEXT.get(worst[node.name], "#000000")
        results[node.name] = entry
    return {
        "results": results,
        "thresholds": [{"value": 0, "bgColor": CPU_COLOR}],
    }


def render_model_explorer(program: HtmlProgram) -> str:
    """Model Explorer node data for one linted method, as JSON text."""
    return json.dumps(model_explorer_data(program), indent=2)
