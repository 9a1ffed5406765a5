"""``--fix`` / ``--diff`` in a check run: every model source is fixed in one pass, the files
given (all their findings) and the ones program findings point to inside the project; a
program finding no fix reached says why.

Fixes never write outside the run's roots (the project root and the paths given).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from coreml_lint.core.files import is_within
from coreml_lint.core.findings import Finding

if TYPE_CHECKING:
    from coreml_lint.checking.run import CheckRun

# A model file -> the (code, line) pairs program findings point to there, and those findings.
Targets = dict[Path, tuple[set[tuple[str, int]], list[Finding]]]


def fix_sources(run: CheckRun, sources: list[Path], program_findings: list[Finding]) -> None:
    """Fix every source file once, and leave on ``run.findings`` what is left of both kinds
    (a program finding is kept with ``--diff``, and whenever a node it stands for was not
    fixed). Their rules place the program findings' fixes with what the program knows, or
    the rule's own source check at the finding's line does."""
    from coreml_lint.fixers.relocate import relocate
    from coreml_lint.fixers.session import FixSession

    for note in relocate(program_findings, run.roots[0]):  # a .pt2 made elsewhere
        if note:
            run.say(note)
    pointed = program_targets(program_findings, run.roots)
    given = {path.resolve() for path in sources}
    jobs: list[tuple[Path, Any, tuple[Finding, ...]]] = []
    for path in sources:
        lines, guided = pointed.get(path.resolve(), (None, []))
        jobs.append((path, None, tuple(guided)))
    for path, (lines, guided) in pointed.items():
        if path not in given:
            jobs.append((path, lines, tuple(guided)))
    session = FixSession(run.config, unsafe=run.unsafe, write=not run.diff)
    fixed: set[int] = set()
    at_line: set[tuple[Path, str, int]] = set()
    unsafe_at: set[tuple[Path, str, int]] = set()  # a source fix there needs --unsafe-fixes
    for (path, lines, guided), outcome in zip(jobs, session.fix_files(jobs), strict=True):
        if outcome.error:
            run.errors.append(outcome.error)
        unsafe_at.update(
            (path.resolve(), f.code, f.location.line)
            for f in outcome.findings
            if f.edit is not None and not f.edit.safe and f.location is not None
        )
        if outcome.result is not None:
            run.fix_results.append(outcome.result)
            resolved = path.resolve()
            at_line.update((resolved, f.rule, f.line) for f in outcome.result.applied)
        if lines is None:
            run.findings.extend(outcome.findings)
        for finding, state in zip(guided, outcome.guided, strict=False):
            if state == "fixed":
                fixed.add(id(finding))
            elif state is not None:
                finding.extra["not_fixed"] = state
    for finding in program_findings:
        done = _all_fixed(finding, fixed, at_line)  # also when --diff: the reason
        if not done and not finding.extra.get("not_fixed"):
            finding.extra["not_fixed"] = unfixed_reason(finding, unsafe_at, run.unsafe)
        if run.diff or not done:
            run.findings.append(finding)


def program_targets(program_findings: list[Finding], roots: list[Path]) -> Targets:
    """Per model file inside ``roots``: the (code, line) pairs program findings point to,
    and those findings. A finding outside the roots, or on a line that is no longer the
    exported code, gets its reason instead (nothing is guessed there)."""
    from coreml_lint.rulekit.context import changed_since_export

    pointed: Targets = {}
    texts: dict[Path, list[str] | None] = {}
    for finding in program_findings:
        loc = finding.location
        if loc is None or not loc.path.endswith(".py") or not Path(loc.path).is_file():
            continue
        if not is_within(loc.path, roots):
            finding.extra["not_fixed"] = "its model source is outside the project"
            continue
        path = Path(loc.path).resolve()
        if path not in texts:
            texts[path] = _read_lines(path)
        stale = changed_since_export(finding, texts[path])
        if stale:
            finding.extra["not_fixed"] = stale
            continue
        lines, guided = pointed.setdefault(Path(loc.path).resolve(), (set(), []))
        lines.add((finding.code, loc.line))
        guided.extend([finding, *finding.merged])  # each node's modules, placed apart
    return pointed


def _read_lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def _all_fixed(finding: Finding, fixed: set[int], at_line: set[tuple[Path, str, int]]) -> bool:
    """Whether the fix reached every node a (merged) program finding stands for: each was
    placed by its rule, or the rule's source check fixed its line. When one was not, the
    finding says why."""
    loc = finding.location
    if loc is not None and (Path(loc.path).resolve(), finding.code, loc.line) in at_line:
        return True
    parts = [finding, *finding.merged]
    missed = [part for part in parts if id(part) not in fixed]
    if missed and "not_fixed" not in finding.extra:
        reason = next((p.extra["not_fixed"] for p in missed if "not_fixed" in p.extra), None)
        if reason is not None:
            finding.extra["not_fixed"] = reason
    return not missed


def unfixed_reason(finding: Finding, unsafe_at: set[tuple[Path, str, int]], unsafe: bool) -> str:
    """Why a program finding that no fix placed is left (every one gets a reason)."""
    from coreml_lint.rules import rule_by_code

    loc = finding.location
    if loc is None:
        return "it points to no model source line"
    if not loc.path.endswith(".py") or not Path(loc.path).is_file():
        return f"its model source {loc.path} is not a Python file on disk"
    if (Path(loc.path).resolve(), finding.code, loc.line) in unsafe_at and not unsafe:
        return "the fix may change numerics: --unsafe-fixes"
    rule = rule_by_code(finding.code)
    if rule is None or not rule.fixes_source():  # flagged in source, maybe, not fixed
        return f"{finding.code} has no source fix: change the model as its fix says"
    return (
        f"the source at line {loc.line} is not the pattern {finding.code}'s source fix "
        "rewrites: change it as the finding's fix says"
    )
