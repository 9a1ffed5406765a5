"""CML107 quantization-target: quantized weights the deployment target cannot keep quantized.

What it does
    Recognizes how the weights were quantized, by the ops the program carries, and compares
    the deployment target with the lowest one at which the stock lowering converts that
    scheme and keeps the weights quantized in Core ML (``constexpr_*`` ops):

    - PT2E (``prepare_pt2e``/``convert_pt2e``, e.g. with ExecuTorch's ``CoreMLQuantizer``):
      ``quantized_decomposed.dequantize_per_channel``/``dequantize_per_tensor`` of int8
      weights, and ``quantize_per_tensor``/``dequantize_per_tensor`` pairs on activations;
    - torchao ``quantize_`` with ``IntxWeightOnlyConfig``: ``torchao.dequantize_affine``,
      int8 per channel, 4-bit, per group (blockwise), and on convolution weights;
    - torchao ``CodebookWeightOnlyConfig``: ``quant.dequantize_codebook``;
    - int8 weights cast to float before use (torchao ``Int8WeightOnlyConfig``, or a
      hand-written int8 weight): Core ML folds the cast into dense fp16 weights;
    - coremltools palettization (``PostTrainingPalettizer``), whose LUT the program carries
      only as ``_COREML_/.../lut`` buffers no op reads.

    Below the scheme's target it is an error naming the op, the real error and the target
    that works; a scheme that lowers but loses its quantization is a warning.

Why it breaks
    coremltools maps each scheme to MIL ops that exist only from some iOS opset on
    (``constexpr_affine_dequantize`` iOS16, ``quantize`` iOS17, blockwise and 4-bit
    ``constexpr_blockwise_shift_scale`` and grouped ``constexpr_lut_to_dense`` iOS18), and
    casts that the iOS15/iOS16 opsets do not have (an int64 zero point cast to int8). The
    table below was measured with the stock ``CoreMLPartitioner``; ``coreml-lint rule
    CML107`` prints it.

Example
    ``quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4,
    granularity=PerGroup(32)))`` lowered with the default target fails with ``ValueError:
    The more fine-grained quantization (such as blockwise) is only supported since iOS18``.

Fix
    (a) the deployment target the table names (``--ios N``); (b) ``coreml-lint lower
    --dequantize-on-cpu`` runs the dequantize on the CPU where ExecuTorch has a kernel for it
    (PT2E, int8 casts): the .pte keeps int8 weights, Core ML computes with float ones.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import EIGHT_BIT_DTYPES, FLOAT_DTYPES, Node
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, nn, returns, torch
from coreml_lint.rulekit.rule import Rule

MEASURED_ON = "torch 2.13.0, executorch 1.5.1, coremltools 9.0, torchao 0.18.0"
TARGETS = (15, 16, 17, 18)

# The first line of the stock lowering's error, as measured; {shape} and {dtype} are the
# quantized tensor's, {ios} the target lowered at.
ZERO_POINT_CAST = (
    "NotImplementedError: Parameter dtype of the cast operation can be one of the ['fp16', "
    "'fp32', 'int32', 'bool']. Provided int8"
)
NO_AFFINE_OP = (
    "ValueError: No available version for constexpr_affine_dequantize in the "
    "coremltools.target.iOS15 opset. Please update the minimum_deployment_target to at least "
    "coremltools.target.iOS16"
)
NO_QUANTIZE_OP = (
    "ValueError: No available version for quantize in the coremltools.target.iOS{ios} opset. "
    "Please update the minimum_deployment_target to at least coremltools.target.iOS17"
)
RANK_2_ONLY = "AssertionError: dequantize_affine only supports rank 2 inputs"
BLOCKWISE = (
    "ValueError: The more fine-grained quantization (such as blockwise) is only supported "
    "since iOS18.Please set minimum_deployment_target to iOS18 for using it."
)
NO_INT4 = (
    "ValueError: Op ... (op_type: constexpr_affine_dequantize) Input quantized_data=... "
    "expects tensor or scalar of dtype from type domain ['uint8', 'int8'] but got "
    "tensor[{shape},int4]"
)
NO_EIGHT_BIT = (
    "ValueError: Op ... (op_type: {op_type}) Input x=... expects tensor or scalar of dtype "
    "from type domain ['fp16', 'fp32', 'int32', 'bool'] but got tensor[{shape},{dtype}]"
)
GROUPED_LUT = (
    "AssertionError: The pre-iOS18 palettization only supports per-tensor lut, but got more "
    "than one lut on ..."
)
PACK_4_BIT = "ValueError: To pack elements into 4-bit, the max value is 7, but got ..."


@dataclass(frozen=True)
class Scheme:
    """One way of quantizing weights, and what the stock lowering does with it per target."""

    title: str
    quantized_from: int | None  # lowest target keeping the weights quantized; None: never
    lowers_from: int | None  # lowest target at which it lowers at all
    errors: dict[int, str]  # target below ``lowers_from`` -> the error lowering stops with
    kept_as: str  # what Core ML holds where it lowers
    cpu_kernel: bool  # ExecuTorch has CPU kernels for its ops (``--dequantize-on-cpu``)
    instead: str  # another way, when the target cannot move
    quantizes: str = "weights"

    def error(self, ios: int, **fields: Any) -> str:
        return self.errors[ios].format(ios=ios, **fields)


_PT2E_ALTERNATIVE = (
    "or `coreml-lint lower --dequantize-on-cpu` (the weights then run dequantized in Core ML)"
)
_TORCHAO_INT8 = (
    "or quantize to int8 per channel (`IntxWeightOnlyConfig(weight_dtype=torch.int8, "
    "granularity=PerAxis(0))`, iOS16)"
)
# Measured with the stock CoreMLPartitioner, one lowering per scheme and target (the
# program cases at the bottom of this module re-measure every entry in the oracle tests).
SCHEMES: dict[str, Scheme] = {
    "pt2e": Scheme(
        "PT2E int8 weights (`quantized_decomposed` dequantize, e.g. the CoreMLQuantizer)",
        17,
        17,
        {15: ZERO_POINT_CAST, 16: ZERO_POINT_CAST},
        "constexpr_affine_dequantize at iOS17, constexpr_blockwise_shift_scale at iOS18",
        True,
        _PT2E_ALTERNATIVE,
    ),
    "pt2e-transposed": Scheme(
        "int8 weights transposed before their `quantized_decomposed` dequantize",
        17,
        17,
        {15: NO_EIGHT_BIT, 16: NO_EIGHT_BIT},
        "constexpr_affine_dequantize at iOS17 (the transpose folded into the int8 constant), "
        "constexpr_blockwise_shift_scale at iOS18",
        True,
        _PT2E_ALTERNATIVE,
    ),
    "pt2e-activations": Scheme(
        "PT2E uint8 activations (`quantized_decomposed.quantize_per_tensor`)",
        17,
        17,
        {15: NO_QUANTIZE_OP, 16: NO_QUANTIZE_OP},
        "MIL quantize/dequantize",
        True,
        _PT2E_ALTERNATIVE,
        "activations",
    ),
    "torchao-int8": Scheme(
        "torchao int8 per-channel weights (`IntxWeightOnlyConfig`, `dequantize_affine`)",
        16,
        16,
        {15: NO_AFFINE_OP},
        "constexpr_affine_dequantize at iOS16/17, constexpr_blockwise_shift_scale at iOS18",
        False,
        "",
    ),
    "torchao-int4": Scheme(
        "torchao 4-bit per-channel weights (`IntxWeightOnlyConfig`, `dequantize_affine`)",
        18,
        18,
        {15: NO_AFFINE_OP, 16: NO_INT4, 17: NO_INT4},
        "constexpr_blockwise_shift_scale with int4 data",
        False,
        _TORCHAO_INT8,
    ),
    "torchao-blockwise": Scheme(
        "torchao per-group (blockwise) weights (`IntxWeightOnlyConfig(granularity=PerGroup)`)",
        18,
        18,
        {15: BLOCKWISE, 16: BLOCKWISE, 17: BLOCKWISE},
        "constexpr_blockwise_shift_scale",
        False,
        _TORCHAO_INT8,
    ),
    "torchao-rank": Scheme(
        "torchao-quantized convolution weights (`dequantize_affine` of a rank-{rank} weight)",
        None,
        None,
        {ios: RANK_2_ONLY for ios in TARGETS},
        "",
        False,
        "quantize only the Linear layers (`quantize_(model, config, filter_fn=...)`), or the "
        "convolutions with PT2E and the CoreMLQuantizer (kept quantized from iOS17)",
    ),
    "codebook": Scheme(
        "torchao codebook (LUT) weights (`CodebookWeightOnlyConfig`, `dequantize_codebook`)",
        18,
        18,
        {15: NO_EIGHT_BIT, 16: NO_EIGHT_BIT, 17: GROUPED_LUT},
        "constexpr_lut_to_dense",
        False,
        "",
    ),
    "codebook-per-tensor": Scheme(
        "torchao codebook (LUT) weights with one LUT per tensor (`CodebookWeightOnlyConfig`)",
        18,
        18,
        {15: NO_EIGHT_BIT, 16: NO_EIGHT_BIT, 17: PACK_4_BIT},
        "constexpr_lut_to_dense",
        False,
        "",
    ),
    "int8-cast": Scheme(
        "int8 weights cast to float (torchao `Int8WeightOnlyConfig`, or a hand-written int8 "
        "weight)",
        None,
        17,
        {15: NO_EIGHT_BIT, 16: NO_EIGHT_BIT},
        "dense fp16 weights (coremltools folds the cast into the constant)",
        True,
        "quantize with a scheme Core ML keeps: torchao `IntxWeightOnlyConfig(weight_dtype="
        "torch.int8, granularity=PerAxis(0))` (iOS16) or PT2E with the CoreMLQuantizer (iOS17)",
    ),
    "palettized": Scheme(
        "coremltools palettization (`PostTrainingPalettizer`, the LUT in `_COREML_/` buffers)",
        None,
        15,
        {},
        "dense fp16 weights (no op reads the LUT, so ExecuTorch never hands it to Core ML)",
        False,
        "quantize with torchao's `CodebookWeightOnlyConfig` (kept from iOS18), or convert "
        "with coremltools (`ct.convert`) instead of ExecuTorch",
    ),
}


@dataclass
class Quantized:
    """A use of a scheme in the program: the op that dequantizes (or first reads) the
    weight, the 8-bit constants it covers, and what the error text needs."""

    scheme: str
    node: Node
    constants: tuple[str, ...]
    fields: dict[str, Any]


# Ops a weight passes through unchanged in value on its way to a dequantize or a matmul.
_PASS_THROUGH = frozenset(
    {"view", "_unsafe_view", "permute", "t", "transpose", "clone", "expand", "slice"}
    | {"select", "unsqueeze", "squeeze", "_to_copy", "alias"}
)
_SCALING = frozenset({"mul", "div", "sub", "add"})
_MATMULS = frozenset(
    {"mm", "matmul", "linear", "addmm", "bmm", "baddbmm", "convolution", "_convolution"}
    | {"conv1d", "conv2d", "conv3d"}
)
_TRANSPOSES = frozenset({"t", "permute", "transpose"})
_CONSTANT_KINDS = ("parameter", "buffer", "constant")
_QUANTIZING = (
    "quantized_decomposed.dequantize_per_",
    "quantized_decomposed.quantize_per_",
    "torchao.dequantize_affine.default",
    "quant.dequantize_codebook.default",
)


def quantized_weights(ctx: ProgramContext) -> list[Quantized]:
    """Every quantized weight a Core ML partition owns, with its scheme (once per graph)."""
    if "quantized_weights" not in ctx.memo:
        found = [q for node in ctx.coreml_nodes() if (q := _dequantizing(ctx, node))]
        covered = {c for q in found for c in q.constants}
        found += _cast_weights(ctx, covered) + _palettized(ctx)
        if any(q.scheme in ("pt2e", "pt2e-transposed") for q in found):  # weights fail first
            found = [q for q in found if q.scheme != "pt2e-activations"]
        ctx.memo["quantized_weights"] = found
    return ctx.memo["quantized_weights"]


def quantized_constants(ctx: ProgramContext) -> set[str]:
    """The 8-bit constants this rule speaks for (CML103 leaves them alone)."""
    return {c for q in quantized_weights(ctx) for c in q.constants}


def _owned_constants(ctx: ProgramContext) -> set[str]:
    """The constants Core ML partitions own (once per graph: asked for every node)."""
    if "owned_constants" not in ctx.memo:
        owned = {c for part in ctx.placement.partitions for c in part.constants}
        ctx.memo["owned_constants"] = owned
    return ctx.memo["owned_constants"]


def _sources(ctx: ProgramContext, value: str, depth: int = 6) -> list[str]:
    """The constants ``value`` is made from by ops that pass values through unchanged."""
    if ctx.input_kinds.get(value) in _CONSTANT_KINDS:
        return [value]
    producer = ctx.producers.get(value)
    if depth == 0 or producer is None or producer.op_base not in _PASS_THROUGH:
        return []
    return [s for v in producer.tensor_inputs()[:1] for s in _sources(ctx, v, depth - 1)]


def _transposed(ctx: ProgramContext, value: str, depth: int = 6) -> bool:
    """Whether ``value`` is a constant transposed (and otherwise passed through unchanged)."""
    producer = ctx.producers.get(value)
    if depth == 0 or producer is None or producer.op_base not in _PASS_THROUGH:
        return False
    inputs = producer.tensor_inputs()[:1]
    return producer.op_base in _TRANSPOSES or any(_transposed(ctx, v, depth - 1) for v in inputs)


def _eight_bit(ctx: ProgramContext, values: list[str]) -> tuple[str, ...]:
    owned = _owned_constants(ctx)
    found = [s for v in values for s in _sources(ctx, v)]
    return tuple(dict.fromkeys(s for s in found if ctx.dtype(s) in EIGHT_BIT_DTYPES and s in owned))


def _dequantizing(ctx: ProgramContext, node: Node) -> Quantized | None:
    """The scheme of a quantize/dequantize op on Core ML, or None."""
    target, inputs = node.target, node.tensor_inputs()
    if not inputs or not target.startswith(_QUANTIZING):
        return None
    data = inputs[0]
    covered = _eight_bit(ctx, inputs)
    fields = {"shape": _shape(ctx, data), "dtype": ctx.dtype(data), "op_type": "cast"}
    if target.startswith("quantized_decomposed.dequantize_per_"):
        if covered and _transposed(ctx, data):  # the transpose of the int8 data fails first
            fields.update(shape=_shape(ctx, covered[0]), op_type="transpose")
            return Quantized("pt2e-transposed", node, covered, fields)
        return Quantized("pt2e", node, covered, fields) if covered else None
    if target.startswith("quantized_decomposed.quantize_per_"):
        return Quantized("pt2e-activations", node, covered, fields)
    if target == "torchao.dequantize_affine.default" and covered:
        return Quantized(_affine_scheme(ctx, node, data), node, covered, fields)
    if target == "quant.dequantize_codebook.default" and covered:
        block = node.arg(3, "block_size") or []
        per_tensor = all(b == -1 for b in block)
        scheme = "codebook-per-tensor" if per_tensor else "codebook"
        codes = covered[0]
        fields.update(shape=_shape(ctx, codes), dtype=ctx.dtype(codes))
        return Quantized(scheme, node, covered, fields)
    return None


def _affine_scheme(ctx: ProgramContext, node: Node, data: str) -> str:
    """torchao's ``dequantize_affine(data, block_size, scale, zero_point, dtype, qmin, qmax)``:
    its rank, bit width and granularity decide what coremltools makes of it."""
    shape = ctx.shape(data) or ()
    if len(shape) != 2:
        return "torchao-rank"
    block = node.arg(1, "block_size") or []
    if any(b not in (1, dim) for b, dim in zip(block, shape, strict=False)):
        return "torchao-blockwise"
    low, high = node.arg(5, "quant_min"), node.arg(6, "quant_max")
    if isinstance(low, int) and isinstance(high, int) and high - low < 16:
        return "torchao-int4"
    return "torchao-int8"


def _shape(ctx: ProgramContext, value: str) -> str:
    return ",".join(str(d) for d in ctx.shape(value) or ())


def _cast_weights(ctx: ProgramContext, covered: set[str]) -> list[Quantized]:
    """8-bit constants a Core ML partition casts to float and multiplies with: weights whose
    dequantization is a plain cast (and a scale) rather than a dequantize op."""
    found = []
    owned = _owned_constants(ctx) - covered
    for value in (s.name for s in ctx.graph.inputs if s.name in owned):
        if ctx.dtype(value) not in EIGHT_BIT_DTYPES:
            continue
        readers = [u for u in ctx.users.get(value, []) if ctx.on_coreml(u)]
        if not readers or not _reaches_matmul_as_float(ctx, value):
            continue
        first = readers[0]
        fields = {
            "shape": _shape(ctx, value),
            "dtype": ctx.dtype(value),
            "op_type": "transpose" if first.op_base in _TRANSPOSES else "cast",
        }
        found.append(Quantized("int8-cast", first, (value,), fields))
    return found


def _reaches_matmul_as_float(ctx: ProgramContext, value: str, depth: int = 8) -> bool:
    """Whether ``value`` is cast to a float dtype and then (scaled, reshaped) multiplied."""
    frontier = [(value, False)]
    for _ in range(depth):
        following = []
        for name, cast in frontier:
            for user in ctx.users.get(name, []):
                base, out = user.op_base, user.outputs[0] if user.outputs else None
                if cast and base in _MATMULS:
                    return True
                if out is None:
                    continue
                if base == "_to_copy":
                    following.append((out, cast or ctx.dtype(out) in FLOAT_DTYPES))
                elif base in _PASS_THROUGH or (cast and base in _SCALING):
                    following.append((out, cast))
        if not following:
            return False
        frontier = following
    return False


_LUT = re.compile(r"^(?P<prefix>.*)_COREML_/(?P<attr>.+)/lut$")


def _palettized(ctx: ProgramContext) -> list[Quantized]:
    """Weights coremltools palettized: the LUT is a ``_COREML_/<attr>/lut`` buffer beside a
    dense weight that the program reads as it is."""
    by_target = {s.target: s.name for s in ctx.graph.inputs if s.target}
    found = []
    for spec in ctx.graph.inputs:
        match = _LUT.match(spec.target or "")
        weight = match and by_target.get(match["prefix"] + match["attr"])
        readers = [u for u in ctx.users.get(weight or "", []) if ctx.on_coreml(u)]
        if match and readers:
            fields = {"lut": spec.target, "weight": match["prefix"] + match["attr"]}
            found.append(Quantized("palettized", readers[0], (), fields))
    return found


class QuantizationTarget(Rule):
    code = "CML107"
    name = "quantization-target"
    outcome = Outcome.CRASH
    other_severities = (Severity.WARNING,)
    summary = (
        "quantized weights below the target that keeps them quantized: conversion error, "
        "or dense weights"
    )
    cannot_lower = (
        "a quantization scheme converts from its own deployment target on; lower it with that "
        "target, or choose --dequantize-on-cpu where ExecuTorch has CPU kernels for it"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        uses: dict[str, list[Quantized]] = {}
        for q in quantized_weights(ctx):
            uses.setdefault(q.scheme, []).append(q)
        for key, found in uses.items():
            finding = self._finding(ctx, key, found)
            if finding is not None:
                finding.count = len(found)
                yield finding

    def _finding(self, ctx: ProgramContext, key: str, found: list[Quantized]) -> Finding | None:
        scheme, first, ios = SCHEMES[key], found[0], ctx.settings.minimum_deployment_target
        fields = {**first.fields, "rank": len(first.fields.get("shape", "").split(","))}
        title = scheme.title.format(**fields)
        op, names = _op_name(ctx, first.node), _weight_names(ctx, found)
        extra = {"scheme": key, "title": title}
        if ios not in scheme.errors:
            if scheme.quantized_from is not None:
                return None  # lowers here with the weights kept quantized
            return ctx.finding(
                first.node,
                f"{title}: {names} lower at iOS{ios}, but Core ML holds {scheme.kept_as}: the "
                "quantization is lost (at every target it lowers at)",
                fix=scheme.instead,
                severity=Severity.WARNING,
                outcome=Outcome.SILENT,
                **extra,
            )
        works = scheme.quantized_from or scheme.lowers_from
        return ctx.finding(
            first.node,
            f"{title}: {op} on {names} fails at iOS{ios} with `{scheme.error(ios, **fields)}`; "
            + _from_then_on(scheme),
            fix=_fix(scheme),
            partitioner={"minimum_deployment_target": works} if works else None,
            **extra,
        )

    def unanswered(self, finding: Finding, *, dequantize_on_cpu: bool = False) -> str | None:
        scheme = SCHEMES[finding.extra["scheme"]]
        if finding.severity is not Severity.ERROR or (dequantize_on_cpu and scheme.cpu_kernel):
            return None
        title, works = finding.extra["title"], scheme.quantized_from or scheme.lowers_from
        no_kernel = (
            f"ExecuTorch has no CPU kernel for {finding.op}, so it cannot run on the CPU; "
            if dequantize_on_cpu
            else ""
        )
        if works is None:
            return f"{no_kernel}{title} convert at no deployment target: {scheme.instead}"
        line = f"{no_kernel}{title} need iOS{works}: lower with --ios {works}"
        if scheme.quantized_from is None:
            line += f" (where they become {scheme.kept_as.split(' (')[0]})"
        if scheme.cpu_kernel and not dequantize_on_cpu:
            line += ", or with --dequantize-on-cpu to dequantize them on the CPU"
        return line

    def dequantize_on_cpu(self, node: Any, settings: PartitionerSettings) -> str | None:
        from coreml_lint.rulekit.fx import EIGHT_BIT, touches

        if "quantized_decomposed" in str(node.target):
            import executorch.kernels.quantized  # noqa: F401  registers the CPU kernels

            return (
                "runs on the CPU with ExecuTorch's quantized kernels (--dequantize-on-cpu): Core "
                "ML computes with dequantized float weights; an app links kernels_quantized"
            )
        if touches(node, EIGHT_BIT):
            return (
                "reads int8 weights, so it runs on the CPU (--dequantize-on-cpu): Core ML gets "
                "float weights"
            )
        return None

    @classmethod
    def readme_notes(cls) -> str:
        return scheme_table()


def _from_then_on(scheme: Scheme) -> str:
    if scheme.quantized_from:
        return (
            f"from iOS{scheme.quantized_from} on it lowers with the {scheme.quantizes} "
            f"quantized ({scheme.kept_as})"
        )
    if scheme.lowers_from:
        return f"from iOS{scheme.lowers_from} on it lowers, but as {scheme.kept_as}"
    return "it fails the same way at every target from iOS15 to iOS18"


def _fix(scheme: Scheme) -> str:
    if scheme.quantized_from:
        target = scheme.quantized_from
        return ", ".join(
            p
            for p in (
                f"lower with minimum_deployment_target iOS{target} (`--ios {target}`)",
                scheme.instead,
            )
            if p
        )
    if scheme.lowers_from:
        target = scheme.lowers_from
        return (
            f"to keep the weights quantized, {scheme.instead}; to lower them as they are, "
            f"minimum_deployment_target iOS{target} (`--ios {target}`), with dense weights"
        )
    return scheme.instead


def _op_name(ctx: ProgramContext, node: Node) -> str:
    """The op as the edge graph has it (a decomposed one by its ATen name)."""
    if ctx.placement.nodes[node.name].decomposed:
        return f"`{node.target}`"
    return f"`{ctx.edge_name(node)}`"


def _weight_names(ctx: ProgramContext, found: list[Quantized]) -> str:
    """``2 weight(s) ('l1.weight.qdata', 'l2.weight.qdata')``, or the activations' count."""
    targets = {s.name: s.target or s.name for s in ctx.graph.inputs}
    names = [
        q.fields.get("weight") or targets[q.constants[0]]
        for q in found
        if q.fields.get("weight") or q.constants
    ]
    if not names:
        return f"{len(found)} activation(s)"
    shown = ", ".join(f"'{n}'" for n in names[:3]) + (" ..." if len(names) > 3 else "")
    return f"{len(names)} weight(s) ({shown})"


