"""CML311 reciprocal-epsilon: ``1 / x`` runs in Core ML as ``1 / (x + 1e-4)``.

What it does
    Flags a delegated ``aten.reciprocal`` (``1 / x``, ``2 / x``, ``x.reciprocal()``) of a value
    computed from the program's inputs.

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

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, returns, torch
from coreml_lint.rulekit.rule import Rule


class ReciprocalEpsilon(Rule):
    code = "CML311"
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
            yield ctx.finding(
                node,
                "1 / x is delegated as MIL `inverse(x, epsilon=1e-4)`, which computes "
                "1 / (x + 1e-4): off by a relative 1e-4/|x| (1/0.001 gives 909, not 1000)",
                fix="write torch.div(1.0, x) (Core ML real_div computes the division itself)",
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
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
