"""CAI801 coreai-measured-op-behaviour: an op whose measured Core AI conversion crashes or
computes wrong values.

What it does
    Matches every node against the measured table ``measured/data/coreai_behaviour.json``,
    keyed as Core ML's table is (the op, each operand's dtype and whether it is an input,
    made in the program or a constant, the class of every other argument, the rank of the
    first operand), and reports a node whose measured outcome on Core AI is a crash (with
    the measured error's first line and the stage: convert, load or run) or wrong values
    (with the measured divergence). Wrong values seen only on extreme inputs (NaN,
    infinities, values at the limits of the dtype; int64 values past int32, which Core AI
    narrows) depend on what the model holds: warnings, for float operands only (integers
    past int32 are CAI101's, CAI110's and CAI112's). Only measured answers are given, never
    predicted ones; a hand-written Core AI rule's error on the same node wins.

Why it breaks
    The sweep (``python -m coreml_lint.sweep run --target coreai``) converts each
    single-op program with coreai-torch, compiles and runs it on Core AI's Linux runtime and
    compares it with eager: the table holds what really happened. Its ``sweep`` section says
    which ops and axes were measured (a bounded scope: an op or a call outside it is not
    known, and not reported).

Example
    ``torch.amax(x)`` (no ``dim``): ``IndexError: tuple index out of range`` in
    coreai-torch 0.4.3's conversion, for every dtype measured (``amin`` alike).

Fix
    Compute the value another way (for a full reduction, name every dim: ``x.amax(dim=(0,
    1))``) and verify again (``coreml-lint verify --target coreai``).
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.measured.coreai_table import (
    coreai_key_maker,
    coreai_table,
    describe_versions,
    measured_answer,
)
from coreml_lint.measured.key import INSIDE, Key
from coreml_lint.measured.table import Answer, BehaviourTable
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule

ORIGINS = {"in": "an input", "op": "made in the program", "const": "a constant"}
BASES = {
    "measured": "measured",
    "class": "measured at other values of the same kinds, which all agree",
    "shape": "measured at shape class {shape} (the op behaves alike at every shape measured)",
}
EDGE = "edge"  # wrong only on extreme values


class CoreAIMeasuredOpBehaviour(Rule):
    code = "CAI801"
    name = "coreai-measured-op-behaviour"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.CRASH
    other_severities = (Severity.WARNING,)
    summary = "an op whose measured Core AI conversion crashes or computes wrong values"
    defers = True  # a hand-written rule on the same node explains it
    cannot_lower = "measured, not explained: no rewrite is known; compute it another way"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        table = coreai_table()
        if table is None:
            return
        maker = coreai_key_maker(ctx.graph)
        for node in ctx.graph.nodes:
            read = any(ctx.users.get(out) for out in node.outputs)
            key = maker.key(node)
            answer = next(
                (
                    found
                    for context in ([INSIDE] if read else []) + [""]
                    for found in [measured_answer(table, key, context)]
                    if found is not None
                ),
                None,
            )
            if answer is None or answer.entry.outcome not in ("crash", "wrong", EDGE):
                continue
            edge = answer.entry.outcome == EDGE
            if edge and not _floats(key):
                continue  # integers past int32 narrowed: CAI101/CAI110/CAI112's subject
            yield ctx.finding(
                node,
                _message(table, key, answer),
                fix="compute the value another way and verify again (`coreml-lint verify "
                "--target coreai`)",
                severity=Severity.WARNING if edge else None,
                outcome=Outcome.CRASH if answer.entry.outcome == "crash" else Outcome.SILENT,
                measured=answer.entry.outcome,
                basis=answer.basis,
            )


def _floats(key: Key) -> bool:
    return any("float" in p for p in key.operands.split(","))


def _message(table: BehaviourTable, key: Key, answer: Answer) -> str:
    entry = answer.entry
    names = table.arg_names.get(key.op)
    from coreml_lint.measured.values import describe_variant

    operands = ", ".join(
        f"{d} ({ORIGINS.get(o, o)})"
        for d, _, o in (p.partition(":") for p in key.operands.split(",") if p)
    )
    variant = describe_variant(key.variant, names)
    what = {
        "crash": "Core AI fails",
        "wrong": "Core AI computes other values than eager",
        EDGE: "Core AI computes other values than eager on extreme inputs only (NaN, "
        "infinities, values at the dtype's limits; int64 past int32)",
    }[entry.outcome]
    how = BASES[answer.basis].format(shape=entry.shape)
    return (
        f"{key.op} on {operands or 'no tensor'}{f' with {variant}' if variant else ''}: "
        f"{how}, {what}: `{entry.message}` ({entry.cases} sweep case(s) on "
        f"{describe_versions(table)})"
    )


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
@case("coreai-measured-amax-all", expect={"CAI801"}, crash=r"^IndexError: tuple index out of")
def _():
    return module(lambda s, x: torch.amax(x) * 2.0), (torch.randn(4, 8),)


@case("coreai-measured-amax-dims", expect=set())
def _():
    return module(lambda s, x: torch.amax(x, dim=(0, 1)) * 2.0), (torch.randn(4, 8),)
