"""CML607 dynamic-resize: a resize whose scale is not fixed over a program's dynamic sizes.

What it does
    Flags a delegated bilinear or nearest upsampling (``F.interpolate``) or an adaptive
    average pooling, in a program exported with dynamic spatial sizes (``torch.export.Dim``
    for height or width), unless its output size is computed from its own input's size
    times an integer (``scale_factor=2``, ``size=(y.shape[2] * 2, y.shape[3] * 2)``): the
    output size is taken from another tensor (``F.interpolate(y, size=x.shape[-2:])``
    after a strided convolution, the FCN / U-Net / segmentation-head pattern, also where
    the ratio is always 2), it is a fixed size while the input is dynamic
    (``size=(64, 64)``), a bilinear scale factor that is not an integer, or an adaptive
    pooling to anything but 1x1.

Why it breaks
    Core ML's upsample ops take constant scale factors. coremltools converts an upsample
    with a computed output size to a temporary op and then looks, in the MIL, for the
    pattern ``shape(x)[i] * k`` (or ``floor(size * scale)``) to recover ``k``; when it is
    not there, the stock lowering fails at every target (also when derived dims make the
    ratio exactly 2 but the size is read off another tensor, a U-Net's skip connection):
    ``ValueError: Unable to map torch_upsample_bilinear to core upsample`` (and
    ``torch_upsample_nearest_neighbor``). A fixed output size with a dynamic input fails
    on its scale, ``input_size / output_size``: ``TypeError: Cannot convert expression to
    float`` (bilinear), ``ValueError: Cannot add const ... symbolic values`` (nearest). A
    non-integer bilinear scale gives ``NotImplementedError: ... float output size is not
    supported``, and adaptive pooling ``ValueError: Adaptive pooling is only supported
    when input tensor size is known or output size == (1,1)``. The same models with
    static shapes, with only a dynamic batch, or resized by ``scale_factor=2`` or to
    ``(x.shape[2] * 2, x.shape[3] * 2)`` lower (measured, torch 2.13 / executorch 1.5.1 /
    coremltools 9.0).

Example
    ``F.interpolate(head(x), size=x.shape[-2:], mode="bilinear")`` where ``head`` has a
    stride-2 convolution and ``x`` was exported with ``Dim`` height and width.

Fix
    (a) ``coreml-lint lower`` keeps the resize on the CPU (ExecuTorch's portable kernel);
    the rest stays on Core ML. (b) ``CoreMLPartitioner(skip_ops_for_coreml_delegation=
    ["aten.upsample_bilinear2d.vec"])`` does the same for every resize. (c) Resize by a
    fixed factor (``scale_factor=2``) where the architecture allows it, or export with
    static height and width (enumerated shapes for a few resolutions).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program import symbolic
from coreml_lint.program.graph import Node, SymRef, TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, dynamic_case, nn, torch
from coreml_lint.rulekit.rule import Rule

UPSAMPLE = {"upsample_bilinear2d": "bilinear", "upsample_nearest2d": "nearest_neighbor"}
ADAPTIVE = ("adaptive_avg_pool2d", "_adaptive_avg_pool2d")


def problem(kind: str, ratios: list[Fraction | None], scales: Any) -> str | None:
    """The stock lowering's error for one resize, or None when it converts.

    ``kind`` is "bilinear", "nearest_neighbor" or "adaptive"; ``ratios`` holds, for each
    spatial dim that is dynamic on either side, the fixed output/input ratio over the
    allowed sizes (None: not fixed); ``scales`` the scale factors when the op has them
    instead of an output size."""
    if not ratios:
        return None
    if kind == "adaptive":  # asked only for an output other than 1x1
        return (
            "ValueError: Adaptive pooling is only supported when input tensor size is known "
            "or output size == (1,1)"
        )
    if scales is not None:
        if kind == "bilinear" and any(float(s) != int(s) for s in scales):
            return (
                "NotImplementedError: recompute_scale_factor = False, align_corners = False "
                "with float output size is not supported"
            )
        return None
    if all(r is not None and r.denominator == 1 and r >= 2 for r in ratios):
        return None
    return f"ValueError: Unable to map torch_upsample_{kind} to core upsample"


def multiplier(target: str, args: list[Any]) -> int | None:
    """``k`` when a symbolic size is computed as ``size * k`` (``_operator.mul`` of a
    symbolic int and an int): the one form coremltools turns into a fixed scale."""
    if target.rsplit(".", 1)[-1] != "mul" or len(args) != 2:
        return None
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    return ints[0] if len(ints) == 1 else None


class DynamicResize(Rule):
    code = "CML607"
    name = "dynamic-resize"
    outcome = Outcome.CRASH
    summary = (
        "bilinear/nearest resize or adaptive pool over dynamic H/W whose size is not its "
        "input's size times an integer: Unable to map to core upsample"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        points = list(symbolic.sample_points(ctx.graph.meta))
        for node in ctx.coreml_nodes():
            found = _light_problem(ctx, node, points)
            if found is None:
                continue
            error, sizes, why = found
            skip = ctx.skip_advice(node)
            yield ctx.finding(
                node,
                f"{ctx.edge_name(node)} resizes H, W {sizes}: {why.reason}, so coremltools "
                f"finds no constant scale to make it a Core ML op, and lowering fails with "
                f"`{error}`",
                fix=f"{why.fix}, or keep the resize on the CPU (`coreml-lint lower` does)",
                partitioner=skip,
            )

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        base = _fx_base(node)
        if base is None:
            return None
        error = _fx_problem(node, base)
        return f"its scale is not fixed over the dynamic sizes ({error})" if error else None


def _resize_kind(base: str) -> str | None:
    if base in UPSAMPLE:
        return UPSAMPLE[base]
    return "adaptive" if base in ADAPTIVE else None


@dataclass(frozen=True)
class _Why:
    """What makes this resize the crashing form, and the form of it that lowers: a resize
    whose output size is its own input's size times an integer k >= 2 (``scale_factor=2``,
    or ``size=(x.shape[2] * 2, x.shape[3] * 2)``) lowers; the same ratio read off another
    tensor does not, which "not a fixed scale" alone would not tell apart."""

    reason: str
    fix: str


def _lowering_form(k: int = 2) -> str:
    """The resize forms that lower over dynamic sizes (measured), for ``F.interpolate(y,
    ...)``: the output size computed from ``y``'s own size."""
    return (
        f"compute the output size from the resized tensor's own size, as in "
        f"`F.interpolate(y, scale_factor={k})` or `size=(y.shape[2] * {k}, y.shape[3] * {k})`"
    )


