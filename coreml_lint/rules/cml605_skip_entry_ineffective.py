"""CML605 skip-entry-ineffective: a ``skip_ops_for_coreml_delegation`` entry that does nothing.

What it does
    Flags an entry of ``skip_ops_for_coreml_delegation`` that matches no node, or that only
    matches in the ATen graph for an op torch does not decompose (so the op stays
    delegated), or decomposes into one core op Core ML still runs (``"layer_norm.default"``
    makes ``native_layer_norm``, which is delegated).

Why it breaks
    The partitioner compares entries exactly, in lower case, against two different names
    (docs/background.md#skip-list-names): ``matmul.default`` in the ATen graph
    (``ops_to_not_decompose``) and ``aten.matmul.default`` in the edge graph (``partition``).
    ``"aten.div.Tensor"`` never matches (upper case); ``"gelu.default"`` only stops nothing: gelu is
    a core op, is not decomposed and is still delegated. The skip you believe protects you does not.

Example
    ``CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.gelu.Default"])``

Fix
    (a) spell the entry the edge way, in lower case (``"aten.gelu.default"``), for ops with a
    portable CPU kernel; for non-core ops you want decomposed, the ATen spelling
    (``"rms_norm.default"``); to keep an op torch decomposes into one core op on the CPU,
    add that op's edge spelling (``"aten.native_layer_norm.default"``).

References
    - https://github.com/pytorch/executorch/blob/main/backends/apple/coreml/partition/coreml_partitioner.py
      the partitioner compares a node's lower-cased `__name__` against
      skip_ops_for_coreml_delegation
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity, SourceFix, replacement
from coreml_lint.program.optable import load_optable
from coreml_lint.program.placement import COREML
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, Invalid, Valid, case, module, nn, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, keyword


@replacement
def _entry_spelled(fix: SourceFix, node: Any, edits: Any) -> Any:
    """The skip entry as the partitioner matches it (``fix.get("value")``)."""
    import libcst as cst

    return cst.SimpleString(repr(fix.get("value")).replace("'", '"'))


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
                first = placement.nodes[matched["aten"][0]]
                if first.decomposed_into is not None:
                    if first.where == COREML:
                        yield self._renamed(ctx, entry, first.decomposed_into, first.edge_name)
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
    def _renamed(ctx: ProgramContext, entry: str, into: str, edge_name: str) -> Finding:
        """An ATen-spelled entry for an op torch decomposes into one core op: the partitioner
        then decides on that op's name, and delegates it unless the list names it too."""
        return ctx.finding(
            None,
            f"skip entry {entry!r} makes torch decompose {entry.split('.')[0]} into "
            f"{into.split('.')[0]}, which is still delegated to Core ML: nothing moves to "
            "the CPU",
            fix=f"add the edge spelling {edge_name.lower()!r} to keep it on the CPU",
            entry=entry,
        )

    @staticmethod
    def _suggest(entry: str, names: dict[str, str]) -> str | None:
        lowered = entry.lower()
        for candidate in (lowered, "aten." + lowered, lowered.removeprefix("aten.")):
            if candidate in names:
                return candidate
        return None

    source_triggers = ("skip_ops_for_coreml_delegation",)
    source_pattern = "`skip_ops_for_coreml_delegation` entries that never match or do nothing"
    source_fix = "the spelling that does what was meant"
    examples = (
        Invalid(
            'p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.div.Tensor"])',
            'p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.div.tensor"])',
            at=(1, 55),
        ),
        Invalid(
            'p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["gelu.default"])',
            'p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.gelu.default"])',
            at=(1, 55),
        ),
        Valid('p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.gelu.default"])'),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        from coreml_lint.rules.cml603_op_without_kernel import OpLeftWithoutKernel

        table = load_optable()
        for call in ctx.calls():
            value = keyword(call, "skip_ops_for_coreml_delegation")
            if not isinstance(value, (ast.List, ast.Tuple)):
                continue
            for element in value.elts:
                if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
                    continue
                verdict = judge_skip_entry(element.value, table)
                if verdict is None:
                    continue
                code, message, replacement = verdict
                edit = ctx.edit_string(
                    element,
                    _entry_spelled,
                    safe=False,
                    description=f"use {replacement!r}",
                    value=replacement,
                )
                # The G1 trap is CML603's consequence; this rule owns the rewrite.
                yield ctx.finding(
                    element,
                    message,
                    fix=f"use {replacement!r}",
                    edit=edit,
                    rule=OpLeftWithoutKernel if code == "CML603" else None,
                )


def judge_skip_entry(entry: str, table: Any) -> tuple[str, str, str | None] | None:
    """What an entry does, from its spelling alone (docs/background.md#skip-list-names): None
    when it is fine."""
    lowered = entry.lower()
    if entry != lowered:
        return (
            "CML605",
            f"skip entry {entry!r} never matches: the partitioner compares names in lower case",
            lowered,
        )
    parts = lowered.split(".")
    if len(parts) == 3 and parts[0] == "aten":
        aten_real = next((n for n in table.cia_preserved if n.lower() == ".".join(parts[1:])), None)
        if aten_real and aten_real not in table.with_out_variant:
            return (
                "CML603",
                f"skip entry {entry!r} keeps {parts[1]} whole for Core ML and then leaves it on "
                f"the CPU: to_executorch fails with `Missing out variants: "
                f"{{'aten::{parts[1]}'}}`",
                ".".join(parts[1:]),
            )
        return None
    if len(parts) == 2:
        core = next((n for n in table.core_aten if n.lower() == lowered), None)
        if core is not None and core not in table.decomposed_by_default:
            return (
                "CML605",
                f"skip entry {entry!r} is the ATen spelling of a core op that is never "
                "decomposed: it changes nothing and the op stays on Core ML",
                "aten." + lowered,
            )
    return None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --


@case(
    "skip-entry-without-effect",
    expect=set(),
    settings={"skip": ["gelu.default", "aten.div.Tensor"]},
    warnings=frozenset({"CML605"}),
    # The oracle's placement check sees gelu and div still delegated: the entries did nothing.
)
def _():
    return module(lambda s, x: F.gelu(x) / 3), (torch.randn(2, 8),)


@case(
    "layernorm-aten-skip-still-delegated",
    expect=set(),
    settings={"skip": ["layer_norm.default"]},
    warnings=frozenset({"CML605"}),
    # The oracle's placement check sees native_layer_norm delegated: nothing on the CPU.
)
def _():
    return module(lambda s, x: F.layer_norm(x, (8,)) * 2), (torch.randn(2, 8),)


@case(
    "layernorm-aten-and-edge-skip",
    expect=set(),
    settings={"skip": ["layer_norm.default", "aten.native_layer_norm.default"]},
    # Both spellings: decomposed, then native_layer_norm kept on the CPU (its portable kernel).
)
def _():
    return module(lambda s, x: F.layer_norm(x, (8,)) * 2), (torch.randn(2, 8),)


@case(
    "softmax-aten-and-edge-skip",
    expect=set(),
    settings={"skip": ["softmax.int", "aten._softmax.default"]},
    warnings=frozenset(),
    # softmax decomposed into _softmax, which the edge entry keeps on the CPU.
)
def _():
    return module(lambda s, x: torch.softmax(x, -1) * 2), (torch.randn(2, 8),)


@case(
    "conv-aten-skip-still-delegated",
    expect=set(),
    settings={"skip": ["conv2d.default"]},
    warnings=frozenset({"CML605"}),
    # conv2d decomposed into convolution, which Core ML still runs.
)
def _():
    return nn.Sequential(nn.Conv2d(3, 4, 3)), (torch.randn(1, 3, 8, 8),)
