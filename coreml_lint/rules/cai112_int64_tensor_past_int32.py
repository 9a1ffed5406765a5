"""CAI112 coreai-int64-tensor-past-int32: an int64 tensor constant, buffer or parameter holds
values int32 cannot, in a Core AI program.

What it does
    Reads the values of every contiguous int64 tensor the program holds (a tensor made in
    ``forward``, ``torch.tensor([2**40, 3])``, which export lifts to a constant; a buffer;
    a parameter) from the ``.pt2`` itself, without torch (``program/constants.py``: the raw
    bytes torch.export saves, at most about a million elements each), and flags each one
    with a value below -2**31 or above 2**31 - 1, at the first node that reads it.

Why it breaks
    Core AI narrows int64 to int32 everywhere. A Python integer past int32 stops the
    conversion (CAI110), but a *tensor's* values are narrowed without a word and wrap:
    ``ids + torch.tensor([2**40 + 1, 3])`` converts, runs and returns ``ids + [1, 3]``
    (measured with coreai-torch 0.4.3 and coreai-core 1.0.0b3: a lifted constant and a
    buffer alike).

Example
    A hash or a sentinel table: ``self.register_buffer("salt", torch.tensor([2**40]))``.

Fix
    Keep such values in a range int32 holds, or in float64 computed on the host; there is
    no value-keeping rewrite.
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule

KINDS = ("constant", "buffer", "parameter")


class CoreAIInt64TensorPastInt32(Rule):
    code = "CAI112"
    name = "coreai-int64-tensor-past-int32"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.SILENT
    summary = "int64 tensor constant or buffer past int32: Core AI narrows it and it wraps"
    cannot_lower = "no value-keeping rewrite: int32 cannot hold the values"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        past = ctx.graph.meta.get("int64_past_int32") or {}
        for spec in ctx.graph.inputs:
            if spec.kind not in KINDS or spec.target not in past:
                continue
            low, high = past[spec.target]
            value = high if high > 2**31 - 1 else low
            first = (ctx.users.get(spec.name) or [None])[0]
            yield ctx.finding(
                first,
                f"int64 {spec.kind} '{spec.target}' holds {value}, outside int32 (its values "
                f"run from {low} to {high}): Core AI narrows it to int32 and the values wrap, "
                "with no error",
                fix="keep the values in int32's range, or compute with them outside the model",
            )


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _wraps(error: float) -> bool:
    return error > 0.5  # 2**40 + 1 comes back as 1


@case("coreai-int64-constant-past-int32", expect={"CAI112"}, silent=_wraps)
def _():
    return module(lambda s, ids: ids + torch.tensor([2**40 + 1, 3])), (torch.tensor([1, 2]),)


@case("coreai-int64-buffer-past-int32", expect={"CAI112"}, silent=_wraps)
def _():
    return module(lambda s, ids: ids + s.salt, salt=torch.tensor([2**40 + 1, 3])), (
        torch.tensor([1, 2]),
    )


@case("coreai-int64-constant-in-int32", expect=set())
def _():
    return module(lambda s, ids: ids + torch.tensor([2**31 - 1, 3])), (
        torch.tensor([0, 2], dtype=torch.int32),
    )
