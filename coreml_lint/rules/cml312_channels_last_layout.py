"""CML312 channels-last-layout: a channels-last copy that Core ML is asked to make.

What it does
    Flags a delegated copy to the channels-last memory format: ``x.contiguous(memory_format=
    torch.channels_last)``, ``x.to(memory_format=torch.channels_last)``, and the one torch
    makes itself when it decomposes a bicubic upsampling (``F.interpolate(...,
    mode="bicubic")``) of a channels-last tensor, such as a ``permute(0, 3, 1, 2)`` of an NHWC
    tensor. The last is how ViT, DINOv2 and SigLIP interpolate their position embeddings
    when they run at a resolution other than their config's. Also flags a Core ML
    partition's input laid out otherwise than contiguously: a model exported with a
    channels-last example input (``x.to(memory_format=torch.channels_last)``, as CPU and
    GPU inference code often passes), read by a delegated op.

Why it breaks
    Core ML tensors have one layout. The partitioner delegates the copy by name (ExecuTorch
    spells it ``_clone_dim_order`` with ``dim_order=[0, 2, 3, 1]``, or
    ``_to_dim_order_copy``), and coremltools refuses it: ``AssertionError: Only contiguous
    memory format is supported in CoreML`` (``NotImplementedError: Core ML does not support
    non-contiguous dim order`` for ``_to_dim_order_copy``). Bicubic upsampling has no Core ML
    converter, so torch's decomposition runs, and it ends with
    ``result.contiguous(memory_format=<the input's>)``. Bilinear and nearest upsampling of
    the same input convert fine. A partition's inputs are checked before any op converts:
    one laid out otherwise fails with ``NotImplementedError: Core ML does not have general
    support for non-contiguous dim order``, and a ``.contiguous()`` in ``forward`` does not
    help, since the copy is delegated with it.

Example
    ``F.interpolate(pos.permute(0, 3, 1, 2), size=(16, 16), mode="bicubic")`` where ``pos`` is
    ``(1, 37, 37, 384)``.

Fix
    (a) an explicit channels-last copy: leave the tensor contiguous (Core ML has one layout
    anyway); (b) bicubic upsampling: make the tensor contiguous before it (``.contiguous()``
    after the permute), or use ``mode="bilinear"``; (c) a channels-last input: export with
    a contiguous example input (``x.contiguous()``) and pass contiguous tensors at run
    time; (d) ``coreml-lint lower`` writes each channels-last copy as permute, contiguous
    copy, permute back (the same values and strides; checked equal in eager), and copies a
    channels-last input to contiguous on the CPU before Core ML reads it.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import CHANNELS_LAST, Node, Opaque, TensorInfo
from coreml_lint.program.layout import dim_order
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, torch, wrapped
from coreml_lint.rulekit.rule import Rule

COPIES = {
    "aten.clone.default": "AssertionError: Only contiguous memory format is supported in CoreML",
    "aten._to_copy.default": "NotImplementedError: Core ML does not support non-contiguous dim "
    "order",
}
BICUBIC = ("aten.upsample_bicubic2d.vec", "aten.upsample_bicubic2d.default")
NOT_CONTIGUOUS_INPUT = (
    "NotImplementedError: Core ML does not have general support for non-contiguous dim order"
)


class ChannelsLastLayout(Rule):
    code = "CML312"
    name = "channels-last-layout"
    outcome = Outcome.CRASH
    summary = "channels-last copy or input delegated (also bicubic upsampling): Core ML refuses it"
    # torch's decomposition of bicubic upsampling (what the lowered program computes anyway)
    # rounds differently from the native kernel: about 6e-7 seen.
    rewrite_tolerance = 1e-5

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes(include_decomposed=True):
            if node.target in COPIES and _to_channels_last(node):
                what, error = "copies to the channels-last memory format", COPIES[node.target]
                fix = "leave the tensor contiguous (Core ML has one layout: drop the copy)"
            elif node.target in BICUBIC and _channels_last(ctx.graph.tensors.get(_input(node))):
                what = (
                    "upsamples a channels-last tensor bicubically; torch's decomposition of it "
                    "ends with a channels-last copy"
                )
                error = COPIES["aten.clone.default"]
                fix = (
                    "make the tensor contiguous first (`.contiguous()` after the permute), or "
                    "upsample with mode='bilinear'"
                )
            else:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} {what}, which Core ML is asked to make: lowering fails with "
                f"`{error}`",
                fix=fix,
            )
        yield from self._inputs_laid_out_otherwise(ctx)

    def _inputs_laid_out_otherwise(self, ctx: ProgramContext) -> Iterator[Finding]:
        """A program input read by a partition whose strides are not contiguous:
        coremltools refuses the partition. Only the program's inputs: a view's strides in
        the exported graph (a ``permute`` read by a later partition) are not what the edge
        program has, where every view is a contiguous copy."""
        for _, value, readers in ctx.partition_inputs():
            info = ctx.graph.tensors.get(value)
            if ctx.input_kinds.get(value) != "user_input" or not _laid_out_otherwise(info):
                continue
            yield ctx.finding(
                readers[0],
                f"{readers[0].op_base} reads the program's input `{value}`, laid out otherwise "
                f"than contiguously (strides {list(info.strides or ())} for shape "
                f"{list(info.shape)}), as a Core ML partition's input: lowering fails with "
                f"`{NOT_CONTIGUOUS_INPUT}`",
                fix="export with a contiguous example input (`x.contiguous()`) and pass "
                "contiguous tensors at run time",
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Decompose bicubic upsampling of channels-last inputs (what the edge step would
        do), then write each channels-last copy as permute -> contiguous copy -> permute."""
        from coreml_lint.rulekit.fx import fake_mode, finish

        ep, done = _decompose_bicubic(ep)
        mode = fake_mode(ep)
        for node in list(ep.graph.nodes):
            if _is_channels_last_copy(node):
                done.append(_as_permuted_copy(ep, mode, node))
            elif _is_input_laid_out_otherwise(ep, node):
                done.append(_copied_contiguous(ep, mode, node))
        return finish(ep), done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """The contiguous copy of an input ``rewrite`` writes stays on the CPU: delegated,
        it would make the input the partition's again."""
        from coreml_lint.rulekit.fx import val

        name = getattr(node.target, "__name__", "")
        if not name.endswith(("clone.default", "_clone_dim_order.default")):
            return None
        source = node.args[0] if node.args else None
        if getattr(source, "op", None) != "placeholder":
            return None
        before, after = val(source), val(node)
        if before is None or after is None:
            return None
        if before.dim_order() == tuple(range(before.dim())):
            return None
        if after.dim_order() != tuple(range(after.dim())):
            return None
        return "an input laid out otherwise than contiguously, copied to contiguous on the CPU"


