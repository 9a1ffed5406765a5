"""Measure a group of cases: export one program, key each case's op node the way CML801
keys a user's program, lower with the stock ``CoreMLPartitioner``, and judge the result
with the ``verify`` oracle (typical values, then extreme ones).

Outcomes per case:

- ``crash``: the stock lowering raised (the exception's first line);
- ``wrong``: it lowered, and the Core ML program computes other values than eager on
  typical inputs (``verify``: a divergence in the float32 or float16 pass or the interface);
- ``edge``: right on typical values, wrong with NaN, infinities or values at the limits of
  float16 (the first divergence says which);
- ``ok``: right on both;
- ``unverified``: it lowered, but the interpreter cannot execute a MIL op it produced;
- ``cpu``: the stock partitioner did not delegate the op (or not all of it).

A group answers only for what it can attribute: when it crashes or anything in it is not
*ok*, the runner measures its cases one by one (``split``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from coreml_lint.measured.case import Case, result_of
from coreml_lint.measured.key import KeyMaker, MeasuredKey, measured_key
from coreml_lint.measured.outcomes import AT_ZERO
from coreml_lint.sweep.build import CONSUMED, CONTEXT_OPS, build

SPLIT = "split"


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def innermost(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


def measure(cases: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
    """Per-case results, or ``SPLIT`` when a group cannot attribute what it saw."""
    import torch

    single = len(cases) == 1
    with torch.no_grad():  # as an export for inference is made; scoped, never process-wide
        built = build(cases)
        try:
            ep = torch.export.export(built.module, tuple(built.inputs), strict=False)
        except Exception as exc:
            return [result_of(c, "export", first_line(exc)) for c in cases] if single else SPLIT
        keys = case_keys(ep, cases)
        return _lower_and_judge(ep, cases, built, keys, single)


def keys_of(cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]] | None:
    """Each case's keys as the linter computes them today, from its exported program alone
    (no lowering): what ``sweep rekey`` gives measured results when the key changes. None
    when the group does not export (its cases are then keyed one by one)."""
    import torch

    with torch.no_grad():
        built = build(cases)
        try:
            ep = torch.export.export(built.module, tuple(built.inputs), strict=False)
        except Exception:
            return None
        return case_keys(ep, cases)


def _lower_and_judge(ep, cases, built, keys, single) -> list[dict[str, Any]] | str:
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.stack import lower_stock
    from coreml_lint.verifier.api import verify_lowered

    target = cases[0]["target"]
    lowering = lower_stock(ep, PartitionerSettings(minimum_deployment_target=target))
    if lowering.error is not None:
        if not single:
            return SPLIT
        return [result_of(cases[0], "crash", first_line(lowering.error), keys[0])]
    placed = delegated(lowering.edge.exported_program(), len(cases))
    logging.disable(logging.WARNING)
    only_at_zero = False
    try:
        report = verify_lowered(lowering.edge, lowering.mlmodels, inputs=list(built.inputs))
        extreme = None
        if report.status == "agree":
            extreme = verify_lowered(lowering.edge, lowering.mlmodels, inputs=list(built.extreme))
        elif single and report.status == "diverge" and (nonzero := _zero_free(built.inputs)):
            plain = verify_lowered(lowering.edge, lowering.mlmodels, inputs=nonzero)
            only_at_zero = plain.status == "agree"  # wrong only at the zeros inputs hold
    finally:
        logging.disable(logging.NOTSET)
    if not single and report.status != "agree":
        return SPLIT
    edges = _edge_cases(lowering.edge.exported_program(), extreme, len(cases))
    if edges is None:
        return SPLIT
    results = []
    for i, case in enumerate(cases):
        if not placed[i]:
            why = "not delegated by the stock partitioner"
            results.append(result_of(case, "cpu", why, keys[i]))
            continue
        outcome, message = _judge(report, edges.get(i))
        if only_at_zero:
            message = (AT_ZERO + message)[:300]
        if outcome in ("wrong", "edge") and order_free(case):
            outcome, message = "unverified", f"{UNORDERED} ({message})"[:300]
        results.append(result_of(case, outcome, message, keys[i]))
    return results


def _zero_free(inputs: list[Any]) -> list[Any] | None:
    """The typical inputs with their zeros (``values._floats`` puts -0.0 first in every
    float operand) made 0.5, or None when no input holds one. A call wrong only there
    (``atan2(0, x)`` for negative ``x``: pi in torch, 0 in Core ML) depends on values, as
    a call wrong only at a limit of float16 does: the sweep records it wrong with
    ``outcomes.AT_ZERO`` before its divergence, which the lint reports as a warning."""
    if not any(t.is_floating_point() and bool((t == 0).any()) for t in inputs):
        return None
    return [t.masked_fill(t == 0, 0.5) if t.is_floating_point() else t for t in inputs]


UNORDERED = "the op's output order is unspecified (sorted=False): values compared in order"
ORDER_ARGS = {"topk.default": 4, "unique_dim.default": 2, "_unique2.default": 1}


def order_free(case: dict[str, Any]) -> bool:
    """A call whose outputs torch leaves in an unspecified order (``topk(sorted=False)``):
    the oracle compares elementwise, so a different order is no evidence of wrong values."""
    index = ORDER_ARGS.get(case["op"])
    if index is None:
        return False
    given = case["args"][index] if len(case["args"]) > index else case["kwargs"].get("sorted")
    return given is False


def _judge(report: Any, edge: Any) -> tuple[str, str]:
    if report.status == "diverge":
        return "wrong", _divergence(report.divergences[0])
    if report.status != "agree":
        return "unverified", "; ".join(report.not_verified)[:300] or report.status
    if edge is not None:
        return "edge", _divergence(edge)
    return "ok", ""


def _divergence(d: Any) -> str:
    return f"{d.check} {d.kind} ({d.mil_op or 'output'}): {d.message}"[:300]


def _edge_cases(edge_ep: Any, extreme: Any, count: int) -> dict[int, Any] | None:
    """Case index -> its first divergence on extreme values, or None when a divergence
    cannot be told to one case (the group is then measured case by case)."""
    if extreme is None or extreme.status != "diverge":
        return {}
    if count == 1:
        return {0: extreme.divergences[0]}
    from coreml_lint.verifier.api import coreml_delegates

    delegates = coreml_delegates(edge_ep)
    found: dict[int, Any] = {}
    for d in extreme.divergences:
        if d.node is None or d.partition >= len(delegates):
            return None
        graph = delegates[d.partition][1].original_module.graph
        node = next((n for n in graph.nodes if n.name == d.node), None)
        path = innermost(node).split(".")[0] if node is not None else ""
        if not path.startswith("c") or not path[1:].isdigit():
            return None
        found.setdefault(int(path[1:]), d)
    return found


def delegated(edge_ep: Any, count: int) -> list[bool]:
    """Per case: whether none of its op's nodes stayed in the top-level (CPU) graph."""
    on_cpu = set()
    for node in edge_ep.graph.nodes:
        if node.op != "call_function" or "executorch_call_delegate" in str(node.target):
            continue
        if "getitem" in str(node.target):
            continue
        path = innermost(node)
        if path.startswith("c") and "." not in path:
            on_cpu.add(path)
    return [f"c{i}" not in on_cpu for i in range(count)]


