"""CML501 output-repeats-value: a returned clone of an input or of another output.

What it does
    Flags a program output made by a delegated ``clone`` of a program input (or of another
    value the partition receives), or of a value that the partition also returns.

Why it breaks
    ExecuTorch registers ``_clone_dim_order`` for coremltools as a no-op, so the clone
    vanishes and the MIL function returns the var it copied: ``x.clone()`` makes a Core ML
    output that *is* the input var (spec output ``x`` = input name), and ``y, y.clone()``
    makes two outputs with the same name. Nothing rejects this on Linux; on device the
    output does not hold what the program means.

Example
    ``return x.clone(), x * 2``

Fix
    (a) return a real op, ``x * 1.0`` / ``x + 0.0``, or return ``x`` itself and let ExecuTorch
    pass it through; (b) ``skip_ops_for_coreml_delegation=["aten.clone.default",
    "dim_order_ops._clone_dim_order.default"]``; (c) rewrite output clones to their source.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule

CLONES = {
    "aten.clone.default",
    "aten._clone_dim_order.default",
    "dim_order_ops._clone_dim_order.default",
}


class OutputRepeatsValue(Rule):
    code = "CML501"
    name = "output-repeats-value"
    outcome = Outcome.SILENT
    summary = "returned clone of an input/output becomes the same Core ML var"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        outputs = ctx.user_outputs
        for position, value in enumerate(outputs):
            node = ctx.producers.get(value)
            if node is None or node.target not in CLONES or not ctx.on_coreml(node):
                continue
            source = node.tensor_inputs()[0]
            part = ctx.placement.partition_of(node)
            assert part is not None
            if source in part.inputs or source in part.states:
                what = f"the partition's input '{source}'"
                detail = "the Core ML output is the input var itself"
            elif source in outputs[:position] + outputs[position + 1 :] or (source in part.outputs):
                what = f"'{source}', which the partition also returns"
                detail = "the Core ML model has two outputs with the same name"
            else:
                continue
            yield ctx.finding(
                node,
                f"output {position} is a clone of {what}: ExecuTorch's Core ML clone is a "
                f"no-op, so {detail} and the output does not hold what the program means",
                fix=f"return '{source}' itself (ExecuTorch passes it through) or a real op "
                f"such as `{source} * 1.0`",
                partitioner=ctx.skip_advice(node),
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """An output that is a clone of an input or of another output returns its source:
        ExecuTorch then passes the input through, or returns the value twice, itself."""
        from torch.export.graph_signature import TensorArgument

        from coreml_lint.rulekit.fx import aten, finish

        output = next(n for n in ep.graph.nodes if n.op == "output")
        values = list(output.args[0])
        specs = ep.graph_signature.output_specs
        user_order = [s.arg.name for s in specs if s.kind.name == "USER_OUTPUT"]
        user_outputs = set(user_order)
        names = [getattr(v, "name", None) for v in values]
        done = []
        for i, value in enumerate(values):
            if getattr(value, "target", None) != aten.clone.default:
                continue
            source = value.args[0]
            others = names[:i] + names[i + 1 :]
            if value.name not in user_outputs or not (
                source.op == "placeholder" or source.name in others
            ):
                continue
            values[i] = source
            for spec in specs:
                if spec.arg.name == value.name:
                    spec.arg = TensorArgument(name=source.name)
            position = user_order.index(value.name)  # counted as the lint counts: user outputs
            done.append(f"{value.name}: output {position} returns {source.name} itself")
        output.args = (tuple(values),)
        return finish(ep), done

    def mil_problem(self, model: Any, original: Any) -> str | None:
        spec = model.get_spec()
        inputs = {f.name for f in spec.description.input}
        outputs = [f.name for f in spec.description.output]
        if inputs.intersection(outputs):
            return f"an output is an input var {sorted(inputs & set(outputs))}"
        if len(set(outputs)) < len(outputs):
            return "duplicated output names"
        return None


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case(
    "output-clone-of-input",
    expect={"CML501"},
    silent=lambda lowered: any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: (x.clone(), x * 2)), (torch.randn(2, 4),)


@case(
    "output-clone-of-output",
    expect={"CML501"},
    silent=lambda lowered: any(d.duplicate_outputs for d in lowered.delegates),
)
def _():
    def forward(s, x):
        y = x * 2
        return y, y.clone()

    return module(forward), (torch.randn(2, 4),)


@case(
    "output-mul-one",
    expect=set(),
    clean=lambda lowered: not any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: (x * 1.0, x * 2)), (torch.randn(2, 4),)


@case("output-clone-inside", expect=set())
def _():
    return module(lambda s, x: (x * 3).clone() + 1), (torch.randn(2, 4),)