def _input(node: Node) -> str | None:
    inputs = node.tensor_inputs()
    return inputs[0] if inputs else None


def _to_channels_last(node: Node) -> bool:
    layout = node.kwargs.get("memory_format")
    return isinstance(layout, Opaque) and layout.value == CHANNELS_LAST


def _channels_last(info: TensorInfo | None) -> bool:
    """A 4-D tensor laid out channels-last (and not also contiguous)."""
    if info is None or info.rank != 4 or info.strides is None:
        return False
    (n, c, h, w), strides = info.shape, info.strides
    if not all(isinstance(v, int) for v in (n, c, h, w, *strides)) or c == 1:
        return False
    return tuple(strides[1:]) == (1, w * c, c)


def _laid_out_otherwise(info: TensorInfo | None) -> bool:
    """Whether torch's ``dim_order()`` of a tensor of these strides is not ``0, 1, ...``,
    which coremltools checks of a partition's inputs. A tensor of size-1 dims is both
    contiguous and channels-last; torch then orders its dims by stride, so a channels-last
    ``(2, 8, 1, 1)`` has the order ``0, 2, 3, 1`` and is refused too."""
    if info is None or info.strides is None or len(info.strides) != info.rank:
        return False
    shape, strides = info.shape, info.strides
    if not all(isinstance(v, int) for v in (*shape, *strides)):
        return False
    return dim_order(shape, strides) != list(range(len(shape)))  # type: ignore[arg-type]


def _is_input_laid_out_otherwise(ep: Any, node: Any) -> bool:
    import torch

    from coreml_lint.rulekit.fx import val

    users = ep.graph_signature.user_inputs
    value = val(node)
    return (
        node.op == "placeholder"
        and node.name in users
        and isinstance(value, torch.Tensor)
        and value.dim_order() != tuple(range(value.dim()))
    )


def _copied_contiguous(ep: Any, mode: Any, node: Any) -> str:
    """Every reader of input ``node`` reads a contiguous copy of it instead (``refuse``
    keeps the copy on the CPU)."""
    import torch

    from coreml_lint.rulekit.fx import aten, emit

    readers = list(node.users)
    with ep.graph.inserting_after(node):
        dense = emit(
            ep, mode, aten.clone.default, (node,), {"memory_format": torch.contiguous_format}
        )
    for reader in readers:
        reader.replace_input_with(node, dense)
    return f"{node.name}: an input laid out otherwise copied to contiguous before Core ML reads it"


