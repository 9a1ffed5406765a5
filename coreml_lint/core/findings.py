"""What a rule reports, in the shape every output format renders."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from coreml_lint.core.settings import PartitionerSettings


class Severity(str, Enum):
    """``error``: crashes at lowering/load or computes wrong values.
    ``warning``: CPU fallback, precision loss, a setting that does nothing.
    ``info``: worth knowing, nothing breaks."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Outcome(str, Enum):
    """What the user would meet without coreml-lint."""

    CRASH = "crash"  # an exception in to_edge_transform_and_lower / to_executorch
    LOAD_FAILURE = "load-failure"  # the .pte builds but fails to load or run
    SILENT = "silent"  # lowers, then computes wrong values or dtypes
    NO_EFFECT = "no-effect"  # a setting that changes nothing
    CPU = "cpu-fallback"
    NOT_LINTED = "not-linted"  # the input could not be read as what it claims to be


@dataclass(frozen=True)
class Location:
    """Where in the model source a finding points: from the node's stack trace."""

    path: str
    line: int
    column: int | None = None
    source_line: str | None = None


# A rule's libcst rewrite of one fix: ``(fix, node, edits) -> new node``, where ``node`` is
# the call (or name, or string) the fix points at and ``edits`` the running codemod
# (``edits.torch()``, ``edits.need_import(module, name=None)``, ``edits.need_helper(name,
# code)``). A module-level function of the rule's module, marked ``@replacement``: fixes
# cross process boundaries (files are fixed on worker processes) by reference.
Replacement = Callable[["SourceFix", Any, Any], Any]
_REPLACEMENT = "__coreml_lint_replacement__"


def replacement(func: Replacement) -> Replacement:
    """Mark ``func`` as a rule's source rewrite (``SourceContext.edit(node, func, ...)``):
    a rule fixes source when its module holds one (``Rule.fixes_source``)."""
    setattr(func, _REPLACEMENT, True)
    return func


def is_replacement(value: Any) -> bool:
    return callable(value) and getattr(value, _REPLACEMENT, False) is True


@dataclass(frozen=True)
class SourceFix:
    """A rewrite of the source expression at ``line``/``column`` (1-based line, 0-based
    character column); ``callee`` tells apart calls that start at the same column
    (``a(b)(c)``), or is ``<expr>`` / ``<str>`` for a name or a string literal.

    ``replacement`` is the rewrite itself, given where the finding is made (as ruff's
    ``Fix`` travels on its violation): the fixer only calls it. ``safe`` fixes keep what
    the model computes, unsafe ones may change numerics or behaviour (``--unsafe-fixes``).
    """

    rule: str
    replacement: Replacement
    line: int
    column: int
    callee: str | None
    safe: bool
    description: str
    data: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.data).get(key, default)

    @property
    def kind(self) -> str:
        """The rewrite's name (``_with_dtype``), for messages."""
        return getattr(self.replacement, "__name__", repr(self.replacement))

    def apply(self, node: Any, edits: Any) -> Any:
        """The libcst node replacing ``node``."""
        return self.replacement(self, node, edits)


