"""CAI603 coreai-op-without-converter: an ATen op coreai-torch has no converter for.

What it does
    Flags a node whose ATen op reaches coreai-torch's converter (the decomposition step,
    ``run_decompositions(coreai_torch.get_decomp_table())``, does not remove it) and has no
    converter there. Which ops coreai-torch converts and which its decomposition removes is
    read from coreai-torch 0.4.3 itself into ``program/data/coreai_optable.json`` (``python
    -m coreml_lint.coreai_stack.optable_gen``); an op the decomposition removes is never
    flagged, whatever it becomes.

Why it breaks
    coreai-torch looks each node's op up in its converter registry before converting
    anything, and an op it does not find stops the conversion: ``ValueError: The exported
    program contains unsupported ATen ops: aten.remainder.Scalar. Use
    register_torch_lowering() to provide a custom lowering for these ops.`` (measured with
    coreai-torch 0.4.3). Core ML's CML603 is the same kind of pitfall (an op left without a
    kernel).

Example
    ``x % 3.0`` (``aten.remainder.Scalar``); ``F.elu(x)``; ``torch.argmin(x, 1)``.

Fix
    Compute the value with ops Core AI converts (``x - torch.floor(x / 3.0) * 3.0`` for a
    float ``x % 3.0``; ``torch.argmax(-x, 1)`` for ``argmin``), or give the converter a
    lowering of your own (``TorchConverter().register_torch_lowering("aten::remainder.Scalar")``),
    then verify (``coreml-lint verify --target coreai``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.program.coreai_optable import load_coreai_optable
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule

CRASH = r"^ValueError: The exported program contains unsupported ATen ops: aten\.{op}\b"


class CoreAIOpWithoutConverter(Rule):
    code = "CAI603"
    name = "coreai-op-without-converter"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.CRASH
    summary = "ATen op coreai-torch has no converter for (after its decompositions): ValueError"
    cannot_lower = (
        "no converter, and no rewrite known for every such op: compute the value with ops "
        "Core AI converts, or register a lowering (register_torch_lowering)"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        table = load_coreai_optable()
        for node in ctx.graph.nodes:
            if node.namespace != "aten" or _in_place(node.op_base):
                continue  # torch functionalizes an in-place op first (the graph does too)
            if not table.without_converter(node.target):
                continue
            finding = ctx.finding(
                node,
                f"{node.target} has no converter in {table.describe_versions()}, and "
                "get_decomp_table() does not decompose it: Core AI conversion fails with "
                f"`ValueError: The exported program contains unsupported ATen ops: "
                f"{node.target}`",
                fix="compute the value with ops Core AI converts, or register a lowering "
                f"for it (`register_torch_lowering('aten::{node.target[len('aten.') :]}')`)",
            )
            yield replace(finding, op=node.target)  # the name coreai-torch's error uses


def _in_place(base: str) -> bool:
    return base.endswith("_") and not base.startswith("__")


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _op_case(id: str, op, bad: str | None, x=None) -> None:
    @case(id, expect={"CAI603"} if bad else set(), crash=CRASH.format(op=bad) if bad else None)
    def _():
        return module(lambda s, a: op(a)), ((torch.randn(2, 8) if x is None else x()),)


_op_case("coreai-remainder-scalar", lambda a: a % 3.0, r"remainder\.Scalar")
_op_case(
    "coreai-int-remainder-scalar",
    lambda a: a % 3,
    r"remainder\.Scalar",
    x=lambda: torch.randint(-9, 9, (2, 8), dtype=torch.int32),
)
_op_case("coreai-elu", lambda a: F.elu(a) * 2.0, r"elu\.default")
_op_case("coreai-floor-remainder", lambda a: a - torch.floor(a / 3.0) * 3.0, None)
_op_case("coreai-fmod-scalar", lambda a: torch.fmod(a, 3.0), None)
_op_case("coreai-silu-kept-whole", lambda a: F.silu(a) + F.hardswish(a), None)
_op_case("coreai-layer-norm-decomposed", lambda a: F.layer_norm(a, (8,)).reshape(4, 4), None)
