"""CML306 pool-without-stride: ``max_pool1d``/``max_pool2d`` called without a stride.

What it does
    Flags a delegated ``max_pool1d``/``max_pool2d`` with fewer than three positional
    arguments: ``F.max_pool2d(x, 2)``. In source, a stride of ``None`` or ``[]`` (positional
    or keyword) is the same call: torch turns it into the default, and export omits it.

Why it breaks
    Export omits an argument left at its default (the stride), and coremltools' handler
    requires at least three positional inputs: ``ValueError: node aten_max_pool2d_default
    (max_pool2d) got 2 input(s), expected minimum 3 inputs`` (docs/background.md#keyword-arguments).
    ``nn.MaxPool2d(2)`` is fine: the module passes its stride explicitly.

Example
    ``F.max_pool2d(x, 2)``

Fix
    (a) pass the stride: ``F.max_pool2d(x, 2, 2)``, or use ``nn.MaxPool2d(2)``.

References
    - https://github.com/apple/coremltools/issues/759
      F.max_pool2d without an explicit stride fails to convert (TorchScript frontend, 2020)
    - https://github.com/apple/coremltools/pull/779
      default strides for avg_pool2d/max_pool2d in the TorchScript converter
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, SourceFix, replacement
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, Invalid, Valid, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext, has_star_args, keyword
from coreml_lint.source.patterns import is_simple

POOLS = {"aten.max_pool1d.default", "aten.max_pool2d.default"}


@replacement
def _with_stride(fix: SourceFix, call: Any, edits: Any) -> Any:
    """The pool call with ``stride=<its kernel size>`` (torch's default), positional where the
    call passed one."""
    import libcst as cst

    from coreml_lint.rulekit.cst import kwarg, with_args

    positional = [i for i, a in enumerate(call.args) if a.keyword is None]
    if len(positional) >= 3:  # max_pool2d(x, 2, None, 1): replace the positional stride
        args = list(call.args)
        index = positional[2]
        args[index] = args[index].with_changes(value=cst.parse_expression(fix.get("kernel")))
        return call.with_changes(args=args)
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "stride")]
    return with_args(call, [*args, kwarg("stride", fix.get("kernel"))])


class PoolWithoutStride(Rule):
    code = "CML306"
    name = "pool-without-stride"
    outcome = Outcome.CRASH
    summary = "max_pool without stride: coremltools expects at least 3 inputs"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target not in POOLS:
                continue
            if len(node.args) >= 3:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} without a stride is delegated: lowering fails with "
                f"`ValueError: node aten_{node.op_base}_default ({node.op_base}) got "
                f"{len(node.args)} input(s), expected minimum 3 inputs`",
                fix=f"pass the stride explicitly: F.{node.op_base}(x, k, k)",
            )

    source_triggers = ("max_pool",)
    source_pattern = "`F.max_pool1d/2d(x, k)` without stride, or with stride `None` / `[]`"
    source_fix = "`stride=k` (torch's default)"
    examples = (
        Invalid("y = F.max_pool2d(x, 2)", "y = F.max_pool2d(x, 2, stride=2)", at=(1, 5)),
        Invalid("y = F.max_pool1d(x, 3, None)", "y = F.max_pool1d(x, 3, 3)", at=(1, 5)),
        Valid("y = F.max_pool2d(x, 2, 2)"),
        Valid("pool = nn.MaxPool2d(2)"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        for call in ctx.calls():
            name = ctx.qualname(call.func)
            if name not in ("torch.nn.functional.max_pool1d", "torch.nn.functional.max_pool2d"):
                continue
            if has_star_args(call):
                continue
            stride = call.args[2] if len(call.args) >= 3 else keyword(call, "stride")
            if stride is not None and not _means_default(stride):
                continue
            kernel = call.args[1] if len(call.args) > 1 else keyword(call, "kernel_size")
            edit = None
            if kernel is not None and is_simple(kernel):
                edit = ctx.edit(
                    call,
                    _with_stride,
                    safe=True,
                    description="stride=kernel_size, torch's default",
                    kernel=ast.get_source_segment(ctx.text, kernel),
                )
            yield ctx.finding(
                call,
                f"{name.rsplit('.', 1)[-1]} without a stride: export omits the default and "
                "coremltools needs it (`expected minimum 3 inputs`)",
                fix="pass the stride explicitly (torch's default is the kernel size)",
                edit=edit,
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        from coreml_lint.rulekit.fx import aten, finish

        done = []
        for node in ep.graph.nodes:
            pool = node.target in (aten.max_pool2d.default, aten.max_pool1d.default)
            if pool and len(node.args) < 3 and not node.kwargs.get("stride"):
                node.args = (*node.args[:2], node.args[1])
                done.append(f"{node.name}: stride=kernel_size passed (torch's default)")
        return finish(ep), done


def _means_default(stride: ast.expr) -> bool:
    """``None`` and an empty sequence both mean "the kernel size" to torch, and both export
    as an omitted stride."""
    if isinstance(stride, ast.Constant):
        return stride.value is None
    return isinstance(stride, (ast.List, ast.Tuple)) and not stride.elts


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("maxpool-no-stride", expect={"CML306"}, crash=r"expected minimum 3 inputs")
def _():
    return module(lambda s, x: F.max_pool2d(x, 2)), (torch.randn(1, 3, 8, 8),)


@case("maxpool-module", expect=set())
def _():
    return wrapped(nn.MaxPool2d(2))[0], (torch.randn(1, 3, 8, 8),)
