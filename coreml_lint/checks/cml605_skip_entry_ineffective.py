"""CML605 skip-entry-ineffective: a ``skip_ops_for_coreml_delegation`` entry that does nothing.

What it does
    Flags an entry of ``skip_ops_for_coreml_delegation`` that matches no node, or that only
    matches in the ATen graph for an op torch does not decompose (so the op stays
    delegated).

Why it breaks
    The partitioner compares entries exactly, in lower case, against two different names
    (pitfalls.md G1): ``matmul.default`` in the ATen graph (``ops_to_not_decompose``) and
    ``aten.matmul.default`` in the edge graph (``partition``). ``"aten.div.Tensor"`` never
    matches (upper case); ``"gelu.default"`` only stops nothing: gelu is a core op, is not
    decomposed and is still delegated. The skip you believe protects you does not.

Example
    ``CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.gelu.Default"])``

Fix
    (b) spell the entry the edge way, in lower case (``"aten.gelu.default"``), for ops with a
    portable CPU kernel; for non-core ops you want decomposed, the ATen spelling
    (``"rms_norm.default"``).
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.checks.base import ProgramContext, Rule
from coreml_lint.lint.findings import Finding, Outcome, Severity


class SkipEntryIneffective(Rule):
    code = "CML605"
    name = "skip-entry-ineffective"
    severity = Severity.WARNING
    outcome = Outcome.NO_EFFECT
    summary = "skip_ops_for_coreml_delegation entry that matches nothing or changes nothing"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        placement = ctx.placement
        names = {p.edge_name.lower(): p.edge_name for p in placement.nodes.values()}
        names.update({p.aten_name.lower(): p.aten_name for p in placement.nodes.values()})
        for entry, matched in placement.skip_matches.items():
            if matched["edge"]:
                continue
            if matched["aten"]:
                if any(placement.nodes[name].decomposed for name in matched["aten"]):
                    continue
                yield ctx.finding(
                    None,
                    f"skip entry {entry!r} only matches in the ATen graph, where {entry!r} is "
                    "not decomposed: the op is still delegated to Core ML",
                    fix=f"use the edge spelling 'aten.{entry}'",
                    entry=entry,
                )
                continue
            suggestion = self._suggest(entry, names)
            yield ctx.finding(
                None,
                f"skip entry {entry!r} matches no op in this program (entries are compared "
                "exactly and in lower case): nothing is skipped",
                fix=f"did you mean {suggestion!r}?" if suggestion else "remove the entry",
                entry=entry,
            )

    @staticmethod
    def _suggest(entry: str, names: dict[str, str]) -> str | None:
        lowered = entry.lower()
        for candidate in (lowered, "aten." + lowered, lowered.removeprefix("aten.")):
            if candidate in names:
                return candidate
        return None
