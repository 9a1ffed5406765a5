"""``coreml-lint lower``: lint, rewrite, lint again, refuse, lower with the real partitioner,
prove it.

The loop knows no rule: it asks the rules that fired for their lowering answers (the hooks
of ``rulekit/rule.py``) and reports which rule's hook did what. A program the linter finds
nothing in is lowered with exactly the stock ``CoreMLPartitioner``'s placement. An error the
rules have no answer for stops ``lower`` before it lowers anything, with the rule's one line
on what to do instead: the stock lowering would only fail the way the finding says.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from coreml_lint.core.config import LintConfig
from coreml_lint.core.findings import Finding, Severity, crash_predictions
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.engine.exported import lint_exported_program
from coreml_lint.engine.program import ProgramReport
from coreml_lint.lowering.eager import outputs_match, random_inputs
from coreml_lint.lowering.mil import mil_problems
from coreml_lint.lowering.partitioner import LoweringPlan, SafeCoreMLPartitioner
from coreml_lint.lowering.relower import DIVERGENCE, Learned, delegate_lineages
from coreml_lint.lowering.report import Delegation, LowerReport
from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import rule_by_code

Progress = Callable[[str], None]


class LoweringError(Exception):
    """Lowering failed; the message names the stage, the error, and what the lint knew.
    ``failures``: the nodes the converter failed on, when the lowering itself crashed."""

    def __init__(self, message: str, failures: list[Any] | None = None) -> None:
        super().__init__(message)
        self.failures = failures


@dataclass
class LowerResult:
    program: Any  # ExecutorchProgramManager
    report: LowerReport

    @property
    def buffer(self) -> bytes:
        return self.program.buffer


def lower(
    exported_program: ExportedProgram,
    *,
    settings: PartitionerSettings | None = None,
    compute_precision: str = "float16",
    compute_units: str = "all",
    progress: Progress | None = None,
    verify: bool = False,
    verify_inputs: Any = None,
    dequantize_on_cpu: bool = False,
    **partitioner: Any,
) -> LowerResult:
    """Use instead of ``to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(...)])``
    followed by ``to_executorch()``. Pass the partitioner's settings as ``settings`` or as
    keyword arguments (``minimum_deployment_target=17``, ``skip_ops_for_coreml_delegation=[...]``,
    ...). With ``verify``, every Core ML delegate of the result is run on Linux against its
    eager module (``verify_inputs``: the program's inputs, or None for the example inputs
    saved with the program, as ``verify`` takes them, else seeded random ones), and a
    rewrite is kept only if the result verifies (see :func:`_keep_verified_rewrites`). With
    ``dequantize_on_cpu``, quantized weights the deployment target cannot keep quantized are
    dequantized on the CPU where ExecuTorch has a kernel for it (Core ML then computes with
    float weights); without it, ``lower`` stops and names the target to use."""
    settings = (settings or PartitionerSettings()).changed(
        **{k: v for k, v in partitioner.items() if v is not None}
    )
    job = _Job(
        exported_program,
        LintConfig(partitioner=settings),
        compute_precision,
        compute_units,
        dequantize_on_cpu,
        progress or (lambda message: None),
    )
    inputs = _verify_inputs(exported_program, verify_inputs) if verify else None
    attempt = _lower_learning(job)
    if verify:
        attempt.verify(inputs, job.say)
        if attempt.diverged and attempt.result.report.rewritten_codes:
            attempt = _keep_verified_rewrites(job, attempt, inputs)
        attempt = _learn_from_divergence(job, attempt, inputs)
    job.say("done")
    return attempt.result


# The inputs verify feeds the lowered program, and how each was made ("example float32[4,
# 16]"; none said for the user's own, which the verifier describes as given).
_Inputs = tuple[Any, list[str]]


def _verify_inputs(program: ExportedProgram, given: Any) -> _Inputs | None:
    """The user's inputs, else the example inputs ``torch.export.save`` kept in the
    ``.pt2``, as ``coreml-lint verify`` takes them (seeded random ones when there are none).
    Chosen on the program as given: the lowered edge program no longer carries them."""
    if given is not None:
        return given, []
    from coreml_lint.verifier.inputs import default_inputs

    try:
        made, how = default_inputs(program)
    except ValueError:  # a dynamic program without examples: verify says why
        return None
    described = [
        f"{kind} {str(value.dtype).replace('torch.', '')}{list(value.shape)}"
        if hasattr(value, "dtype")
        else f"{kind} {type(value).__name__}"
        for value, kind in zip(made, how, strict=True)
    ]
    return made, described


@dataclass
class _Attempt:
    """One lowering of the program, with what ``verify`` needs to run its delegates."""

    result: LowerResult
    edge: Any  # the EdgeProgramManager
    models: list[Any]  # the MlModels, in delegate order
    linted: Any = None  # the lint of the program lowered (after the rewrites)
    lineages: dict[str, list[str]] = field(default_factory=dict)  # edge node -> made from
    aten: dict[str, str] = field(default_factory=dict)  # the ATen nodes lowered -> their ops

    def verify(self, inputs: _Inputs | None, say: Progress) -> None:
        from coreml_lint.verifier import verify_lowered
        from coreml_lint.verifier.report import VerifyReport

        say("verifying every Core ML delegate against eager")
        values, described = inputs or (None, [])
        report = verify_lowered(
            self.edge,
            self.models,
            inputs=values,
            progress=say,
            report=VerifyReport(inputs=list(described)),
        )
        self.result.report.verify = report
        if report.status == "diverge":  # what a located divergence maps back to, kept
            self.lineages = delegate_lineages(self.edge)

    def release(self) -> None:
        """Drop what only ``verify`` needed (the edge program, the MlModels)."""
        self.edge, self.models = None, []

    @property
    def verified(self) -> bool:
        report = self.result.report.verify
        return report is not None and report.status == "agree"

    @property
    def diverged(self) -> bool:
        report = self.result.report.verify
        return report is not None and report.status == "diverge"


@dataclass
class _Job:
    """What one call of :func:`lower` lowers, and how: every attempt starts from here."""

    program: ExportedProgram
    config: LintConfig
    compute_precision: str
    compute_units: str
    dequantize_on_cpu: bool
    say: Progress
    learned: Learned = field(default_factory=Learned)  # nodes the lowering showed for the CPU
    linted: Any = None  # the lint of the program the latest attempt lowered
    decomposed: dict[str, str] = field(default_factory=dict)  # the latest attempt's (plan's)

    def attempt(self, *, without: frozenset[str]) -> _Attempt:
        """Lint, rewrite (except for the rules in ``without``), lint again, refuse, lower."""
        say, dequantize = self.say, self.dequantize_on_cpu
        say("linting the program")
        first = lint_exported_program(self.program, self.config)
        stop_if_a_rule_failed(first)
        stop_if_unanswered(first.findings, dequantize_on_cpu=dequantize)
        report = LowerReport.start(first, self.config.partitioner)
        say("functionalizing (run_decompositions({}))")
        ep = self.program.run_decompositions({})
        ep, second = _rewrite_until_stable(ep, first, self.config, report, say, without)
        stop_if_unanswered(second.findings, dequantize_on_cpu=dequantize)
        self.linted = second
        self.learned.bind(ep)
        rules = [rule() for rule in _fired(second)] + self.learned.rules()
        plan = LoweringPlan.for_rules(rules, self.config.partitioner, dequantize_on_cpu=dequantize)
        self.decomposed = plan.decomposed  # filled as the partitioner asks
        models: list[Any] = []
        program, placed, edge = _lower_with(
            ep, plan, models, self.compute_precision, self.compute_units, second, say
        )
        report.finish(second, plan, placed, mil_problems(models, self.program))
        report.record_moves(list(self.learned.moves.values()))
        return _Attempt(LowerResult(program, report), edge, models, second, aten=self.learned.aten)


def _lower_learning(job: _Job) -> _Attempt:
    """Lower; when the converter crashes on a node it names, keep that node on the CPU and
    lower again (``relower.py``: a bounded number of times). A crash that names no node
    stops ``lower`` as it is, saying why nothing was moved."""
    while True:
        try:
            return job.attempt(without=frozenset())
        except LoweringError as exc:
            if exc.failures is None:  # not a crash of the lowering (a refusal before it)
                raise
            move = job.learned.from_crash(exc.failures, job.decomposed)
            if isinstance(move, str):
                raise LoweringError(f"{exc}; nothing moved to the CPU: {move}{_after(job)}") from (
                    exc.__cause__
                )
            job.learned.learn(move, job.linted, job.say)


def _after(job: _Job) -> str:
    moved = ", ".join(job.learned.moves)
    return f" (after moving {moved} to the CPU)" if moved else ""


def _learn_from_divergence(job: _Job, attempt: _Attempt, inputs: Any) -> _Attempt:
    """While the result diverges at a node ``verify`` locates, keep that node on the CPU and
    lower again (bounded as for crashes); the first result that verifies replaces the
    result. When a retry cannot be lowered, the result before it stands, saying so."""
    while attempt.diverged:
        report = attempt.result.report.verify
        move = job.learned.from_divergence(report.divergences, attempt.lineages, attempt.aten)
        if isinstance(move, str):
            report.notes.append(f"nothing moved to the CPU: {move}")
            return attempt
        job.learned.learn(move, attempt.linted, job.say)
        attempt.release()
        try:
            retry = _lower_learning(job)
        except LoweringError as exc:
            report.notes.append(f"moving {move.node} to the CPU did not lower: {exc}")
            return attempt
        retry.verify(inputs, job.say)
        retry.result.report.verify.notes[:0] = report.notes  # what was tried before, kept
        attempt = retry
    return _without_needless_moves(job, attempt, inputs)


def _without_needless_moves(job: _Job, attempt: _Attempt, inputs: Any) -> _Attempt:
    """A divergence is located at the first var that departs among those ``verify`` can
    match, which may only carry the departure of an op it cannot match: so once the result
    verifies, each node moved for a divergence before the last is tried back on Core ML,
    and stays there when the result still verifies without it."""
    moves = [m for m in job.learned.moves.values() if m.kind == DIVERGENCE]
    for move in moves[:-1] if attempt.verified else []:
        kept = dict(job.learned.moves)
        del job.learned.moves[move.node]
        job.say(f"trying {move.node} back on Core ML: was moving it needed?")
        try:
            retry = _lower_learning(job)
            retry.verify(inputs, job.say)
        except LoweringError:
            retry = None
        if retry is not None and retry.verified:
            attempt.release()
            retry.result.report.verify.notes[:0] = attempt.result.report.verify.notes
            attempt = retry
            attempt.result.report.verify.notes.append(
                f"{move.node} was kept on Core ML: verify had located a divergence at it, "
                "but the result verifies with it there once a later node moved"
            )
        else:
            job.learned.moves = kept
    return attempt


def _keep_verified_rewrites(job: _Job, attempt: _Attempt, inputs: Any) -> _Attempt:
    """A rewrite is kept only if the result verifies. When it does not, lower again without
    one rewrite at a time (the last applied first), then without all of them; the first
    attempt that verifies replaces the result, and the report says which rewrite was
    dropped and why. When none does (the divergence is not a rewrite's doing, or without the
    rewrite the program cannot be lowered), the first result stands, and its verify report
    says what was tried: ``lower`` exits 1 on the divergence either way."""
    codes = attempt.result.report.rewritten_codes
    trials = [frozenset({code}) for code in reversed(codes)]
    if len(codes) > 1:
        trials.append(frozenset(codes))
    divergences = attempt.result.report.verify.divergences
    first = divergences[0].summary() if divergences else "a partition diverged"
    attempt.release()  # one lowering held at a time: the retries may be as large
    tried = []
    for without in trials:
        what = _rewrites_of(without)
        job.say(f"the result diverges: lowering again without {what}")
        try:
            retry = job.attempt(without=without)
        except LoweringError as exc:
            tried.append(f"without {what}: {exc}")
            continue
        retry.verify(inputs, job.say)
        if retry.result.report.verify.status == "agree":
            retry.result.report.dropped_rewrites = [
                f"{what}: dropped: with {'them' if len(without) > 1 else 'it'} a Core ML "
                f"delegate diverged in verify ({first}); without, {_verified(retry)}"
            ]
            return retry
        tried.append(f"without {what}: verify {retry.result.report.verify.status}")
    attempt.result.report.verify.notes.extend(
        f"rewrites kept, since dropping them did not help: {line}" for line in tried
    )
    return attempt


def _rewrites_of(codes: frozenset[str]) -> str:
    names = ", ".join(sorted(codes))
    return f"the rewrites of {names} (together)" if len(codes) > 1 else f"the rewrite of {names}"


def _verified(attempt: _Attempt) -> str:
    if attempt.result.report.verify.partitions:
        return "every Core ML delegate verifies"
    return "nothing is left on Core ML (the rules keep it on the CPU), so nothing diverges"


MAX_REWRITE_ROUNDS = 3


def _rewrite_until_stable(
    ep: ExportedProgram,
    first: ProgramReport,
    config: LintConfig,
    report: Any,
    say: Progress,
    without: frozenset[str] = frozenset(),
) -> tuple[ExportedProgram, ProgramReport]:
    """Apply the rewrites of the rules that fired (except the rules in ``without``), lint
    again, and repeat for rules a rewrite made fire (a checked rewrite is a new program: a
    buffer that was no leaf in memory is one after the save/load copy the check works on,
    for instance)."""
    tried: set[str] = set(without)
    latest = first
    for _ in range(MAX_REWRITE_ROUNDS):
        rules = [
            r for r in _rewriting(latest) if r.code not in tried and "rewrite" in r.lowering_hooks()
        ]
        if not rules:
            break
        tried.update(r.code for r in rules)
        ep = _apply_rewrites(ep, rules, config.partitioner, report, say)
        say("linting the rewritten program")
        latest = lint_exported_program(ep, config)
    if latest is first:  # nothing to rewrite: the functional program, linted as it is
        latest = lint_exported_program(ep, config)
    return ep, latest


def stop_if_a_rule_failed(report: ProgramReport) -> None:
    """A rule that raised while linting left its pitfall unanswered: lowering without its
    answer could crash or mislower, so ``lower`` stops and names it."""
    if report.internal_errors:
        lines = "; ".join(f"{f.code} ({f.name}): {f.error}" for f in report.internal_errors)
        raise LoweringError(f"not lowered, internal error in {lines} (please report it)")


def stop_if_unanswered(findings: list[Finding], *, dequantize_on_cpu: bool = False) -> None:
    """Raise, before any lowering, when an error finding is one ``lower`` has no answer for
    (``Rule.unanswered``): one line per such finding, saying what to do instead."""
    lines = []
    for finding in findings:
        rule = rule_by_code(finding.code)
        if finding.severity is not Severity.ERROR or rule is None:
            continue
        why = rule().unanswered(finding, dequantize_on_cpu=dequantize_on_cpu)
        if why and f"{finding.code}: {why}" not in lines:
            lines.append(f"{finding.code}: {why}")
    if lines:
        raise LoweringError("not lowered, " + "; ".join(lines))


def _fired(report: ProgramReport) -> list[type[Rule]]:
    """The rules with an error finding, in code order."""
    codes = sorted({f.code for f in report.findings if f.severity is Severity.ERROR})
    return [rule for rule in map(rule_by_code, codes) if rule is not None]


def _rewriting(report: ProgramReport) -> list[type[Rule]]:
    """The rules whose rewrite ``lower`` applies: those with an error finding, and those
    with a warning their rewrite answers exactly (``Finding.rewrite_as_warning``)."""
    codes = {
        f.code for f in report.findings if f.severity is Severity.ERROR or f.rewrite_as_warning
    }
    return [rule for rule in map(rule_by_code, sorted(codes)) if rule is not None]


def _copy(ep: ExportedProgram) -> ExportedProgram:
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    return torch.export.load(buffer)


def _apply_rewrites(
    ep: ExportedProgram,
    rules: list[type[Rule]],
    settings: PartitionerSettings,
    report: LowerReport,
    say: Progress,
) -> ExportedProgram:
    """Each fired rule's rewrite (given the settings lowered with, so an answer that depends
    on the target can ask), kept only when the program still computes the same."""
    inputs = random_inputs(ep)
    for rule in rules:
        if "rewrite" not in rule.lowering_hooks():
            continue
        say(f"rewriting for {rule.code} {rule.name}")
        try:
            answer = rule()
            candidate, changes = answer.rewrite(_copy(ep), settings)
            if not changes:
                continue
            checked_on = answer.check_inputs(inputs) if inputs is not None else None
            same = checked_on is None or outputs_match(
                ep, candidate, checked_on, rule.rewrite_tolerance
            )
        except Exception as exc:  # a rewrite that does not fit this graph is not applied
            report.reject(rule.code, f"not applied ({type(exc).__name__}: {str(exc)[:160]})")
            continue
        if not same:
            report.reject(rule.code, "outputs differ from the original program in eager")
            continue
        report.rewritten(rule.code, changes, checked=inputs is not None)
        ep = candidate
    return ep


def _lower_with(
    ep: ExportedProgram,
    plan: LoweringPlan,
    models: list[Any],
    precision: str,
    units: str,
    second: ProgramReport,
    say: Progress,
) -> tuple[Any, Delegation, Any]:
    """The real ``to_edge_transform_and_lower`` + ``to_executorch`` with the plan's
    partitioner; a failure names its stage and what the lint knew about it."""
    from coreml_lint.stack import compile_specs, lower_program

    specs = compile_specs(plan.settings, precision=precision, units=units)
    partitioner = SafeCoreMLPartitioner(plan, compile_specs=specs)
    placed: list[Delegation] = []

    def seen(edge: Any) -> None:
        placed.append(Delegation.of(edge.exported_program()))  # before to_executorch
        say("building the ExecuTorch program (to_executorch)")

    say("lowering (to_edge_transform_and_lower)")
    lowering = lower_program(
        ep, partitioner, after_edge=seen, transform_passes=[partitioner.bridge_pass()]
    )
    models.extend(lowering.mlmodels)
    if lowering.error is not None:
        raise LoweringError(
            describe_failure(lowering.stage, lowering.error, second.findings, plan),
            failures=lowering.failures,
        ) from lowering.error
    return lowering.program, placed[0], lowering.edge


def describe_failure(
    stage: str, exc: BaseException, findings: list[Finding], plan: LoweringPlan
) -> str:
    """The stage, the error's first line, the predictions lower had no answer for, and the
    rules whose answers were applied (named, not blamed: their answer was not enough)."""
    text = str(exc).strip()
    first_line = text.splitlines()[0] if text else ""
    errors = {f.code for f in findings if f.severity is Severity.ERROR}
    predicted = {f.code for f in crash_predictions(findings, text)}
    unanswered = sorted(predicted - set(plan.acted))
    answered = sorted(errors & set(plan.acted))
    notes = []
    if unanswered:
        notes.append(f"coreml-lint predicted it: {', '.join(unanswered)}")
    if answered:
        notes.append(f"after applying coreml-lint's answers to {', '.join(answered)}")
    if not predicted:
        notes.append("no coreml-lint rule predicted it")
    return (
        f"lowering failed in {stage}: {type(exc).__name__}: {first_line[:300]} ({'; '.join(notes)})"
    )


__all__ = ["LowerResult", "LoweringError", "describe_failure", "lower", "stop_if_unanswered"]
