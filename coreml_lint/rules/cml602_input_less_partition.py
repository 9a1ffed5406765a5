"""CML602 input-less-partition: a Core ML partition with no inputs, below iOS18.

What it does
    Flags a predicted Core ML partition that receives no input at all (it computes only
    from constants: ``torch.arange(4).float() * 2`` split from the rest by a CPU op), when
    the deployment target is below iOS18.

Why it breaks
    ExecuTorch's Core ML backend asserts that a model without inputs targets iOS18:
    ``AssertionError: Deploying a model with no inputs in CoreML requires you set
    minimum_deployment_target to iOS18 or later in the CoreMLPartitioner.``
    The partitioner itself never avoids such partitions. A constant
    subgraph merged into a partition that also has an input is fine.

    A Python integer beside a float tensor in an arithmetic op (``x * 3``) is lifted by
    ExecuTorch into an int64 constant with a cast of its own, which the program graph does
    not show: with the op on the CPU (a skip entry), the cast is delegated, alone when no
    other Core ML partition can take it.

Example
    ``c = torch.arange(4).float() * 2; return torch.acosh(x) + c`` where the ``add`` runs on
    the CPU; ``x * 3`` with ``skip_ops_for_coreml_delegation=["aten.mul.tensor"]``.

Fix
    (a) an iOS18 target; (b) precompute the constant into a ``register_buffer``;
    (c) ``executorch.exir.passes.constant_prop_pass.constant_prop_pass(ep)`` before lowering;
    (d) for a lifted integer, write it as a float (``x * 3.0``), which ``coreml-lint lower``
    does.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.placement import CPU
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.numbers import integer, integers_as_floats, lifted
from coreml_lint.rulekit.rule import Rule

FLOATS = ("float32", "float16", "bfloat16")


def _cast_has_a_partition(ctx: ProgramContext, node: Any) -> bool:
    """Whether a Core ML partition the lifted integer's cast can join exists: one that does
    not read the op's result (joining one that does would make a cycle)."""
    users = ctx.users
    downstream, frontier = set(), list(node.outputs)
    while frontier:
        for user in users.get(frontier.pop(), ()):
            if user.name not in downstream:
                downstream.add(user.name)
                frontier.extend(user.outputs)
    return any(
        not any(n.name in downstream for n in part.nodes) for part in ctx.placement.partitions
    )