def scheme_table() -> str:
    """The README's paragraph on quantized models, from ``SCHEMES``."""
    rows = [
        "### Quantized models",
        "",
        "Each quantization scheme converts from its own deployment target on (CML107); below "
        "it the stock lowering fails, and some schemes never keep the weights quantized. "
        f"Measured with the stock `CoreMLPartitioner` ({MEASURED_ON}):",
        "",
        "| scheme | fails at | lowers from | Core ML holds |",
        "|---|---|---|---|",
    ]
    for scheme in SCHEMES.values():
        title = scheme.title.format(rank=4)
        fails = ", ".join(f"iOS{ios}" for ios in sorted(scheme.errors)) or "—"
        lowers = f"iOS{scheme.lowers_from}" if scheme.lowers_from else "never"
        rows.append(f"| {title} | {fails} | {lowers} | {scheme.kept_as or '—'} |")
    rows += [
        "",
        "`coreml-lint lower` stops at once below a scheme's target and names the target to "
        "use; `--dequantize-on-cpu` instead keeps PT2E dequantize ops (and int8 casts) on the "
        "CPU, which gives up the quantized weights in Core ML.",
    ]
    return "\n".join(rows)


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
# Random weights in two tiny Linear layers (or one Conv2d), quantized the way users do it.
def _mlp() -> tuple[Any, tuple[Any, ...]]:
    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1, self.l2 = nn.Linear(64, 64), nn.Linear(64, 64)

        def forward(self, x: Any) -> Any:
            return self.l2(torch.relu(self.l1(x)))

    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(2, 64),)


