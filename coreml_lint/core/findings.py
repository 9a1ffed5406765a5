"""What a rule reports, in the shape every output format renders."""

from __future__ import annotations

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


@dataclass(frozen=True)
class SourceFix:
    """A rewrite of the source expression at ``line``/``column`` (1-based line, 0-based
    character column); ``callee`` tells apart calls that start at the same column
    (``a(b)(c)``), or is ``<expr>`` / ``<str>`` for a name or a string literal.

    ``kind`` names the transform in the rule module that owns it; ``safe`` fixes keep what
    the model computes, unsafe ones may change numerics or behaviour (``--unsafe-fixes``).
    """

    rule: str
    kind: str
    line: int
    column: int
    callee: str | None
    safe: bool
    description: str
    data: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.data).get(key, default)


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