def _why(kind: str, sampled: list[Any], checked: list[Any], scales: Any) -> _Why:
    if kind == "adaptive":
        return _Why(
            "an adaptive pooling to an output other than 1x1 over a dynamic input size",
            "pool to 1x1, or with a fixed kernel (`F.avg_pool2d`)",
        )
    if scales is not None:
        factors = ", ".join(f"{float(s):g}" for s in scales)
        return _Why(
            f"its scale factor ({factors}) is not an integer",
            "resize by an integer `scale_factor`",
        )
    if any(r is None for r in sampled):
        return _Why(
            "its output size does not follow its input size (their ratio changes with the "
            "dynamic sizes: a fixed size, or another tensor's size)",
            _lowering_form(),
        )
    ratios = ", ".join(str(r) for r in dict.fromkeys(sampled))
    if all(r.denominator == 1 and r >= 2 for r in sampled) and checked != sampled:
        return _Why(
            f"the ratio is always {ratios}, but the output size is another tensor's size "
            "(`size=skip.shape[-2:]`), not computed from the resized tensor's own size",
            _lowering_form(int(sampled[0])),
        )
    return _Why(f"the ratio is {ratios}, not an integer of 2 or more", _lowering_form())


def _light_problem(
    ctx: ProgramContext, node: Node, points: list[dict[str, int]]
) -> tuple[str, str, _Why] | None:
    kind = _resize_kind(node.op_base)
    if kind is None or not node.args or not isinstance(node.args[0], TensorRef):
        return None
    source, out = ctx.shape(node.args[0].name), ctx.shape(node.outputs[0]) if node.outputs else None
    if source is None or out is None or len(source) < 2 or len(out) != len(source):
        return None
    spatial = [(a, b) for a, b in zip(source[-2:], out[-2:], strict=True)]
    dynamic = [(a, b) for a, b in spatial if symbolic.is_symbolic(a) or symbolic.is_symbolic(b)]
    if not dynamic:
        return None
    if kind == "adaptive":  # coremltools needs the input size known, or a 1x1 output
        if all(b == 1 for _a, b in spatial):
            return None
        ratios: list[Fraction | None] = [None]
        sampled = ratios
    else:
        sampled = [_sampled_ratio(a, b, points) for a, b in dynamic]
        if any(r is _UNKNOWN for r in sampled):
            return None  # an expression we cannot evaluate: say nothing rather than guess
        ratios = sampled
        if _scales(node) is None:
            ratios = _as_computed(ctx, node, spatial, sampled)
    error = problem(kind, ratios, _scales(node))
    if error is None:
        return None
    sizes = ", ".join(f"{_short(a)} -> {_short(b)}" for a, b in dynamic)
    return error, sizes, _why(kind, sampled, ratios, _scales(node))