def _residual() -> tuple[Any, tuple[Any, ...]]:
    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x: Any) -> Any:
            return x + self.fc(x)

    torch.manual_seed(0)
    return Residual().eval(), (torch.randn(1, 16, 64),)


def _conv() -> tuple[Any, tuple[Any, ...]]:
    class Conv(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return self.c1(x)

    torch.manual_seed(0)
    return Conv().eval(), (torch.randn(1, 3, 8, 8),)


@cache
def _pt2e(
    activations: bool, conv: bool = False, residual: bool = False
) -> tuple[Any, tuple[Any, ...]]:
    """ExecuTorch's CoreMLQuantizer through torchao's prepare_pt2e/convert_pt2e: int8
    weights per channel (of the MLP, or of the Conv2d), and uint8 activations when asked.

    The quantizer traces its ~400 match patterns with strict (dynamo) export, over a minute
    here; traced non-strict they are the same ATen patterns and give the same program
    (compared on this stack), in a fraction of the time. Built once per process."""
    from unittest import mock

    from coremltools.optimize.torch.quantization.quantization_config import (
        LinearQuantizerConfig,
    )
    from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = LinearQuantizerConfig.from_dict(
        {
            "global_config": {
                "quantization_scheme": "symmetric",
                "milestones": [0, 0, 10, 10],
                "weight_dtype": torch.qint8,
                "weight_per_channel": True,
                "activation_dtype": torch.quint8 if activations else torch.float32,
            }
        }
    )
    model, inputs = _conv() if conv else _residual() if residual else _mlp()
    export = torch.export.export
    with mock.patch.object(
        torch.export, "export", lambda *a, **k: export(*a, **{**k, "strict": False})
    ):
        prepared = prepare_pt2e(export(model, inputs).module(), CoreMLQuantizer(config))
    prepared(*inputs)  # calibration
    return convert_pt2e(prepared), inputs


def _intx(bits: int, group: int | None = None, net: Any = None) -> tuple[Any, tuple[Any, ...]]:
    """torchao ``IntxWeightOnlyConfig``: per channel, or per group of ``group`` columns."""
    from torchao.quantization import IntxWeightOnlyConfig, PerAxis, PerGroup, quantize_

    model, inputs = (net or _mlp)()
    granularity = PerGroup(group) if group else PerAxis(0)
    dtype = torch.int8 if bits == 8 else torch.int4
    config = IntxWeightOnlyConfig(weight_dtype=dtype, granularity=granularity)
    quantize_(model, config, filter_fn=lambda m, fqn: isinstance(m, (nn.Linear, nn.Conv2d)))
    return model, inputs


def _codebook(block: tuple[int, int]) -> tuple[Any, tuple[Any, ...]]:
    from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig
    from torchao.quantization import quantize_

    model, inputs = _mlp()
    quantize_(model, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=list(block)))
    return model, inputs


