"""``verify --target coreai``'s results as findings (CAI901, CAI902), so every output format
renders them like lint findings; a Core AI lint finding at the same node or source line
explains them, and one that predicts a crash predicts it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from coreml_lint.core.findings import (
    Finding,
    Location,
    crash_predictions,
    predicted_fix,
    rules_by_line,
    value_explanations,
)
from coreml_lint.rules.cai901_coreai_divergence import CoreAIDivergence
from coreml_lint.rules.cai902_coreai_crash import CoreAICrash
from coreml_lint.verifier.coreai import crash_location
from coreml_lint.verifier.report import Divergence, VerifyReport


def rule_for_node(findings: list[Finding]) -> Callable[[Any], str | None]:
    """``explain``: the Core AI lint rule whose error finding explains a wrong value at
    ``node`` (a ``torch.fx`` node of the program verified): a finding on the node itself,
    else on the nearest node upstream of it (a wrong pool feeds the relu that is returned),
    matched by name, else by the model source line of an upstream node. A finding that
    predicts a crash explains no value (the program ran)."""
    from coreml_lint.verifier.localize import upstream_nodes

    # errors only: a finding anywhere upstream explains here, and a warning's value may
    # never have come (Core ML's verify takes a warning at the divergence's own line only)
    explaining = value_explanations(findings, warnings=False)
    by_node = {f.node: f.code for f in explaining if f.node}
    by_line = rules_by_line(explaining)

    def explain(node: Any) -> str | None:
        own = by_node.get(node.name) or by_node.get(re.sub(r"_\d+$", "", node.name))
        upstream = upstream_nodes(node)
        return (
            own
            or next((by_node[n.name] for n in upstream if n.name in by_node), None)
            or next(filter(None, (by_line.get(_line_of(n)) for n in upstream)), None)
        )

    return explain


def _line_of(node: Any) -> tuple[str, int] | None:
    from coreml_lint.verifier.localize import source_of

    source, _ = source_of(node)
    path, _, line = (source or "").rpartition(":")
    return (path, int(line)) if line.isdigit() else None


def findings_of(report: VerifyReport, file: str, lint: list[Finding]) -> list[Finding]:
    """One finding per divergence, and one for a crash; each names the lint rule that
    predicted it (a crash: :func:`crash_predictions`, as Core ML's ``lower`` asks) or
    explains it (a divergence: a finding on its node or upstream of it, else on its line)."""
    by_line = rules_by_line(value_explanations(lint, warnings=False))
    found = [_divergence(d, file, by_line) for d in report.divergences]
    if report.lowering_error:
        found.append(_crash(report, file, lint))
    return found


def _crash(report: VerifyReport, file: str, lint: list[Finding]) -> Finding:
    """The crash at the model source line the converter names; without one, at the line of
    the one finding on the op the error names (``unsupported ATen ops: aten.X``)."""
    message = report.lowering_error or ""
    path, line = crash_location(message)
    at = (path, line) if path and line else None
    predicted = crash_predictions(lint, message, at)
    if at is not None:  # the finding's own location shows the source line
        places = [f.location for f in predicted if f.location is not None]
        here = [p for p in places if (p.path, p.line) == at]
        location = here[0] if here else Location(path, line)
    else:
        named = {f.location for f in predicted if f.location and f.op and f.op in message}
        location = named.pop() if len(named) == 1 else None
    return CoreAICrash.make_finding(
        f"crashed in {report.lowering_stage}: {message[:400]}",
        file=file,
        location=location,
        fix=predicted_fix(
            predicted,
            "no Core AI rule predicted it: `coreml-lint --target coreai` lists those that did",
        ),
        extra={"rule": predicted[0].code if predicted else None},
    )


def _divergence(d: Divergence, file: str, by_line: dict[tuple[str, int], str]) -> Finding:
    location = None
    if d.source and ":" in d.source:
        path, _, line = d.source.rpartition(":")
        if line.isdigit():
            location = Location(path, int(line), None, d.code)
            d.rule = d.rule or by_line.get((path, int(line)))
    fix = (
        f"explained by {d.rule}: see `coreml-lint rule {d.rule}`"
        if d.rule
        else "no Core AI rule explains it: compute the value another way and verify again"
    )
    return CoreAIDivergence.make_finding(
        f"[{d.check}] {d.output}: {d.message}",
        file=file,
        node=d.node,
        op=d.target,
        location=location,
        fix=fix,
        extra={"check": d.check, "kind": d.kind, "numbers": d.numbers, "rule": d.rule},
    )
