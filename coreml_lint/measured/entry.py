"""One row of the measured table: an op's operands, variant, context and shape class at
some deployment targets, with the outcome, the message and how many cases agreed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache


@lru_cache(maxsize=256)
def parse_targets(text: str) -> frozenset[int]:
    """``"15-18"`` / ``"15,17"`` -> the iOS versions (a table repeats a few texts: each is
    parsed once)."""
    found: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return frozenset(found)


def format_targets(targets: Iterable[int]) -> str:
    ordered = sorted(set(targets))
    runs: list[list[int]] = []
    for t in ordered:
        if runs and t == runs[-1][-1] + 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


@dataclass(frozen=True)
class Entry:
    """One measured outcome: an op's operands, variant, context and shape class at some
    targets (``shape`` ``*``: two or more shape classes were measured, and agreed)."""

    op: str
    operands: str
    variant: str
    context: str  # "" or the consumer's target ("aten.addmm.default")
    shape: str
    targets: frozenset[int]
    outcome: str
    message: str
    cases: int

    def where(self) -> str:
        return f"iOS{format_targets(self.targets).replace(',', ', iOS')}"