def _decompose_bicubic(ep: Any) -> tuple[Any, list[str]]:
    import torch

    from coreml_lint.rulekit.fx import aten, val

    ops = (aten.upsample_bicubic2d.vec, aten.upsample_bicubic2d.default)
    found = []
    for node in ep.graph.nodes:
        source = val(node.args[0]) if node.target in ops else None
        if (
            isinstance(source, torch.Tensor)
            and source.dim() == 4
            and not source.is_contiguous()
            and source.is_contiguous(memory_format=torch.channels_last)
        ):
            found.append(node)
    if not found:
        return ep, []
    table = {op: torch._decomp.decomposition_table[op] for op in ops}
    return ep.run_decompositions(table), [
        f"{n.name}: bicubic upsampling of a channels-last tensor decomposed" for n in found
    ]


def _is_channels_last_copy(node: Any) -> bool:
    import torch

    from coreml_lint.rulekit.fx import aten, val

    if node.op != "call_function" or node.target not in (aten.clone.default, aten._to_copy.default):
        return False
    value = val(node)
    layout = node.kwargs.get("memory_format")
    return layout == torch.channels_last and isinstance(value, torch.Tensor) and value.dim() == 4


def _as_permuted_copy(ep: Any, mode: Any, node: Any) -> str:
    """``node`` becomes ``permute(contiguous copy of permute(x, NHWC), NCHW)``: the same
    values and the same channels-last strides, with only contiguous copies left."""
    from coreml_lint.rulekit.fx import aten, emit

    with ep.graph.inserting_before(node):
        nhwc = emit(ep, mode, aten.permute.default, (node.args[0], [0, 2, 3, 1]))
        kwargs = {k: v for k, v in node.kwargs.items() if k != "memory_format"}
        dense = emit(ep, mode, node.target, (nhwc,), kwargs)
    node.target, node.args, node.kwargs = aten.permute.default, (dense, [0, 3, 1, 2]), {}
    return f"{node.name}: channels-last copy written as permute, contiguous copy, permute"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
CONTIGUOUS_ONLY = r"Only contiguous memory format is supported in CoreML"


def upsampled(mode: str, contiguous_first: bool = False) -> tuple[Any, tuple[Any, ...]]:
    """Position embeddings interpolated as ViT/DINOv2 do: an NHWC grid permuted to NCHW."""

    def forward(s: Any, x: Any) -> Any:
        grid = s.pos.permute(0, 3, 1, 2)
        if contiguous_first:
            grid = grid.contiguous()
        grid = F.interpolate(grid, size=(6, 6), mode=mode, align_corners=False)
        return x + grid.permute(0, 2, 3, 1).flatten(1, 2)

    return module(forward, pos=torch.randn(1, 4, 4, 8)), (torch.randn(1, 36, 8),)


@case("bicubic-channels-last", expect={"CML312"}, crash=CONTIGUOUS_ONLY)
def _() -> Any:
    return upsampled("bicubic")


@case("bicubic-contiguous", expect=set())
def _() -> Any:
    return upsampled("bicubic", contiguous_first=True)


@case("bilinear-channels-last", expect=set())
def _() -> Any:
    return upsampled("bilinear")


@case(
    "to-channels-last",
    expect={"CML312"},
    crash=r"Core ML does not support non-contiguous dim order",
)
def _() -> Any:
    return module(lambda s, x: x.to(memory_format=torch.channels_last) * 2), (
        torch.randn(1, 3, 4, 4),
    )


@case("explicit-channels-last-copy", expect={"CML312"}, crash=CONTIGUOUS_ONLY)
def _() -> Any:
    return module(lambda s, x: x.contiguous(memory_format=torch.channels_last) * 2), (
        torch.randn(1, 3, 4, 4),
    )


@case("channels-last-input", expect={"CML312"}, crash=r"non-contiguous dim order")
def _() -> Any:
    """Inference code that feeds the model channels-last images."""
    model, _ = wrapped(nn.Conv2d(8, 16, 3, padding=1))
    return model, (torch.randn(1, 8, 10, 10).to(memory_format=torch.channels_last),)


@case("channels-last-input-of-one-pixel", expect={"CML312"}, crash=r"non-contiguous dim order")
def _() -> Any:
    """A 1 x 1 image is contiguous in either layout, and torch orders its dims by stride."""
    model, _ = wrapped(nn.Conv2d(8, 16, 1))
    return model, (torch.randn(2, 8, 1, 1).to(memory_format=torch.channels_last),)


@case("channels-last-input-made-contiguous", expect={"CML312"}, crash=r"non-contiguous dim order")
def _() -> Any:
    """A ``.contiguous()`` first does not help: the copy is delegated with the rest."""

    class ContiguousFirst(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(8, 16, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return self.conv(x.contiguous())

    return ContiguousFirst(), (torch.randn(1, 8, 10, 10).to(memory_format=torch.channels_last),)