@dataclass
class Finding:
    code: str
    name: str
    severity: Severity
    outcome: Outcome
    message: str
    file: str  # the linted file: a .pt2 archive, a .py source, or "<memory>"
    node: str | None = None
    op: str | None = None
    location: Location | None = None
    fix: str | None = None
    partitioner: dict[str, Any] | None = None  # CoreMLPartitioner option changes that avoid it
    lower_fixes: bool = False  # does `coreml-lint lower` answer it (from the rule's hooks)
    # ``lower`` applies the rule's rewrite to it though it is a warning: the rewrite computes
    # the same values, so nothing is lost where the warned case never comes (1 / x of ints)
    rewrite_as_warning: bool = False
    # Measured outcomes of its node (CML801's ``measured``) this finding explains: a rule
    # that defers leaves them to it (the epsilon of 1 / x is the ``wrong`` the table saw)
    explains: tuple[str, ...] = ()
    # The model source line where the wrong value it predicts first shows, when not its own
    # (an -inf mask is filled on one line; the NaN rows come out of the attention on another)
    shows_at: Location | None = None
    count: int = 1  # how many graph nodes from the same source line this stands for
    edit: SourceFix | None = None  # the source rewrite that fixes it, when one is safe to place
    extra: dict[str, Any] = field(default_factory=dict)
    # The findings of the other nodes this one stands for (``count``): their modules may
    # differ (two norms called on one line), and a program-guided fix places each.
    merged: list[Finding] = field(default_factory=list, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        merged, self.merged = self.merged, []
        try:
            data = asdict(self)
        finally:
            self.merged = merged
        del data["merged"]
        data["severity"] = self.severity.value
        data["outcome"] = self.outcome.value
        data["partitioner_code"] = partitioner_code(self.partitioner) if self.partitioner else None
        data["edit"] = (
            {"safe": self.edit.safe, "description": self.edit.description} if self.edit else None
        )
        return data


def partitioner_code(options: dict[str, Any]) -> str:
    """Option changes as ``CoreMLPartitioner(...)`` code a user can paste."""
    return PartitionerSettings().changed(**options).to_code()


CRASHES = (Outcome.CRASH, Outcome.LOAD_FAILURE)


def crash_predictions(
    findings: list[Finding], message: str = "", at: tuple[str, int] | None = None
) -> list[Finding]:
    """The lint's error findings that predicted a crash (lowering, conversion or load) whose
    error is ``message``: those at the model source line ``at`` (path, line) the crash
    names; else those on an op the message names (``aten.remainder.Scalar``); else every
    error finding of the program that predicts a crash (which of them the converter met
    first, only it knows). Both targets' ``verify`` and ``lower`` ask this one question."""
    import re

    errors = [f for f in findings if f.severity is Severity.ERROR and f.outcome in CRASHES]
    here = [f for f in errors if at and f.location and (f.location.path, f.location.line) == at]
    named = [
        f
        for f in errors
        if f.op and re.search(rf"(?<![\w.]){re.escape(f.op)}(?!\w)", message or "")
    ]
    return here or named or errors


def predicted_fix(predicted: list[Finding], unpredicted: str) -> str:
    """A crash finding's fix: the rules that predicted it, or ``unpredicted``."""
    codes = list(dict.fromkeys(f.code for f in predicted))
    if not codes:
        return unpredicted
    return f"predicted by {', '.join(codes)}: see `coreml-lint rule {codes[0]}`"


def value_explanations(findings: list[Finding], warnings: bool = True) -> list[Finding]:
    """The findings that can explain a wrong value the program computed, each merged one
    apart (one finding per line stands for its nodes): errors, and (``warnings``) warnings
    that predict a silent wrong value (an -inf mask that reaches attention: whether a row
    is ever fully masked depends on the inputs, so the lint warns, and verify's divergence
    is that warning come true). Not a crash prediction: the program ran."""
    return [
        g
        for f in findings
        for g in (f, *f.merged)
        if g.outcome not in CRASHES
        and (
            g.severity is Severity.ERROR
            or (warnings and g.severity is Severity.WARNING and g.outcome is Outcome.SILENT)
        )
    ]


def rules_by_line(explaining: list[Finding]) -> dict[tuple[str, int], str]:
    """(path, line) -> the code of a finding of :func:`value_explanations` at that model
    source line, or whose wrong value shows there (``shows_at``); an error's where a
    warning is there too: what explains a divergence at that line when no finding is on
    its node."""
    ranked = sorted(explaining, key=lambda f: f.severity is Severity.ERROR)  # errors last
    return {
        (at.path, at.line): f.code
        for f in ranked
        for at in (f.location, f.shows_at)
        if at is not None
    }
