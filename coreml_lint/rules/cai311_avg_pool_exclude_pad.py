"""CAI311 coreai-avg-pool-exclude-pad: ``avg_pool(..., count_include_pad=False)`` with
padding computes wrong border windows in Core AI.

What it does
    Flags ``avg_pool1d/2d/3d`` with a nonzero ``padding`` and ``count_include_pad=False``.

Why it breaks
    Torch divides each border window by the number of real elements it covers; Core AI's
    conversion converts without an error and divides by the whole window, so every
    window that overlaps the padding is too small by that ratio (measured with coreai-torch
    0.4.3, float32: about half the output's scale wrong on the border of ``avg_pool2d(x,
    3, 2, 1, count_include_pad=False)``, exact inside; with ``ceil_mode=True`` too, or a
    ``ValueError`` when ``ceil_mode`` changes the output size). Without padding, or with
    the default ``count_include_pad=True``, the values agree.

Example
    ``F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)``;
    ``nn.AvgPool2d(3, 2, 1, count_include_pad=False)`` (timm's and ResNet-D's stems).

Fix
    Divide the padded sum by the count of real elements, both pools counting the padding
    (the same values, exactly):
    ``F.avg_pool2d(x, k, s, p) / F.avg_pool2d(torch.ones_like(x[:, :1]), k, s, p)``.
    ``coreml-lint lower --target coreai`` writes that into the program: the input padded
    explicitly and pooled without padding, divided by the same pool of a mask of the real
    elements (:func:`exact_avg_pools`, shared with CAI312), and verified on Core AI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, torch
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule

POOLS = {"avg_pool1d", "avg_pool2d", "avg_pool3d"}


class CoreAIAvgPoolExcludePad(Rule):
    code = "CAI311"
    name = "coreai-avg-pool-exclude-pad"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.SILENT
    summary = "avg_pool with padding and count_include_pad=False: wrong border windows"
    # the pooled mask divides in the program's own dtype: a float16 program rounds it
    rewrite_tolerance = 1e-2

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            if node.namespace != "aten" or node.op_base not in POOLS:
                continue
            padding = node.arg(3, "padding", 0)
            padded = any(padding) if isinstance(padding, (list, tuple)) else bool(padding)
            if not padded or node.arg(5, "count_include_pad", True) is not False:
                continue
            yield ctx.finding(
                node,
                f"{node.op_base} with padding {padding} and count_include_pad=False: Core AI "
                "divides the border windows by the whole window, not by the real elements "
                "(wrong values, no error)",
                fix=f"{node.op_base}(x, k, s, p) / {node.op_base}(torch.ones_like(x[:, :1]), "
                "k, s, p): the padded sum over the real count, exactly torch's values",
            )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Each avg_pool with padding that excludes it: pooled without padding over an
        explicitly padded input, divided by the pool of the real elements' mask."""
        return exact_avg_pools(ep, _excludes_padding)


def _excludes_padding(args: dict[str, Any]) -> bool:
    return any(args["padding"]) and not args["count_include_pad"]


def exact_avg_pools(ep: Any, wanted: Callable[[dict[str, Any]], bool]) -> tuple[Any, list[str]]:
    """Rewrite every ``avg_poolNd`` node whose arguments ``wanted`` accepts (and that has no
    ``divisor_override``) as ``avg_pool(pad(x), k, s, 0) / avg_pool(pad(mask), k, s, 0)``:
    the windows torch pools (``ceil_mode`` ones too: the far edge is padded as far as the
    last window reaches), each divided by the count torch divides by (the mask is 1 on the
    input, and on the padding too when ``count_include_pad``; 0 past it). Core AI converts
    both pools exactly: no padding, no ``ceil_mode``, no excluded count left to it."""
    from coreml_lint.rulekit.fx import aten, fake_mode, finish, op_base

    mode, done = fake_mode(ep), []
    for node in list(ep.graph.nodes):
        if node.op != "call_function" or op_base(node) not in POOLS:
            continue
        args = _pool_args(node)
        if args is None or not wanted(args):
            continue
        base = op_base(node)
        _divide_by_pooled_mask(ep, mode, node, args, aten)
        done.append(
            f"{node.name}: {base}(padding={args['padding']}, ceil_mode={args['ceil_mode']}, "
            f"count_include_pad={args['count_include_pad']}) written as an unpadded pool of "
            "the padded input over the pool of its real-element mask"
        )
    return (finish(ep) if done else ep), done