def _int8_weight_only() -> tuple[Any, tuple[Any, ...]]:
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    model, inputs = _mlp()
    quantize_(model, Int8WeightOnlyConfig())
    return model, inputs


def _palettized_mlp() -> tuple[Any, tuple[Any, ...]]:
    from coremltools.optimize.torch.palettization import (
        PostTrainingPalettizer,
        PostTrainingPalettizerConfig,
    )

    model, inputs = _mlp()
    config = PostTrainingPalettizerConfig.from_dict(
        {"global_config": {"n_bits": 4, "granularity": "per_tensor"}}
    )
    return PostTrainingPalettizer(model, config).compress(), inputs


def _hand_written(activations: bool) -> tuple[Any, tuple[Any, ...]]:
    """A PT2E-style program written by hand: an int8 weight dequantized per tensor, or a
    float weight behind a quantize/dequantize pair on the activation."""
    import torch.ao.quantization.fx._decomposed

    ops = torch.ops.quantized_decomposed

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            weight = torch.randint(-100, 100, (8, 16), dtype=torch.int8)
            self.register_buffer("w", weight.float() if activations else weight)

        def forward(self, x: Any) -> Any:
            if activations:
                q = ops.quantize_per_tensor(x, 0.02, 128, 0, 255, torch.uint8)
                return F.linear(
                    ops.dequantize_per_tensor(q, 0.02, 128, 0, 255, torch.uint8), self.w
                )
            w = ops.dequantize_per_tensor(self.w, 0.01, 0, -128, 127, torch.int8)
            return F.linear(x, w)

    torch.manual_seed(0)
    return M(), (torch.randn(2, 16),)


