"""CML311 reciprocal-epsilon: ``1 / x`` runs in Core ML as ``1 / (x + 1e-4)``.

What it does
    Flags a delegated ``aten.reciprocal`` (``1 / x``, ``2 / x``, ``x.reciprocal()``) of a value
    computed from the program's inputs. Where that value is an integer cast to float
    (``8000 / lag.float()``, ``1 / mask.float()``) it is a warning: the error is 1e-4
    relative at most, within float16's own rounding at Core ML's default compute precision,
    except where the integer is 0; ``coreml-lint lower`` still writes the exact division.

Why it breaks
    coremltools converts ``reciprocal`` to MIL ``inverse(x, epsilon=1e-4)``, which computes
    ``1 / (x + 1e-4)``: every value is off by a relative 1e-4/|x|, 1% at |x| = 0.01, and
    1/0.001 comes out 909 instead of 1000. It lowers without a word. ``torch.div(1.0, x)``
    and ``a / b`` become ``real_div``, which computes the division itself. Found by
    ``coreml-lint verify``.

Example
    ``inv_norm = 1 / x.norm(dim=-1, keepdim=True)``

Fix
    (a) ``torch.div(1.0, x)`` or ``torch.ones_like(x) / x``; (b) ``coreml-lint lower``
    writes ``reciprocal(x)`` as ``full_like(x, 1) / x`` (checked equal in eager).

References
    - https://github.com/apple/coremltools/pull/2773
      do not add MIL's stability epsilon in torch.reciprocal (merged after 9.0)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.measured.outcomes import WRONG
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule

# x holds integers (a cast of a count or an index): 1e-4 relative at most, under float16's
# own rounding (2**-11), except at 0.
COUNTED = (
    "; here x holds integers (cast from {dtype}), so that is 1e-4 at most, within float16's "
    "own rounding (Core ML's default compute precision; at float32 it is not), except where "
    "x is 0, where `inverse` is by its definition 1 / 1e-4 = 10000, not inf"
)


class ReciprocalEpsilon(Rule):
    code = "CML311"
    other_severities = (Severity.WARNING,)  # x holds integers: see ``COUNTED``
    name = "reciprocal-epsilon"
    outcome = Outcome.SILENT
    summary = "1 / x becomes inverse(x, epsilon=1e-4): 1/0.001 is 909 in Core ML"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target != "aten.reciprocal.default":
                continue
            operand = node.tensor_inputs()[0] if node.tensor_inputs() else None
            if operand is None or ctx.input_kinds.get(operand) in (
                "parameter",
                "buffer",
                "constant",
            ):
                continue  # a constant is folded exactly when coremltools converts it
            counted = ctx.integer_source(operand)
            yield ctx.finding(
                node,
                "1 / x is delegated as MIL `inverse(x, epsilon=1e-4)`, which computes "
                "1 / (x + 1e-4): off by a relative 1e-4/|x| (1/0.001 gives 909, not 1000)"
                + (COUNTED.format(dtype=counted) if counted else ""),
                fix="write torch.div(1.0, x) (Core ML real_div computes the division itself)",
                severity=Severity.WARNING if counted else None,
                rewrite_as_warning=bool(counted),  # the division is exact: lower writes it
                explains=(WRONG,) if counted else (),  # what the table measured (typical x)
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """``reciprocal(x)`` as ``full_like(x, 1) / x``, the same values in eager."""
        from coreml_lint.rulekit.fx import aten, finish, val

        done = []
        for node in list(ep.graph.nodes):
            if node.target != aten.reciprocal.default:
                continue
            (operand,) = node.args[:1]
            with ep.graph.inserting_before(node):
                ones = ep.graph.call_function(aten.full_like.default, (operand, 1.0))
            ones.meta = {**operand.meta, "val": val(operand)}
            node.target, node.args = aten.div.Tensor, (ones, operand)
            done.append(f"{node.name}: 1 / x written as a division (real_div, no epsilon)")
        return finish(ep), done


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("reciprocal-of-input", expect={"CML311"}, silent=returns(r"inverse\(x="))
def _() -> Any:
    return module(lambda s, x: 1 / x + x), (torch.randn(2, 4),)


@case("division-of-input", expect=set(), clean=returns(r"real_div\("))
def _() -> Any:
    return module(lambda s, x: torch.div(1.0, x) + x), (torch.randn(2, 4),)


@case("reciprocal-of-a-count", expect=set(), warnings={"CML311"})
def _() -> Any:
    """A pitch from the autocorrelation's best lag (``8000 / lag.float()``, lag >= 16)."""
    return module(lambda s, x: 8000 / (x.argmax(1) + 16).float()), (torch.randn(2, 32),)