def _pool_args(node: Any) -> dict[str, Any] | None:
    """The pool's arguments with each per-dim one spelled for every spatial dim, and the
    output's spatial size; None for what the rewrite does not handle."""
    from coreml_lint.rulekit.fx import op_base, val

    names = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor")
    defaults = (None, [], 0, False, True, None)
    values = [
        node.args[i + 1] if i + 1 < len(node.args) else node.kwargs.get(n, d)
        for i, (n, d) in enumerate(zip(names, defaults, strict=True))
    ]
    out = val(node)
    if values[5] is not None or out is None:
        return None
    dims = int(op_base(node)[-2])  # avg_pool2d -> 2
    per_dim = [_per_dim(v, dims) for v in values[:3]]
    kernel, stride, padding = per_dim[0], per_dim[1] or per_dim[0], per_dim[2]
    return {
        "kernel": kernel,
        "stride": stride,
        "padding": padding,
        "ceil_mode": bool(values[3]),
        "count_include_pad": bool(values[4]),
        "dims": dims,
        "size": [int(d) for d in out.shape[-dims:]],
    }


def _per_dim(value: Any, dims: int) -> list[int]:
    if isinstance(value, int):
        return [value] * dims
    value = [int(v) for v in value]
    return value * dims if len(value) == 1 else value


def _divide_by_pooled_mask(ep: Any, mode: Any, node: Any, args: dict[str, Any], aten: Any) -> None:
    """``node`` becomes the division (its name, users and output spec stay)."""
    from coreml_lint.rulekit.fx import emit, val

    x = node.args[0]
    sizes = [int(d) for d in val(x).shape[-args["dims"] :]]
    # how far past the padding the last window reaches (ceil_mode), per dim
    extra = [
        max(0, (o - 1) * s + k - (h + 2 * p))
        for o, s, k, h, p in zip(
            args["size"], args["stride"], args["kernel"], sizes, args["padding"], strict=True
        )
    ]
    # constant_pad_nd's list starts at the last dim
    around = [q for p in reversed(args["padding"]) for q in (p, p)]
    beyond = [q for e in reversed(extra) for q in (0, e)]
    far = [
        q
        for p, e in zip(reversed(args["padding"]), reversed(extra), strict=True)
        for q in (p, p + e)
    ]
    pool = (args["kernel"], args["stride"], [0] * args["dims"], False, True)
    with ep.graph.inserting_before(node):
        padded = emit(ep, mode, aten.constant_pad_nd.default, (x, far, 0.0))
        total = emit(ep, mode, node.target, (padded, *pool))
        ones = emit(ep, mode, aten.ones_like.default, (x,))
        if args["count_include_pad"]:
            mask = emit(ep, mode, aten.constant_pad_nd.default, (ones, around, 1.0))
            mask = emit(ep, mode, aten.constant_pad_nd.default, (mask, beyond, 0.0))
        else:
            mask = emit(ep, mode, aten.constant_pad_nd.default, (ones, far, 0.0))
        count = emit(ep, mode, node.target, (mask, *pool))
    node.target, node.args, node.kwargs = aten.div.Tensor, (total, count), {}


# -- program cases: what coreai-torch 0.4.3 really does (tests/test_coreai_rules.py runs them)
def _pool_case(id: str, pool, shape, bad: bool) -> None:
    @case(
        id,
        expect={"CAI311"} if bad else set(),
        silent=(lambda error: error > 0.1) if bad else None,
    )
    def _():
        return module(lambda s, x: pool(x)), (torch.randn(*shape),)


_pool_case(
    "coreai-avg-pool2d-exclude-pad",
    lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    (1, 3, 8, 8),
    True,
)
_pool_case(
    "coreai-avg-pool1d-exclude-pad",
    lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
    (1, 3, 8),
    True,
)
_pool_case(
    "coreai-avg-pool3d-exclude-pad",
    lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
    (1, 2, 6, 6, 6),
    True,
)
_pool_case(
    "coreai-avg-pool2d-divided-count",  # the fix: exactly torch's values
    lambda x: F.avg_pool2d(x, 3, 2, 1) / F.avg_pool2d(torch.ones_like(x[:, :1]), 3, 2, 1),
    (1, 3, 8, 8),
    False,
)
_pool_case(
    "coreai-avg-pool2d-exclude-no-pad",
    lambda x: F.avg_pool2d(x, 3, 2, 0, count_include_pad=False),
    (1, 3, 9, 9),
    False,
)
