"""Partitioner advice, checked by linting again: each finding's own, and the combined one.

A finding's own ``CoreMLPartitioner`` change is printed only when linting again with it
removes that finding and introduces no error; otherwise the finding says which findings the
change leads to (``not_enough``), and the change is dropped from the advice.

Each error finding may carry ``CoreMLPartitioner`` changes that avoid it. Taken together
they can conflict (a skip entry strands an op without a CPU kernel, a skipped cast leaves
a constant-only partition), so the advice is built one finding's changes at a time, each
kept only when linting again with it removes errors and introduces none, and it is
offered with honest counts: which error codes it avoids, which it leaves, which it
introduces. Advice that avoids nothing is not offered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coreml_lint.core.findings import Finding, Severity, partitioner_code
from coreml_lint.core.settings import PartitionerSettings

MAX_TRIALS = 8  # distinct advice candidates tried one by one; the rest are merged unchecked


@dataclass
class Advice:
    """Settings to lower with instead of ``base``, and what they do to the error findings."""

    base: PartitionerSettings
    settings: PartitionerSettings
    before: list[Finding]  # error findings with ``base``
    after: list[Finding]  # error findings with ``settings``
    checked: dict[str, Any] | None = field(default=None)  # --check-advice: the real outcome

    @property
    def avoids(self) -> list[str]:
        """Codes whose every error finding is gone with the advice."""
        return sorted({f.code for f in self.before} - {f.code for f in self.after})

    @property
    def leaves(self) -> list[str]:
        return sorted({f.code for f in self.after} & {f.code for f in self.before})

    @property
    def introduces(self) -> list[str]:
        return sorted({f.code for f in self.after} - {f.code for f in self.before})

    @property
    def avoided(self) -> int:
        """How many of the error findings the advice removes."""
        remaining = {_identity(f) for f in self.after}
        return sum(1 for f in self.before if _identity(f) not in remaining)

    @property
    def code(self) -> str:
        return self.settings.to_code()

    def to_json(self) -> dict[str, Any]:
        return {
            "partitioner": self.settings.to_json(),
            "code": self.code,
            "avoids": self.avoids,
            "leaves": self.leaves,
            "introduces": self.introduces,
            "errors_before": len(self.before),
            "errors_after": len(self.after),
            "checked": self.checked,
        }

    def headline(self) -> str:
        """One sentence with the honest counts."""
        parts = [f"avoid {self.avoided} of {len(self.before)} error finding(s)"]
        if self.avoids:
            parts[0] += f" ({', '.join(self.avoids)})"
        if self.leaves:
            parts.append(f"leave {', '.join(self.leaves)}")
        if self.introduces:
            parts.append(f"introduce {', '.join(self.introduces)}")
        return "; ".join(parts)


def _identity(finding: Finding) -> tuple[Any, ...]:
    loc = finding.location
    where = (loc.path, loc.line) if loc else (finding.node, finding.message)
    return (finding.code, finding.node, where)


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


def combined_advice(
    findings: list[Finding],
    base: PartitionerSettings,
    relint: Callable[[PartitionerSettings], list[Finding]],
) -> Advice | None:
    """Settings that avoid some of ``findings``' errors without introducing new ones, or
    None. ``relint`` lints the same program with other settings."""
    before = _errors(findings)
    candidates: list[dict[str, Any]] = []
    for finding in before:
        # A change that does not hold alone may still help with others: the combination
        # is linted again as a whole below.
        own = finding.partitioner or finding.extra.get("partitioner_not_enough", {}).get("advice")
        if own and own not in candidates:
            candidates.append(own)
    if not candidates:
        return None
    settings, after = base, before
    for advice in candidates[:MAX_TRIALS]:
        trial = settings.merged(advice)
        if trial == settings:
            continue
        errors = _errors(relint(trial))
        introduced = {f.code for f in errors} - {f.code for f in before}
        if len(errors) < len(after) and not introduced:
            settings, after = trial, errors
    for advice in candidates[MAX_TRIALS:]:
        settings = settings.merged(advice)
    if settings == base:
        return None
    if len(candidates) > MAX_TRIALS:
        after = _errors(relint(settings))
    result = Advice(base, settings, before, after)
    return result if result.avoided else None


def check_finding_advice(
    findings: list[Finding],
    base: PartitionerSettings,
    relint: Callable[[PartitionerSettings], list[Finding]],
) -> None:
    """Lint again with each finding's own partitioner change (once per distinct change):
    a change that leaves the finding or introduces an error is taken off the finding and
    recorded in ``extra["partitioner_not_enough"]`` with what linting again reported."""
    before = {_identity(f) for f in _errors(findings)}
    trials: dict[PartitionerSettings, list[Finding]] = {}
    for finding in findings:
        if not finding.partitioner:
            continue
        trial = base.merged(finding.partitioner)
        if trial not in trials and len(trials) >= MAX_TRIALS:
            finding.extra["partitioner_unchecked"] = True
            continue
        after = trials[trial] if trial in trials else trials.setdefault(trial, relint(trial))
        left = _identity(finding) in {_identity(f) for f in after}
        new = sorted({f.code for f in _errors(after) if _identity(f) not in before})
        if left or new:
            finding.extra["partitioner_not_enough"] = {
                "partitioner": partitioner_code(finding.partitioner),
                "advice": finding.partitioner,
                "leaves_this": left,
                "introduces": new,
            }
            finding.partitioner = None


def not_enough_sentence(record: dict[str, Any]) -> str:
    """What linting again with a finding's rejected partitioner change reported."""
    found = []
    if record["leaves_this"]:
        found.append("this finding")
    if record["introduces"]:
        found.append(", ".join(record["introduces"]))
    reports = " and ".join(found)
    return f"{record['partitioner']} is not enough: linting again with it reports {reports}"