def _raw_int8(dequantize: bool) -> tuple[Any, tuple[Any, ...]]:
    """A hand-written int8 weight read transposed: dequantized per channel after the
    transpose, or cast to float and scaled."""
    import torch.ao.quantization.fx._decomposed

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("w", torch.randint(-100, 100, (8, 16), dtype=torch.int8))
            self.register_buffer("scale", torch.full((8,), 0.01))
            self.register_buffer("zp", torch.zeros(8, dtype=torch.int64))

        def forward(self, x: Any) -> Any:
            if not dequantize:
                return x @ (self.w.t().float() * self.scale)
            w = torch.ops.quantized_decomposed.dequantize_per_channel(
                self.w.t(), self.scale, self.zp, 1, -128, 127, torch.int8
            )
            return x @ w

    torch.manual_seed(0)
    return M(), (torch.randn(2, 16),)


def _dense(lowered: Any) -> bool:
    """MIL evidence that the weights were not kept quantized."""
    return "constexpr_" not in lowered.mil


def _per_target(name: str, build: Any, outcomes: dict[int, Any], warns: bool = False) -> None:
    """One case per target: a crash regex (str), or evidence the MIL must show."""
    for ios, outcome in outcomes.items():
        crashes = isinstance(outcome, str)
        case(
            f"{name}-ios{ios}",
            expect={"CML107"} if crashes else set(),
            settings={"ios": ios} if ios != 15 else {},
            crash=outcome if crashes else None,
            clean=None if crashes else outcome,
            warnings=frozenset({"CML107"} if warns and not crashes else ()),
        )(build)