_UNKNOWN: Any = object()


def _as_computed(
    ctx: ProgramContext, node: Node, spatial: list[Any], ratios: list[Any]
) -> list[Any]:
    """A fixed ratio counts only where the graph computes that output size as a size times
    the same factor: ``size=x.shape[-2:]`` of a tensor twice as large crashes even when
    derived dims make the ratio exactly 2 (measured)."""
    sizes = node.arg(1, "output_size")
    if not isinstance(sizes, list) or len(sizes) != 2:
        return ratios
    producers = ctx.graph.meta.get("sym_producers") or {}
    dynamic = [
        i for i, (a, b) in enumerate(spatial) if symbolic.is_symbolic(a) or symbolic.is_symbolic(b)
    ]
    checked = []
    for index, ratio in zip(dynamic, ratios, strict=True):
        size = sizes[index]
        made = producers.get(size.name) if isinstance(size, SymRef) else None
        k = multiplier(*made) if made else None
        checked.append(ratio if k is not None and ratio == k else None)
    return checked


def _sampled_ratio(a: int | str, b: int | str, points: list[dict[str, int]]) -> Any:
    """out/in when it is the same at every sample point; None when it varies; _UNKNOWN when
    an expression cannot be evaluated (or nothing constrains the symbols)."""
    if not points:
        return _UNKNOWN
    seen: set[Fraction] = set()
    for env in points:
        x, y = symbolic.evaluate(a, env), symbolic.evaluate(b, env)
        if x is None or y is None:
            return _UNKNOWN
        if x == 0:
            continue
        seen.add(y / x)
    return seen.pop() if len(seen) == 1 else None


def _scales(node: Node) -> Any:
    """The scale factors of an upsample given by them (``.vec`` with no output size)."""
    if node.target.endswith(".vec") and node.arg(1, "output_size") is None:
        scales = node.arg(3 if "bilinear" in node.target else 2, "scale_factors")
        return scales if isinstance(scales, list) else [1.0]
    return None


def _short(size: int | str) -> str:
    text = symbolic.pretty(size)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


# -- the lowering answer: the same judgement on the torch.fx node (sympy is there) -----------
def _fx_base(node: Any) -> str | None:
    if getattr(node, "op", None) != "call_function":
        return None
    name = getattr(node.target, "__name__", str(node.target)).removeprefix("aten.")
    name = name.split(".")[0].removeprefix("aten_")
    for base in (*UPSAMPLE, *ADAPTIVE):
        if name == base:
            return base
    return None


def _fx_problem(node: Any, base: str) -> str | None:
    import sympy
    import torch as real_torch

    source, out = node.args[0].meta.get("val"), node.meta.get("val")
    if not isinstance(source, real_torch.Tensor) or not isinstance(out, real_torch.Tensor):
        return None
    kind = _resize_kind(base)
    dims = []
    for a, b in zip(source.shape[-2:], out.shape[-2:], strict=True):
        if isinstance(a, int) and isinstance(b, int):
            continue
        dims.append((sympy.sympify(_expr(a)), sympy.sympify(_expr(b))))
    if not dims:
        return None
    if kind == "adaptive":
        ones = all(b == 1 for b in out.shape[-2:])
        return None if ones else problem(kind, [None], None)
    ratios: list[Fraction | None] = []
    for a, b in dims:
        ratio = sympy.simplify(b / a)
        ratios.append(Fraction(int(ratio.p), int(ratio.q)) if ratio.is_Rational else None)
    scales = None
    if len(node.args) > 1 and node.args[1] is None:
        scales = node.args[-1] if isinstance(node.args[-1], list | tuple) else [1.0]
    elif len(node.args) > 1 and isinstance(node.args[1], list | tuple):
        ratios = _fx_as_computed(node.args[1], source.shape[-2:], out.shape[-2:], ratios)
    assert kind is not None
    return problem(kind, ratios, scales)


def _fx_as_computed(sizes: Any, source: Any, out: Any, ratios: list[Any]) -> list[Any]:
    """:func:`_as_computed` on the fx graph: each dynamic output size must be an
    ``operator.mul`` node of a size and the ratio's integer."""
    checked, position = [], 0
    for size, a, b in zip(sizes, source, out, strict=False):
        if isinstance(a, int) and isinstance(b, int):
            continue
        ratio = ratios[position]
        position += 1
        target = getattr(size, "target", None)
        args = list(getattr(size, "args", ()))
        k = multiplier(getattr(target, "__name__", str(target)), args) if target else None
        checked.append(ratio if k is not None and ratio == k else None)
    return checked


