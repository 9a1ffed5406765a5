"""CML603 op-left-without-kernel: an op left on the CPU in a form ExecuTorch cannot run.

What it does
    Flags a node that is not delegated and that ExecuTorch cannot execute as it stands:

    - a non-core op the partitioner kept from decomposition (its ATen name passed the
      support test) and then did not delegate (its edge name was refused, typically by an
      edge-spelled ``skip_ops_for_coreml_delegation`` entry): ``to_executorch`` fails with
      ``RuntimeError: Missing out variants: {'aten::rms_norm'}`` when the op has no out
      variant, and the program fails at load with ``kernel 'aten::matmul.out' not found``
      when it has one the portable runtime lacks (docs/background.md#skip-list-names);
    - a non-core op that coremltools cannot convert and torch does not decompose, which
      fails edge verification in ``to_edge_transform_and_lower``; likewise a composite op
      torch decomposes into such an op (``slogdet`` into ``_linalg_slogdet``, ``inverse``
      into ``linalg_inv_ex``: measured on each op's own call by ``python -m
      coreml_lint.sweep edges``);
    - a core op left on the CPU with no kernel in the pip portable runtime (e.g.
      ``zeros_like`` after skipping it, ): loading fails unless your runtime
      links another kernel library.

Why it breaks
    ``ops_to_not_decompose`` returns op types, not nodes, so ExecuTorch removes every
    returned type from the decomposition table whether or not each node is delegated later.

Example
    ``CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.rms_norm.default"])``

Fix
    (a) spell a skip entry for a non-core op the ATen way (``"rms_norm.default"``) so it is
    decomposed, or skip only ops with a portable kernel; (b) avoid the op. The finding lints
    the program again with the ATen spelling and prints it only when it holds: a decomposed
    op can still be delegated and crash there (``"layer_norm.default"`` on a float16 model
    below iOS17 leaves ``native_layer_norm`` in Core ML: CML304).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.edge_refusals import refused_after_decomposition
from coreml_lint.program.placement import CPU
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import Invalid, Valid, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule

# Namespaces of torch's and ExecuTorch's own ops; a custom op outside them runs on the CPU only
# through an out variant its library registers (these libraries register theirs).
TORCH_NAMESPACES = {"aten", "dim_order_ops", "prim", "prims", "_operator", "higher_order"}
WITH_OUT_VARIANTS = {"quantized_decomposed", "llama"}


class OpLeftWithoutKernel(Rule):
    code = "CML603"
    name = "op-left-without-kernel"
    outcome = Outcome.CRASH
    other_severities = (Severity.WARNING,)
    summary = "op kept whole then left on the CPU, or without a CPU kernel"
    # Found in source by CML605's check of skip entries, which owns the rewrite.
    source_pattern = (
        "`skip_ops_for_coreml_delegation` entries that keep a non-core op whole for Core ML "
        "and then leave it on the CPU"
    )
    source_fix = "the ATen spelling, so torch decomposes the op"
    examples = (
        Invalid(
            'p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.rms_norm.default"])',
            'p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["rms_norm.default"])',
            at=(1, 55),
        ),
        Valid('p = CoreMLPartitioner(skip_ops_for_coreml_delegation=["rms_norm.default"])'),
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        table = ctx.table
        refused = refused_after_decomposition()
        for node in ctx.graph.nodes:
            p = ctx.placement.nodes[node.name]
            if p.decomposed and p.aten_name in refused:
                yield self._refused_pieces(ctx, node, p.aten_name, refused[p.aten_name])
                continue
            if p.where == CPU and node.namespace not in TORCH_NAMESPACES:
                yield from self._custom_op(ctx, node)
                continue
            if p.where != CPU or node.namespace not in ("aten", "dim_order_ops"):
                continue
            if not node.outputs:
                continue
            # A view op becomes its core ``*_copy`` variant in the edge graph.
            core = (
                p.aten_name in table.core_aten
                or p.aten_name in table.view
                or node.namespace == "dim_order_ops"
                or p.decomposed_into in table.core_aten
            )
            aten_form = p.aten_name.split(".")[0]
            if p.kept_whole and not core:
                if p.aten_name not in table.with_out_variant:
                    yield ctx.finding(
                        node,
                        f"{p.aten_name} was kept from decomposition for Core ML, then not "
                        f"delegated ({p.reason}): to_executorch fails with `RuntimeError: "
                        f"Missing out variants: {{'aten::{aten_form}'}}`",
                        fix="let Core ML run it, or have torch decompose it with the ATen "
                        f"spelling {p.aten_name.lower()!r} in the skip list (linted again "
                        "below)",
                        partitioner=ctx.with_skip(p.aten_name.lower()),
                    )
                    continue
            elif not core and not p.decomposed:
                yield ctx.finding(
                    node,
                    f"{p.aten_name} is neither delegated ({p.reason}) nor decomposed to core "
                    "ATen: to_edge_transform_and_lower fails edge verification",
                    fix="replace the op with core ATen ops, or register a decomposition",
                )
                continue
            if not table.has_portable_kernel(p.edge_name):
                kernel = p.edge_name.rsplit(".", 1)[0].replace(".", "::", 1)
                yield ctx.finding(
                    node,
                    f"{p.edge_name} runs on the CPU ({p.reason}) but the portable runtime has "
                    f"no kernel for it: loading fails with `kernel '{kernel}.out' not found` "
                    "unless your runtime links one",
                    severity=Severity.ERROR if p.kept_whole else Severity.WARNING,
                    outcome=Outcome.LOAD_FAILURE,
                    fix="let Core ML run it (drop its skip entry) or rewrite it with ops the "
                    "portable runtime has",
                )

    @staticmethod
    def _refused_pieces(ctx: ProgramContext, node: Any, op: str, piece: str) -> Finding:
        """A composite op ``to_edge`` decomposes into an op the edge verifier refuses
        (measured on the op's base call: ``program/edge_refusals.py``)."""
        finding = ctx.finding(
            node,
            f"{op} is decomposed by to_edge into {piece}, which is neither core ATen nor taken "
            "by the partitioner: ExecuTorch's edge verifier stops to_edge_transform_and_lower "
            f"(`{piece.removeprefix('aten.')} is not in Core ATen opset`) whatever runs it "
            "(measured on the op's own call)",
            fix="replace the op with core ATen ops, or compute it outside the exported program "
            "(of the weights alone: precompute it into a buffer)",
        )
        finding.extra["edge_refused"] = True
        return finding

    def unanswered(self, finding: Finding, *, dequantize_on_cpu: bool = False) -> str | None:
        """An op the edge verifier refuses after its decomposition runs nowhere: no CPU
        fallback or decomposition ``lower`` makes answers it."""
        if finding.extra.get("edge_refused"):
            return (
                f"{finding.message} (coreml-lint lower has no answer: the edge verifier "
                "refuses the op whatever runs it)"
            )
        return super().unanswered(finding, dequantize_on_cpu=dequantize_on_cpu)

    @staticmethod
    def _custom_op(ctx: ProgramContext, node: Any) -> Iterator[Finding]:
        """A custom op (a library's own, e.g. ``transformers::grouped_mm_fallback``) that
        Core ML cannot take: ExecuTorch runs it through an out variant, which most libraries
        do not register."""
        if node.namespace in WITH_OUT_VARIANTS or not node.outputs:
            return
        op = f"{node.namespace}::{node.target.split('.')[1]}"
        yield ctx.finding(
            node,
            f"custom op {op} runs on the CPU (coremltools has no converter for it), and "
            f"to_executorch needs an out variant for it: lowering is expected to fail with "
            f"`RuntimeError: Missing out variants: {{'{op}'}}` unless its library registers "
            f"`{op}.out` (and your runtime links its kernel)",
            fix="replace the custom op with standard torch ops, or register an out variant "
            "and link its kernel (transformers' mixture-of-experts models: set "
            "config._experts_implementation = 'batched_mm')",
        )

    def must_decompose(self, node: Any, settings: PartitionerSettings) -> bool:
        """An edge-spelled skip entry for an op kept whole would strand it on the CPU;
        decomposed, its pieces run wherever they can."""
        name = getattr(node.target, "__name__", "").lower()
        edge_name = name if "::" in name else "aten." + name
        return edge_name in {s.lower() for s in settings.skip_ops_for_coreml_delegation}


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
@case(
    "rmsnorm-edge-skip",
    expect={"CML603"},
    settings={"skip": ["aten.rms_norm.default"]},
    crash=r"Missing out variants: \{'aten::rms_norm'\}",
)
def _():
    return wrapped(nn.RMSNorm(16, eps=1e-6))


@case(
    "matmul-edge-skip",
    expect={"CML603"},
    settings={"skip": ["aten.matmul.default"]},
    runs_on_portable=False,
)
def _():
    return module(lambda s, x, y: torch.matmul(x, y)), (torch.randn(2, 3, 4), torch.randn(4, 5))


@case("slogdet-of-a-weight", expect={"CML603"}, crash=r"_linalg_slogdet.* not in Core ATen")
def _():
    weight = torch.randn(4, 4) + 4 * torch.eye(4)
    return module(lambda s, x: x @ s.weight + torch.slogdet(s.weight)[1], weight=weight), (
        torch.randn(2, 4),
    )


@case("slogdet-precomputed-into-a-buffer", expect=set())
def _():
    weight = torch.randn(4, 4) + 4 * torch.eye(4)
    logdet = torch.slogdet(weight)[1]
    return module(lambda s, x: x @ s.weight + s.logdet, weight=weight, logdet=logdet), (
        torch.randn(2, 4),
    )


@case(
    "matmul-aten-skip",
    expect=set(),
    settings={"skip": ["matmul.default"]},
)
def _():
    return module(lambda s, x, y: torch.matmul(x, y)), (torch.randn(2, 3, 4), torch.randn(4, 5))


def _custom_twice() -> Any:
    """A library's own op (registered once per process), as transformers registers
    ``grouped_mm_fallback``: a composite implementation and a fake one, no out variant."""
    if not hasattr(torch.ops, "coreml_lint_example") or not hasattr(
        torch.ops.coreml_lint_example, "twice"
    ):
        torch.library.define("coreml_lint_example::twice", "(Tensor x) -> Tensor")
        torch.library.impl("coreml_lint_example::twice", "CompositeExplicitAutograd")(
            lambda x: x * 2
        )
        torch.library.register_fake("coreml_lint_example::twice")(lambda x: torch.empty_like(x))
    return torch.ops.coreml_lint_example.twice


@case(
    "custom-op-on-cpu",
    expect={"CML603"},
    crash=r"Missing out variants: \{'coreml_lint_example::twice'\}",
)
def _() -> Any:
    twice = _custom_twice()
    return module(lambda s, x: twice(x) + 1), (torch.randn(2, 4),)
