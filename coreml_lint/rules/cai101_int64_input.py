"""CAI101 coreai-int64-input: an int64 input of a Core AI program must be fed as int32.

What it does
    Flags each int64 user input (token ids, positions, indices) of a program converted for
    Core AI. A warning: the program converts and runs, if the app feeds int32.

Why it breaks
    coreai-torch narrows int64 to int32 everywhere: inputs, constants and outputs. The
    converted function declares the input int32, and Core AI's runtime refuses an int64
    array: ``RuntimeError: pos has an invalid scalar type: int64, expected: int32``
    (measured with coreai-core 1.0.0b3). Integer outputs come back as int32 too.

Example
    ``model(ids)`` exported with ``ids = torch.tensor([[1, 2, 3]])`` (int64 by default).

Fix
    Feed int32 arrays (and read int32 outputs), or export with int32 example inputs
    (``ids.int()``) so the program says what Core AI runs.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule


class CoreAIInt64Input(Rule):
    code = "CAI101"
    name = "coreai-int64-input"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    severity = Severity.WARNING
    outcome = Outcome.LOAD_FAILURE
    summary = "int64 input: Core AI declares it int32 and refuses an int64 array at run time"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        users = ctx.users
        for spec in ctx.graph.inputs:
            if spec.kind != "user_input" or ctx.dtype(spec.name) != "int64":
                continue
            first = (users.get(spec.name) or [None])[0]
            yield ctx.finding(
                first,
                f"input '{spec.name}' is int64: the Core AI function declares it int32, and "
                "feeding an int64 array fails (`invalid scalar type: int64, expected: int32`)",
                fix="feed it as int32, or export with an int32 example input",
            )


# -- program cases: what coreai-core 1.0.0b3 really does (tests/test_coreai_rules.py runs them;
# the int64 array is fed as it is, as an app that follows the program would)
@case(
    "coreai-int64-input",
    warnings=frozenset({"CAI101"}),
    crash=r"invalid scalar type: int64, expected: int32",
)
def _():
    return module(lambda s, ids: ids * 2), (torch.randint(0, 5, (2, 8)),)


@case("coreai-int32-input", warnings=frozenset())
def _():
    return module(lambda s, ids: ids * 2), (torch.randint(0, 5, (2, 8), dtype=torch.int32),)