def _expr(size: Any) -> Any:
    return size.node.expr if hasattr(size, "node") else int(size)


# -- program cases (dynamic shapes): what the stock CoreMLPartitioner really does ------------
def segmentation_head(mode: str = "bilinear") -> Any:
    """An FCN head: a stride-2 encoder, a 1x1 classifier, resized back to the input size.
    (Classes are made inside builders: the lint path must not import torch.)"""

    class SegmentationHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.cls = nn.Conv2d(8, 4, 1)

        def forward(self, x: Any) -> Any:
            y = self.cls(torch.relu(self.enc(x)))
            if mode == "nearest":
                return F.interpolate(y, size=x.shape[-2:], mode="nearest")
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

    return SegmentationHead().eval()


def _resize(forward: Any) -> Any:
    """A module whose ``forward(x)`` is ``forward(x)`` (a named input, for ``Dim``s)."""

    class Resize(nn.Module):
        def forward(self, x: Any) -> Any:
            return forward(x)

    return Resize()


def _hw(batch: bool = True, spatial: bool = True) -> dict[str, Any]:
    dims: dict[int, Any] = {}
    if batch:
        dims[0] = torch.export.Dim("batch", min=1, max=8)
    if spatial:
        dims[2] = torch.export.Dim("height", min=16, max=512)
        dims[3] = torch.export.Dim("width", min=16, max=512)
    return {"x": dims}


IMAGE = (2, 3, 32, 48)


@dynamic_case("fcn-dynamic-resize", expect={"CML607"}, crash=r"Unable to map torch_upsample")
def _():
    return segmentation_head(), (torch.randn(*IMAGE),), _hw()


@dynamic_case("fcn-dynamic-resize-nearest", expect={"CML607"}, crash=r"Unable to map", ios=18)
def _():
    return segmentation_head("nearest"), (torch.randn(*IMAGE),), _hw()


@dynamic_case("fixed-size-resize-dynamic-input", expect={"CML607"}, crash=r"Cannot convert")
def _():
    forward = lambda x: F.interpolate(x * 2, size=(64, 64), mode="bilinear")  # noqa: E731
    return _resize(forward), (torch.randn(*IMAGE),), _hw()


@dynamic_case("adaptive-pool-dynamic", expect={"CML607"}, crash=r"Adaptive pooling is only")
def _():
    return _resize(lambda x: F.adaptive_avg_pool2d(x * 2, 7)), (torch.randn(*IMAGE),), _hw()


@dynamic_case("fcn-dynamic-batch-only", expect=set())
def _():
    return segmentation_head(), (torch.randn(*IMAGE),), _hw(spatial=False)


@dynamic_case("resize-by-two-dynamic", expect=set())
def _():
    def forward(x):
        return F.interpolate(x * 2, size=(x.shape[2] * 2, x.shape[3] * 2), mode="bilinear")

    return _resize(forward), (torch.randn(*IMAGE),), _hw()


@dynamic_case("scale-factor-dynamic", expect=set())
def _():
    forward = lambda x: F.interpolate(x * 2, scale_factor=2, mode="bilinear")  # noqa: E731
    return _resize(forward), (torch.randn(*IMAGE),), _hw()


@dynamic_case("global-pool-dynamic", expect=set())
def _():
    return _resize(lambda x: F.adaptive_avg_pool2d(x * 2, 1)), (torch.randn(*IMAGE),), _hw()


def aspp() -> Any:
    """DeepLab's ASPP: a global-pooling branch resized back to the feature map's size."""

    class ASPP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, stride=4, padding=1)
            self.b0, self.gp = nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 1)
            self.b1 = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
            self.proj = nn.Conv2d(24, 4, 1)

        def forward(self, x: Any) -> Any:
            f = torch.relu(self.stem(x))
            g = self.gp(F.adaptive_avg_pool2d(f, 1))
            g = F.interpolate(g, size=f.shape[-2:], mode="bilinear", align_corners=False)
            y = self.proj(torch.cat([self.b0(f), self.b1(f), g], 1))
            return F.interpolate(y, scale_factor=4, mode="bilinear", align_corners=False)

    return ASPP().eval()


# `lower` keeps the resize on the CPU, which splits the graph where the feature map's size
# is an expression of H and W: Core ML then refuses the second partition (CML610).
@dynamic_case(
    "aspp-pooling-branch",
    expect={"CML607"},
    crash=r"Unable to map torch_upsample",
    lowered_fails=r"expressions of symbolic variables",
)
def _():
    return aspp(), (torch.randn(1, 3, 64, 64),), _hw(batch=False)
