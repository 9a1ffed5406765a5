"""CAI110 coreai-int-past-int32: an integer constant outside int32 in a Core AI program.

What it does
    Flags an integer scalar outside int32's range (below -2**31 or above 2**31 - 1) given to
    an arithmetic, comparison, fill or clamp op: ``x + 2**40``, ``torch.full(s, 2**40)``,
    ``m.masked_fill(mask, torch.iinfo(torch.int64).max)`` on an integer tensor,
    ``x.clamp(max=2**40)``. Index and size arguments (``x[:, 1:]`` ends at ``2**63 - 1``)
    are not constants of the computation and are left alone.

Why it breaks
    Core AI narrows int64 to int32 (inputs, outputs and constants). A scalar int32 cannot
    hold stops the conversion with ``OverflowError: Python integer 1099511627776 out of
    bounds for int32``, on an integer tensor and on a float one alike; a clamp bound is
    narrowed without a word and wraps (``clamp(max=2**40)`` clamps at 0). A ``masked_fill``
    of a *float* tensor converts its value as a float and is fine. (Measured with
    coreai-torch 0.4.3.)

Example
    ``pos.masked_fill(pad, torch.iinfo(torch.int64).max)``; ``ids + 2**40``.

Fix
    A constant int32 holds: ``torch.iinfo(torch.int32).max`` as a sentinel (``--fix
    --unsafe-fixes`` writes it when the line spells ``torch.iinfo(torch.int64)``), or keep
    the arithmetic in float.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.measured.values import INT32
from coreml_lint.rulekit.context import ProgramContext, not_one_call
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule
from coreml_lint.source.context import SourceContext

# ops whose integer scalars are values of the computation (the converter makes each an
# int32 constant); the clamp family narrows its bounds silently instead of failing
ARITHMETIC = {"add", "sub", "rsub", "mul", "div", "remainder", "floor_divide"}
COMPARISON = {"eq", "ne", "lt", "le", "gt", "ge"}
FILLS = {"full", "full_like", "new_full", "fill", "masked_fill"}
CLAMPS = {"clamp", "clamp_min", "clamp_max"}
INT64_INFO = ("torch.int64", "torch.long")


class CoreAIIntPastInt32(Rule):
    code = "CAI110"
    name = "coreai-int-past-int32"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.CRASH
    summary = "integer constant outside int32: Core AI conversion OverflowError (clamp: wraps)"
    cannot_lower = (
        "no value-keeping rewrite: int32 cannot hold the constant; write one it holds "
        "(a sentinel: torch.iinfo(torch.int32)) or compute in float"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            base = node.op_base
            if node.namespace != "aten" or base not in ARITHMETIC | COMPARISON | FILLS | CLAMPS:
                continue
            tensors = node.tensor_inputs()
            if base == "masked_fill" and tensors and not _integer(ctx.dtype(tensors[0])):
                continue  # a float tensor's fill value converts as a float (measured)
            value = next((v for v in _scalars(node) if not INT32[0] <= v <= INT32[1]), None)
            if value is None:
                continue
            silent = base in CLAMPS
            what = (
                "narrows it to int32 without a word, and it wraps"
                if silent
                else f"conversion fails: `OverflowError: Python integer {value} out of "
                "bounds for int32`"
            )
            yield ctx.finding(
                node,
                f"{base} with the integer constant {value}, outside int32: Core AI {what}",
                fix="use a constant int32 holds (a sentinel: `torch.iinfo(torch.int32)`), "
                "or compute in float",
                outcome=Outcome.SILENT if silent else None,
            )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """``torch.iinfo(torch.int64)`` on the finding's line becomes ``torch.iinfo(
        torch.int32)``: a sentinel int32 holds (unsafe: the value changes)."""
        if finding.location is None:
            return None
        calls = [
            c
            for c in source.calls()
            if c.lineno == finding.location.line
            and source.qualname(c.func) == "torch.iinfo"
            and len(c.args) == 1
            and source.qualname(c.args[0]) in INT64_INFO
        ]
        if len(calls) != 1:
            return not_one_call(finding.location.line, len(calls), "torch.iinfo(torch.int64)")
        return source.edit(
            calls[0], _iinfo_int32, safe=False, description="use torch.iinfo(torch.int32)"
        )


@replacement
def _iinfo_int32(fix: SourceFix, call: Any, edits: Any) -> Any:
    """``torch.iinfo(torch.int64)`` -> ``torch.iinfo(torch.int32)``."""
    import libcst as cst

    arg = cst.parse_expression(f"{edits.torch()}.int32")
    return call.with_changes(args=[call.args[0].with_changes(value=arg)])


def _integer(dtype: str | None) -> bool:
    return dtype is not None and ("int" in dtype or dtype == "bool")


def _scalars(node: Any) -> Iterator[int]:
    for value in [*node.args, *node.kwargs.values()]:
        if isinstance(value, int) and not isinstance(value, bool):
            yield value


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _int_case(id: str, op: Any, bad: bool, *, silent: bool = False, x: Any = None) -> None:
    crash = r"^OverflowError: Python integer \d+ out of bounds for int32" if bad else None

    @case(
        id,
        expect={"CAI110"} if bad else set(),
        crash=None if silent else crash,
        silent=(lambda error: error > 0.5) if silent else None,
    )
    def _():
        return module(lambda s, a: op(a)), (torch.randint(0, 5, (2, 8)) if x is None else x(),)


_int_case("coreai-int-add-2**40", lambda a: a + 2**40, True)
_int_case("coreai-float-add-2**40", lambda a: a + 2**40, True, x=lambda: torch.randn(2, 8))
_int_case("coreai-int-mul-2**31", lambda a: a * 2**31, True)
_int_case("coreai-full-2**40", lambda a: a + torch.full((2, 8), 2**40), True)
_int_case(
    "coreai-int-masked-fill-iinfo",
    lambda a: a.masked_fill(a > 2, torch.iinfo(torch.int64).max),
    True,
)
_int_case("coreai-int-clamp-2**40", lambda a: a.clamp(max=2**40), True, silent=True)
_int_case("coreai-int-add-minus-2**31", lambda a: a + (-(2**31)), False)
_int_case("coreai-int-slice-to-end", lambda a: a[:, 1:] * 2, False)
_int_case(
    "coreai-float-masked-fill-iinfo",
    lambda a: a.masked_fill(a > 0, torch.iinfo(torch.int64).min),
    False,
    x=lambda: torch.randn(2, 8),
)
_int_case(
    "coreai-int-masked-fill-iinfo-int32",
    lambda a: a.masked_fill(a > 2, torch.iinfo(torch.int32).max),
    False,
)
