"""``coreml-lint lower`` for a program of several methods (prefill + decode).

ExecuTorch lowers the methods of one program together,
``to_edge_transform_and_lower({"prefill": ep1, "decode": ep2}, partitioner=[...])``, and
its Core ML backend combines partition *i* of every method into one multifunction Core ML
model, so the methods share their weights (positional weight sharing). Each method gets
the same treatment as a single program (lint, the rules' checked rewrites, lint again);
then what the methods do together is checked (``Rule.check_methods``), and all of them
are lowered in one call with one plan: the union of the rules that fired in any method,
so a node is refused on Core ML the same way in every method.
"""

from __future__ import annotations

from typing import Any

from torch.export import ExportedProgram

from coreml_lint.core.config import LintConfig
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.engine.exported import graph_of, lint_exported_program
from coreml_lint.engine.program import lint_graph, method_findings
from coreml_lint.lowering.mil import mil_problems
from coreml_lint.lowering.partitioner import LoweringPlan, SafeCoreMLPartitioner
from coreml_lint.lowering.report import Delegation, LowerReport
from coreml_lint.lowering.run import (
    LoweringError,
    LowerResult,
    Progress,
    _fired,
    _rewrite_until_stable,
    describe_failure,
    stop_if_unanswered,
)


def lower_methods(
    programs: dict[str, ExportedProgram],
    *,
    settings: PartitionerSettings | None = None,
    compute_precision: str = "float16",
    compute_units: str = "all",
    progress: Progress | None = None,
    verify: bool = False,
    **partitioner: Any,
) -> LowerResult:
    """Lower ``{method: ExportedProgram}`` into one ``.pte`` with every rule's answer
    applied in each method (see :func:`coreml_lint.lower` for the settings). With
    ``verify``, each method's Core ML delegates are run on Linux against their eager
    modules, on random inputs shaped like the method's."""
    say = progress or (lambda message: None)
    settings = (settings or PartitionerSettings()).changed(
        **{k: v for k, v in partitioner.items() if v is not None}
    )
    config = LintConfig(partitioner=settings)
    report: LowerReport | None = None
    ready: dict[str, ExportedProgram] = {}
    linted = []
    for name, program in programs.items():
        ep, second, method_report = _prepare(name, program, config, say)
        ready[name], report = ep, _merged(report, method_report, name)
        linted.append(second)
    assert report is not None, "lower_methods needs at least one method"
    together = method_findings(linted, config)
    stop_if_unanswered(together)
    fired = {rule.code: rule for second in linted for rule in _fired(second)}
    plan = LoweringPlan.for_rules([rule() for rule in fired.values()], config.partitioner)
    program, placed, models, edge = _lower_together(
        ready, plan, compute_precision, compute_units, [*together, *report.findings_before], say
    )
    problems = [p for name in ready for p in mil_problems(models.get(name, []), programs[name])]
    second_findings = [f for second in linted for f in second.findings]
    report.finish(_Findings(second_findings), plan, placed, problems)
    if verify:
        report.verify = _verify_methods(edge, models, list(ready), say)
    say("done")
    return LowerResult(program, report)


class _Findings:
    """What ``LowerReport.finish`` reads of a lint report: its findings."""

    def __init__(self, findings: list[Any]) -> None:
        self.findings = findings


def _prepare(
    name: str, program: ExportedProgram, config: LintConfig, say: Progress
) -> tuple[ExportedProgram, Any, LowerReport]:
    """One method, as ``lower`` treats a single program up to the lowering itself; the
    lint report returned is of the rewritten program, named as the method."""
    say(f"{name}: linting")
    first = lint_exported_program(program, config)
    _stop(name, first.findings)
    report = LowerReport.start(first, config.partitioner)
    ep = program.run_decompositions({})
    ep, second = _rewrite_until_stable(ep, first, config, report, say)
    _stop(name, second.findings)
    graph = graph_of(ep, f"<{name}>")
    graph.method = name
    return ep, lint_graph(graph, config, advise=False), report


def _stop(name: str, findings: list[Any]) -> None:
    try:
        stop_if_unanswered(findings)
    except LoweringError as exc:
        raise LoweringError(f"method {name}: {exc}") from None


def _merged(into: LowerReport | None, method: LowerReport, name: str) -> LowerReport:
    """One report for all methods: findings, rewrites and rejections of each, named."""
    if into is None:
        into = LowerReport(list(method.findings_before), method.settings)
        into.partitions_before = 0
    into.findings_before.extend(f for f in method.findings_before if f not in into.findings_before)
    into.partitions_before += method.partitions_before
    into.rewrites.extend(f"{name}: {change}" for change in method.rewrites)
    into.rejected_rewrites.extend(f"{name}: {change}" for change in method.rejected_rewrites)
    for code in method.rewritten_codes:
        if code not in into.rewritten_codes:
            into.rewritten_codes.append(code)
    for code, actions in method.acted.items():
        into.acted.setdefault(code, []).extend(f"{name}: {action}" for action in actions)
    return into


def _lower_together(
    programs: dict[str, ExportedProgram],
    plan: LoweringPlan,
    precision: str,
    units: str,
    findings: list[Any],
    say: Progress,
) -> tuple[Any, Delegation, dict[str, list[Any]], Any]:
    """One ``to_edge_transform_and_lower({method: program})`` + ``to_executorch`` with the
    plan's partitioner. The backend converts method by method, partition by partition, so
    the captured models are split by each method's delegate count."""
    from coreml_lint.stack import compile_specs, lower_program

    specs = compile_specs(plan.settings, precision=precision, units=units)
    partitioner = SafeCoreMLPartitioner(plan, compile_specs=specs)
    placed: dict[str, Delegation] = {}

    def seen(edge: Any) -> None:
        for name in programs:
            placed[name] = Delegation.of(edge.exported_program(name))
        say("building the ExecuTorch program (to_executorch)")

    say(f"lowering {len(programs)} methods together (to_edge_transform_and_lower)")
    lowering = lower_program(
        dict(programs), partitioner, after_edge=seen, transform_passes=[partitioner.bridge_pass()]
    )
    if lowering.error is not None:
        raise LoweringError(
            describe_failure(lowering.stage, lowering.error, findings, plan)
        ) from lowering.error
    total = Delegation()
    models: dict[str, list[Any]] = {}
    remaining = list(lowering.mlmodels)
    for name, one in placed.items():
        total.delegates += one.delegates
        total.coreml_ops += one.coreml_ops
        total.cpu_ops.extend(one.cpu_ops)
        models[name], remaining = remaining[: one.delegates], remaining[one.delegates :]
    return lowering.program, total, models, lowering.edge


def _verify_methods(
    edge: Any, models: dict[str, list[Any]], names: list[str], say: Progress
) -> Any:
    """One verify report for all methods: each method's delegates against its eager run,
    partitions named ``method/partition``."""
    from coreml_lint.verifier import verify_lowered
    from coreml_lint.verifier.report import VerifyReport

    merged = VerifyReport()
    for name in names:
        say(f"{name}: verifying every Core ML delegate against eager")
        one = verify_lowered(edge.exported_program(name), models.get(name, []), progress=say)
        for part in one.partitions:
            part.name = f"{name}/{part.name}"
        merged.partitions.extend(one.partitions)
        merged.divergences.extend(one.divergences)
        merged.not_verified.extend(f"{name}: {item}" for item in one.not_verified)
        merged.notes.extend(f"{name}: {note}" for note in one.notes)
        merged.inputs.extend(f"{name}: {item}" for item in one.inputs)
    return merged.finish()