class InputLessPartition(Rule):
    code = "CML602"
    name = "input-less-partition"
    outcome = Outcome.CRASH
    summary = "Core ML partition without inputs below iOS18: AssertionError at lowering"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        if ctx.settings.minimum_deployment_target >= 18:
            return
        yield from self._lifted_integers(ctx)
        for part in ctx.placement.partitions:
            if part.inputs or part.states or not part.outputs:
                continue
            first = part.nodes[0]
            yield ctx.finding(
                first,
                f"Core ML partition {part.id} ({len(part.nodes)} ops, starting with "
                f"{ctx.edge_name(first)}) has no inputs: lowering fails with `AssertionError: "
                "Deploying a model with no inputs in CoreML requires you set "
                "minimum_deployment_target to iOS18`",
                fix="precompute the constant into a register_buffer, or run "
                "constant_prop_pass(ep) before lowering",
                partitioner={"minimum_deployment_target": 18},
            )

    @staticmethod
    def _lifted_integers(ctx: ProgramContext) -> Iterator[Finding]:
        """A Python integer in the Tensor slot of an op on a float tensor (``x * 3``) is
        lifted by ExecuTorch into an int64 constant and cast to the float dtype by an op of
        its own. With the op on the CPU, that cast is delegated alone: a partition with no
        inputs (the program graph shows neither the constant nor the cast)."""
        for node in ctx.graph.nodes:
            if ctx.placement.nodes[node.name].where != CPU or not lifted(node.target):
                continue
            tensors = node.tensor_inputs()
            if not tensors or ctx.dtype(tensors[0]) not in FLOATS:
                continue
            number = next((a for a in node.args[1:2] if integer(a)), None)
            if number is None or _cast_has_a_partition(ctx, node):
                continue
            yield ctx.finding(
                node,
                f"the integer {number} beside {node.target}'s float operand is lifted into a "
                "constant and cast by an op of its own, delegated alone while the op runs on "
                "the CPU: a Core ML partition with no inputs, and lowering fails with "
                "`AssertionError: Deploying a model with no inputs in CoreML requires you set "
                "minimum_deployment_target to iOS18`",
                fix=f"write the number as a float (`{number}.0`), or let Core ML run the op",
                partitioner={"minimum_deployment_target": 18},
            )

    def refuse_partition(
        self, nodes: list[Any], program: Any, settings: PartitionerSettings
    ) -> str | None:
        """A proposed partition that reads no run-time input, below iOS18: ExecuTorch's Core
        ML backend refuses it (``AssertionError: Deploying a model with no inputs``), so it
        stays on the CPU. Another rule's refusal can leave one behind: ``~torch.tensor(64)``
        once the int32 bitwise ops around it stay on the CPU (CML801's answer). What it
        owns is what the stock partitioner tags into a delegate (``tag_constant_data``):
        parameters, buffers never written, and lifted constants, with
        ``take_over_constant_data`` only; a written buffer and a user input are inputs."""
        from coreml_lint.rulekit.fx import delegate_owned

        if settings.minimum_deployment_target >= 18 or not settings.take_over_constant_data:
            return None
        owned = delegate_owned(program, settings)
        members = set(nodes)
        for node in nodes:
            for source in node.all_input_nodes:
                inside = source in members or (source.op == "placeholder" and source.name in owned)
                if not inside:
                    return None
        return "a Core ML partition that reads no input needs iOS18: left on the CPU"

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """An integer in the Tensor slot of an op on a float tensor is written as that float
        (torch computes ``x * 3`` as ``x * 3.0``: the number takes the tensor's dtype), so
        ExecuTorch lifts a float constant with no cast of its own; then executorch's
        ``constant_prop_pass`` folds the constant-only subgraph."""
        from executorch.exir.passes.constant_prop_pass import constant_prop_pass

        from coreml_lint.rulekit.fx import finish

        done = integers_as_floats(ep, lambda number: True)
        ep = finish(ep) if done else ep
        before = sum(1 for n in ep.graph.nodes if n.op == "call_function")
        ep = constant_prop_pass(ep)
        folded = before - sum(1 for n in ep.graph.nodes if n.op == "call_function")
        return ep, done + ([f"constant_prop_pass folded {folded} constant op(s)"] if folded else [])


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def constant_plus(s, x):
    c = torch.arange(4).float() * 2
    return x + c


@case(
    "input-less-partition",
    expect={"CML602"},
    settings={"skip": ["aten.add.tensor"]},
    crash=r"no inputs in CoreML requires",
)
def _():
    return module(constant_plus), (torch.randn(4),)


@case(
    "input-less-partition-ios18",
    expect=set(),
    settings={"skip": ["aten.add.tensor"], "ios": 18},
)
def _():
    return module(constant_plus), (torch.randn(4),)


@case(
    "input-less-cast-of-a-lifted-integer",
    expect={"CML602"},
    settings={"skip": ["aten.mul.tensor"]},
    crash=r"no inputs in CoreML requires",
)
def _():
    return module(lambda s, x: x * 3), (torch.randn(4),)


@case(
    "lifted-integer-cast-joins-an-upstream-partition",
    expect=set(),
    settings={"skip": ["aten.mul.tensor"]},
)
def _():
    return module(lambda s, x: x.exp() * 3), (torch.randn(4),)


@case("skipped-op-beside-a-float-number", expect=set(), settings={"skip": ["aten.mul.tensor"]})
def _():
    return module(lambda s, x: x * 3.0), (torch.randn(4),)


@case("constant-merged-with-input", expect=set())
def _():
    return module(lambda s, x: (torch.arange(4).float().exp(), x * 2)), (torch.randn(4),)


@case(
    "refusal-leaves-an-input-less-partition",
    expect={"CML801"},
    crash=r"bitwise_and. op only supports boolean input",
)
def _():
    """``lower`` keeps the int32 bitwise ops on the CPU (CML801's answer), which leaves
    ``~torch.tensor(64)`` a Core ML partition of its own that reads no input: its
    partitioner keeps that on the CPU too (CML602's answer), so the program lowers."""

    def forward(s, a, b):
        h = (a ^ b) | (a & 7)
        return (h & ~torch.tensor(64, dtype=torch.int32)).float() * 0.5

    ids = torch.tensor([[3, 900, 17, 64, 5, 71]], dtype=torch.int32)
    return module(forward), (ids, ids.flip(-1))
