"""CML609 method-partitions-differ: methods lowered together whose Core ML partitions differ.

What it does
    Flags a program of several methods (``to_edge_transform_and_lower({"prefill": ep1,
    "decode": ep2}, partitioner=[CoreMLPartitioner(...)])``; ``coreml-lint prefill.pt2
    decode.pt2 --methods``, or a ``.pt2`` holding several) whose methods the partitioner
    splits into different numbers of Core ML partitions.

Why it breaks
    With more than one method, ExecuTorch's Core ML backend combines partition *i* of every
    method into one multifunction Core ML model (one function per method) so the methods
    share their weights: the ``POSITIONAL`` weight-sharing strategy, the default. It
    requires every method to have the same number of partitions, and otherwise fails:
    ``ValueError: Method 'decode' has 1 partitions, but 'prefill' has 2. POSITIONAL weight
    sharing strategy requires all methods to have the same number of partitions``. A
    method runs a CPU-only op in one path (a Python branch on the token count, an op only
    prefill needs) and not in the other: that is enough. Partitions that pair up by
    position but hold different ops are combined anyway; whether such a model loads and
    shares its weights on a device could not be measured here (executorch#21951).

Example
    ``if t > 1: x = torch.acosh(x)`` in a decoder's forward, exported once with ``t = 4``
    (prefill) and once with ``t = 1`` (decode).

Fix
    (a) Keep the methods' graphs alike: the same ops on Core ML in every method (move the
    CPU-only op out of one path, or skip it from Core ML in every method with
    ``skip_ops_for_coreml_delegation``). (b) Lower without weight sharing:
    ``compile_specs`` with ``CoreMLBackend.generate_multimethod_weight_sharing_strategy_
    compile_spec(MULTIMETHOD_WEIGHT_SHARING_STRATEGY.DISABLED)`` (each method then carries
    its own copy of the weights).

References
    - https://github.com/pytorch/executorch/issues/21951
      the Core ML delegate emits an unloadable multi-method program (0x23)
    - https://github.com/pytorch/executorch/pull/18531
      a ONE_BLOB weight sharing strategy without POSITIONAL's equal partition counts (closed
      unmerged)
"""

from __future__ import annotations

from collections.abc import Iterator

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule


class MethodPartitionsDiffer(Rule):
    code = "CML609"
    name = "method-partitions-differ"
    outcome = Outcome.CRASH
    summary = (
        "methods lowered together with different Core ML partition counts: POSITIONAL "
        "weight sharing fails"
    )
    cannot_lower = (
        "the methods' graphs differ in what runs on the CPU; make them alike, or lower "
        "them without weight sharing (MULTIMETHOD_WEIGHT_SHARING_STRATEGY.DISABLED)"
    )

    def check_methods(self, methods: dict[str, ProgramContext]) -> Iterator[Finding]:
        counts = {name: len(ctx.placement.partitions) for name, ctx in methods.items()}
        first, *others = list(counts)
        odd = [name for name in others if counts[name] != counts[first]]
        if not odd:
            return
        name = odd[0]
        ctx = methods[name]
        more, fewer = (name, first) if counts[name] > counts[first] else (first, name)
        cpu = sorted(_cpu_ops(methods[more]) - _cpu_ops(methods[fewer]))
        where = f"; on the CPU only in {more}: {', '.join(cpu[:4])}" if cpu else ""
        yield ctx.finding(
            None,
            f"method {name!r} has {counts[name]} Core ML partition(s), {first!r} has "
            f"{counts[first]}{where}: lowered together, ExecuTorch combines partition i of "
            f"every method into one model and fails with `ValueError: Method {name!r} has "
            f"{counts[name]} partitions, but {first!r} has {counts[first]}. POSITIONAL "
            "weight sharing strategy requires all methods to have the same number of "
            "partitions`",
            fix="make the methods' graphs alike (the same ops on Core ML), or lower with "
            "MULTIMETHOD_WEIGHT_SHARING_STRATEGY.DISABLED",
            method=name,
        )


def _cpu_ops(ctx: ProgramContext) -> set[str]:
    return {ctx.edge_name(node) for node in ctx.graph.nodes if not ctx.on_coreml(node)}