def case_keys(ep: Any, cases: list[Case]) -> list[list[MeasuredKey]]:
    """Per case, the key of each of its op's nodes as the linter sees them: the canonical
    graph of the exported program, placed as the linter predicts at the case's target."""
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.engine.exported import graph_of
    from coreml_lint.program.canonical import canonicalize
    from coreml_lint.program.placement import COREML, predict_placement

    graph = canonicalize(graph_of(ep))
    settings = PartitionerSettings(minimum_deployment_target=cases[0]["target"])
    placement = predict_placement(graph, settings)
    maker = KeyMaker(graph, placement)
    users = graph.users()
    found: list[list[MeasuredKey]] = [[] for _ in cases]
    for index, node in case_nodes(ep, graph):
        where = placement.nodes[node.name]
        context = context_seen(cases[index], node, users)
        placed = where.where if where.where != COREML or not where.decomposed else "dec"
        found[index].append(measured_key(maker.key(node), context, placed))
    return found


def case_nodes(ep: Any, graph: Any) -> Iterator[tuple[int, Any]]:
    """(case index, node) of every canonical node a case's own op became: the nodes under
    the case's module ``c<index>`` (the sweep's and Core AI's keys alike)."""
    paths = {n.name: innermost(n) for n in ep.graph.nodes}
    for node in graph.nodes:
        path = paths.get(node.name) or paths.get(node.origin or "", "")
        if path.startswith("c") and "." not in path:
            yield int(path[1:]), node


def context_seen(case: Case, node: Any, users: dict[str, list[Any]]) -> str:
    """The context the case measured as the program shows it at ``node`` (``"?"`` when
    the program did not make it: the case is then not keyed)."""
    wanted = case.get("context")
    readers = [u.target for out in node.outputs for u in users.get(out, [])]
    if wanted == CONSUMED:
        return CONSUMED if readers else "?"
    if wanted:
        return CONTEXT_OPS[wanted] if CONTEXT_OPS[wanted] in readers else "?"
    return ""
