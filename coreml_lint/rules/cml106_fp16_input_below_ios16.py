"""CML106 fp16-input-below-ios16: a float16 tensor enters a Core ML partition below iOS16.

What it does
    Flags a float16 tensor that a Core ML partition receives as an input (a program input, a
    value made on the CPU or by another partition, or a buffer with
    ``take_over_constant_data=False``) when the deployment target is below iOS16.

Why it breaks
    The iOS15 Core ML model format has no fp16 inputs, and coremltools refuses:
    ``ValueError: To use fp16 input, please set minimum deployment target to iOS16+``.
    A float16 model whose inputs are float32 (cast inside) is fine, as is a float16 constant
    the partition owns. A float16 model with float32 inputs still fails where one of its
    ops runs on the CPU (skipped, or without a converter) and Core ML reads its result.

Example
    ``model.half()`` exported with float16 example inputs, lowered with the default target.

On model source
    Without an export it flags an example input the source states is float16
    (``x.half()``, ``dtype=torch.float16``) in the arguments of ``torch.export.export`` or
    in a ``{name: (module, example_inputs)}`` dict a function returns
    (``coreml_lint/source/inputs.py``), below iOS16.

Fix
    (a) feed float32 and cast inside the model (``x.half()`` as the first op);
    (b) ``minimum_deployment_target`` iOS16 or later;
    (c) ``coreml-lint lower`` casts each float16 value that crosses into a Core ML partition
    to float32 on the CPU and back to float16 inside it, wherever the final placement puts
    the crossing (also one that another rule's CPU fallback makes).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, nn, torch
from coreml_lint.rulekit.rule import Rule
from coreml_lint.source.context import SourceContext
from coreml_lint.source.inputs import example_inputs, input_dtype

# The metadata key that marks the float32 casts bridge_partitions inserts.
BRIDGE = "coreml_lint_fp16_bridge"


class Fp16InputBelowIOS16(Rule):
    code = "CML106"
    name = "fp16-input-below-ios16"
    outcome = Outcome.CRASH
    summary = "float16 input of a Core ML partition below iOS16: To use fp16 input ... iOS16+"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 16:
            return
        for part, value, readers in ctx.partition_inputs():
            if ctx.dtype(value) != "float16":
                continue
            yield ctx.finding(
                readers[0],
                f"float16 tensor '{value}' is an input of Core ML partition {part.id} below "
                "iOS16: lowering fails with `ValueError: To use fp16 input, please set "
                "minimum deployment target to iOS16+`",
                fix=f"feed '{value}' as float32 and cast it inside the model"
                if ctx.input_kinds.get(value) == "user_input"
                else f"let Core ML compute '{value}' too (`coreml-lint lower` instead casts it "
                "to float32 where it crosses into Core ML)",
                partitioner={"minimum_deployment_target": 16},
            )

    source_triggers = ("half", "float16")
    source_pattern = (
        "an example input given to `torch.export.export` (or a `programs` factory) as "
        "`x.half()` / `dtype=torch.float16`, below iOS16"
    )
    source_fix = "float32 inputs cast inside the model, or target iOS16"
    examples = (
        Invalid("ep = torch.export.export(model, (torch.randn(1, 3, 8, 8).half(),))", at=(1, 34)),
        Invalid(
            "def make_programs():\n"
            "    x = torch.zeros(1, 16, dtype=torch.float16)\n"
            '    return {"m": (Model().half(), (x,))}\n',
            at=(3, 36),
        ),
        Valid("ep = torch.export.export(model.half(), (torch.randn(1, 3, 8, 8),))"),
        Valid("y = model(torch.randn(1, 3).half())"),
    )

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        settings = ctx.config.partitioner if ctx.config is not None else PartitionerSettings()
        if settings.minimum_deployment_target >= 16:
            return
        for expr in example_inputs(ctx):
            if input_dtype(ctx, expr) != "float16":
                continue
            yield ctx.finding(
                expr,
                "example input is float16: the program gets a float16 input, which the first "
                "delegated op that reads it makes an input of a Core ML partition, and below "
                "iOS16 lowering fails with `ValueError: To use fp16 input, please set minimum "
                "deployment target to iOS16+`",
                fix="feed float32 and cast inside the model (`x.half()` as its first op), or "
                "target iOS16",
                partitioner={"minimum_deployment_target": 16},
            )

    def bridge_partitions(
        self,
        program: Any,
        partition_of: Callable[[Any], int | None],
        settings: PartitionerSettings,
    ) -> list[str]:
        """Below iOS16, each float16 value a Core ML partition reads from outside it (a
        program input, a value made on the CPU or by another partition, a constant it does
        not own) is cast to float32 on the CPU (:meth:`refuse` keeps that cast there) and
        back to float16 in the partition: the delegate's input is float32 and what it
        computes stays float16. Done on the edge program because only there is it known
        which values cross: a float16 op another rule keeps on the CPU makes a new one (a
        softplus on the CPU feeding an add in Core ML)."""
        import torch

        from coreml_lint.rulekit.fx import delegate_owned, edge_cast, is_fp16

        if settings.minimum_deployment_target >= 16:
            return []
        owned = delegate_owned(program, settings)

        def received(source: Any, part: int) -> bool:
            if source.op != "placeholder":
                return partition_of(source) != part
            # the stock tag_constant_data owns a constant all of whose readers share a tag
            return source.name not in owned or {partition_of(u) for u in source.users} != {part}

        inside: dict[tuple[Any, int], Any] = {}
        done = []
        for node in list(program.graph.nodes):
            part = partition_of(node)
            if part is None:
                continue
            for source in node.all_input_nodes:
                if not is_fp16(source) or not received(source, part):
                    continue
                if (source, part) not in inside:
                    up = edge_cast(program, source, torch.float32)
                    up.meta[BRIDGE] = True  # what :meth:`refuse` keeps on the CPU
                    inside[source, part] = edge_cast(program, up, torch.float16)
                    done.append(
                        f"{source.name}: float16 value entering Core ML cast to float32 on "
                        "the CPU and back to float16 inside (no fp16 input below iOS16)"
                    )
                node.replace_input_with(source, inside[source, part])
        return done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """The float16 -> float32 cast :meth:`bridge_partitions` put before a value enters
        Core ML below iOS16 (marked in its metadata, which the partitioner's copy of the
        program keeps); a cast the model wrote itself is left where it goes."""
        if settings.minimum_deployment_target >= 16 or not node.meta.get(BRIDGE):
            return None
        return "float16 value cast to float32 before Core ML (no fp16 input below iOS16)"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case("fp16-input", expect={"CML106"}, crash=r"To use fp16 input, please set minimum deployment")
def _():
    return module(lambda s, x: x * 2 + 1), (torch.randn(2, 8).half(),)


@case(
    "fp16-value-made-on-the-cpu",
    expect={"CML106"},
    settings={"skip": ["aten.sin.default"]},
    crash=r"To use fp16 input, please set minimum deployment",
)
def _():
    return module(lambda s, x: x.half().sin().cos().float()), (torch.randn(2, 8),)


@case(
    "fp16-output-of-another-partition",
    expect={"CML106"},
    settings={"skip": ["aten.sin.default"]},
    crash=r"To use fp16 input, please set minimum deployment",
)
def _():
    def body(s, x):
        a = x.half().cos()
        return (a.sin() + a).float()

    return module(body), (torch.randn(2, 8),)


@case("fp16-input-ios16", expect=set(), settings={"ios": 16})
def _():
    return module(lambda s, x: x * 2 + 1), (torch.randn(2, 8).half(),)


@case("fp16-model-fp32-input", expect=set())
def _():
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8).half()

        def forward(self, x):
            return self.lin(x.half()).float()

    return M(), (torch.randn(2, 8),)


@case("unfold-on-cpu", expect=set())
def _():
    return module(lambda s, x: x.unfold(1, 2, 2) * 2), (torch.randn(2, 8),)