_AFFINE, _BLOCKWISE = returns("constexpr_affine_dequantize"), returns("constexpr_blockwise_shift")
_ZP_CAST = re.escape(ZERO_POINT_CAST)
_TRANSPOSE_INT8 = r"op_type: transpose\) .*but got tensor\[64,64,int8\]"
_CAST_UINT8 = r"op_type: cast\) .*but got tensor\[64,64,uint8\]"
_TRANSPOSE_RAW = r"op_type: transpose\) .*but got tensor\[8,16,int8\]"
_INT4 = r"but got tensor\[64,64,int4\]"
_QUANTIZE = returns(r"= quantize\(")


def _and_quantize(weights: Any) -> Any:
    """MIL evidence of quantized weights and of a MIL ``quantize`` op on the activations."""
    return lambda lowered: weights(lowered) and _QUANTIZE(lowered)


_per_target(
    "pt2e-int8-weights",
    lambda: _pt2e(False),
    {15: _ZP_CAST, 16: _ZP_CAST, 17: _AFFINE, 18: _BLOCKWISE},
)
_per_target("pt2e-int8-conv", lambda: _pt2e(False, conv=True), {16: _ZP_CAST, 17: _AFFINE})
_per_target(
    "pt2e-int8-weights-uint8-activations",
    lambda: _pt2e(True),
    {15: _ZP_CAST, 16: _ZP_CAST, 17: _and_quantize(_AFFINE), 18: _and_quantize(_BLOCKWISE)},
)
# coremltools moves the scales of a quantized residual add between its ops (verify must
# compare only the outputs of such a partition).
_per_target("pt2e-w8a8-residual", lambda: _pt2e(True, residual=True), {17: _and_quantize(_AFFINE)})
_per_target(
    "pt2e-int8-weight-per-tensor",
    lambda: _hand_written(False),
    {15: _ZP_CAST, 16: _ZP_CAST, 17: _AFFINE, 18: _BLOCKWISE},
)
_per_target(
    "int8-transposed-dequantize",
    lambda: _raw_int8(True),
    {15: _TRANSPOSE_RAW, 16: _TRANSPOSE_RAW, 17: _AFFINE, 18: _BLOCKWISE},
)
_per_target(
    "int8-transposed-cast",
    lambda: _raw_int8(False),
    {15: _TRANSPOSE_RAW, 16: _TRANSPOSE_RAW, 17: _dense, 18: _dense},
    warns=True,
)
_per_target(
    "pt2e-uint8-activation",
    lambda: _hand_written(True),
    {
        15: r"No available version for quantize in the coremltools\.target\.iOS15 opset",
        16: r"No available version for quantize in the coremltools\.target\.iOS16 opset",
        17: _QUANTIZE,
        18: _QUANTIZE,
    },
)
_per_target(
    "torchao-int8-per-channel",
    lambda: _intx(8),
    {15: re.escape(NO_AFFINE_OP), 16: _AFFINE, 17: _AFFINE, 18: _BLOCKWISE},
)
_per_target("torchao-int8-conv", lambda: _intx(8, net=_conv), dict.fromkeys(TARGETS, RANK_2_ONLY))
_per_target(
    "torchao-int4-per-group",
    lambda: _intx(4, 32),
    {15: re.escape(BLOCKWISE), 16: re.escape(BLOCKWISE), 17: re.escape(BLOCKWISE), 18: _BLOCKWISE},
)
_per_target(
    "torchao-int8-per-group",
    lambda: _intx(8, 32),
    {15: re.escape(BLOCKWISE), 16: re.escape(BLOCKWISE), 17: re.escape(BLOCKWISE), 18: _BLOCKWISE},
)
_per_target(
    "torchao-int4-per-channel",
    lambda: _intx(4),
    {15: re.escape(NO_AFFINE_OP), 16: _INT4, 17: _INT4, 18: _BLOCKWISE},
)
_per_target(
    "torchao-codebook",
    lambda: _codebook((-1, 16)),
    {
        15: _CAST_UINT8,
        16: _CAST_UINT8,
        17: r"pre-iOS18 palettization only supports per-tensor lut",
        18: returns("constexpr_lut_to_dense"),
    },
)
_per_target(
    "torchao-codebook-per-tensor",
    lambda: _codebook((-1, -1)),
    {
        15: _CAST_UINT8,
        16: _CAST_UINT8,
        17: r"To pack elements into 4-bit, the max value is 7",
        18: returns("constexpr_lut_to_dense"),
    },
)
_per_target(
    "torchao-int8-weight-only",
    _int8_weight_only,
    {15: _TRANSPOSE_INT8, 16: _TRANSPOSE_INT8, 17: _dense, 18: _dense},
    warns=True,
)
_per_target("coremltools-palettized", _palettized_mlp, dict.fromkeys(TARGETS, _dense), warns=True)
