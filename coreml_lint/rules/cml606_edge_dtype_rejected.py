"""CML606 edge-dtype-rejected: tensor dtypes ExecuTorch's edge verifier rejects.

What it does
    Flags the ops whose tensor dtypes ``to_edge`` refuses, before any partitioner runs:

    - ``torch.cat``/``torch.stack`` of tensors whose first one has another dtype than the
      result (``torch.cat([labels, -torch.ones(1, 2)])`` with int64 ``labels``);
    - a complex tensor read or made by an op whose edge dtype table has no complex (``mul``,
      ``abs``, ``clone``, ``view_copy``, ...: complex RoPE, ``torch.fft`` magnitudes);
    - ``x // n`` of an int32/int16/int8/uint8 tensor by a Python int (the int becomes an
      int64 tensor; int64 ``x`` and a tensor divisor of ``x``'s dtype lower);
    - a dtype outside the edge dialect's (float8, uint32, uint64, complex32).

Why it breaks
    ``to_edge_transform_and_lower`` checks every op's tensor dtypes against the edge dialect's
    table (``executorch/exir/dialects/edge/edge.yaml``) and stops with ``SpecViolationError:
    These operators are taking Tensor inputs with mismatched dtypes``. A ``Tensor[]``
    argument is judged by its first tensor's dtype only, so ``cat`` may mix dtypes when the
    promoted one comes first, never otherwise; ops the table does not list take the 13
    ordinary dtypes, complex64 and complex128 among them.

Example
    ``torch.cat([labels, -torch.ones(1, 2)], dim=1)`` with int64 ``labels``.

Fix
    (a) cat/stack: cast before concatenating (``labels.float()``), or put the tensor of the
    result's dtype first; ``coreml-lint lower`` casts the list for you. (b) complex numbers:
    compute them as pairs of reals (RoPE with cos/sin); (c) ``x // n``: divide by a tensor of
    ``x``'s dtype, or an int64 ``x``; float8/uint32: keep them out of the exported program
    (``lower`` answers only the cat/stack kind).

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import Node, TensorRef
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import case, module, torch
from coreml_lint.rulekit.rule import Rule

VERIFIER_ERROR = (
    "SpecViolationError: These operators are taking Tensor inputs with mismatched dtypes"
)
# executorch 1.5.1 exir/dialects/edge/edge.yaml: the ops with a dtype table (``tests/
# test_edge_dtypes.py`` compares this list with the installed file). Of these, only the
# _COMPLEX_ONES take complex tensors; ops not listed take any of the _ORDINARY dtypes.
_EDGE_TABLE = """
_log_softmax.default _softmax.default _to_copy.default abs.default acos.default acosh.default
add.Scalar add.Tensor addmm.default alias_copy.default amax.default amin.default any.default
arange.default arange.start_step argmax.default argmin.default as_strided_copy.default
asin.default asinh.default atan.default atanh.default avg_pool2d.default bitwise_and.Scalar
bitwise_and.Tensor bitwise_not.default bitwise_or.Scalar bitwise_or.Tensor bitwise_xor.Scalar
bitwise_xor.Tensor bmm.default cat.default ceil.default clamp.default clone.default
constant_pad_nd.default convolution.default copy.default cos.default cosh.default cumsum.default
detach_copy.default div.Scalar div.Tensor div.Tensor_mode elu.default embedding.default
empty.memory_format eq.Scalar erf.default exp.default expand_copy.default fill.Scalar
fill.Tensor floor.default floor_divide.default fmod.Scalar fmod.Tensor full.default
full_like.default ge.Scalar ge.Tensor gelu.default glu.default gt.Scalar gt.Tensor
hardtanh.default index.Tensor index_put.default index_select.default isinf.default isnan.default
le.Scalar le.Tensor leaky_relu.default lift_fresh_copy.default log.default logical_and.default
logical_not.default logical_or.default logical_xor.default logit.default lt.Scalar lt.Tensor
masked_fill.Scalar max.dim max_pool2d_with_indices.default mean.dim min.dim minimum.default
mm.default mul.Scalar mul.Tensor native_layer_norm.default ne.Scalar ne.Tensor neg.default
nonzero.default ones.default permute_copy.default pixel_shuffle.default pow.Tensor_Scalar
pow.Tensor_Tensor reciprocal.default relu.default remainder.Scalar remainder.Tensor
repeat.default round.default rsqrt.default rsub.Scalar scalar_tensor.default scatter_add.default
select_copy.int select_scatter.default sigmoid.default sign.default sin.default sinh.default
slice_copy.Tensor slice_scatter.default split_copy.Tensor split_with_sizes_copy.default
sqrt.default squeeze_copy.dim squeeze_copy.dims stack.default sub.Scalar sub.Tensor
sum.dim_IntList t_copy.default tan.default tanh.default transpose_copy.int tril.default
unbind_copy.int unsqueeze_copy.default var.dim view_copy.default where.self zeros.default
"""
EDGE_TABLE_OPS = frozenset(_EDGE_TABLE.split())
_COMPLEX_ONES = frozenset(
    {"expand_copy.default", "permute_copy.default", "slice_copy.Tensor"}
    | {"squeeze_copy.dim", "squeeze_copy.dims", "unsqueeze_copy.default"}
)
_ORDINARY = frozenset(
    {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16"}
    | {"float16", "bfloat16", "float32", "float64", "complex64", "complex128"}
)
_COMPLEX = frozenset({"complex64", "complex128"})
_TENSOR_LISTS = frozenset({"aten.cat.default", "aten.stack.default"})


class EdgeDtypeRejected(Rule):
    code = "CML606"
    name = "edge-dtype-rejected"
    outcome = Outcome.CRASH
    summary = (
        "tensor dtypes the edge verifier rejects (cat/stack of mixed dtypes, complex, float8): "
        "SpecViolationError before Core ML"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.graph.nodes:
            found = (
                _mixed_list(ctx, node)
                or _narrow_int_by_scalar(ctx, node)
                or _outside_the_table(ctx, node)
            )
            if found is not None:
                what, fix, kind = found
                yield ctx.finding(
                    node,
                    f"{what}, so to_edge_transform_and_lower rejects the program before any "
                    f"partitioner runs: `{VERIFIER_ERROR}: Operator: <EdgeOpOverload: "
                    f"{ctx.edge_name(node)}>...`",
                    fix=fix,
                    kind=kind,
                )

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Each ``cat``/``stack`` reads its tensors cast to the result's dtype (what type
        promotion makes of them anyway)."""
        from coreml_lint.rulekit.fx import aten, cast, finish, val

        done = []
        for node in list(ep.graph.nodes):
            if node.target not in (aten.cat.default, aten.stack.default) or not node.args:
                continue
            out, tensors = val(node), list(node.args[0])
            if out is None or not tensors or any(val(t) is None for t in tensors):
                continue
            if val(tensors[0]).dtype == out.dtype:
                continue
            with ep.graph.inserting_before(node):
                tensors = [
                    t if val(t).dtype == out.dtype else cast(ep, t, out.dtype) for t in tensors
                ]
            node.args = (tensors, *node.args[1:])
            done.append(f"{node.name}: its tensors cast to {out.dtype} before the {node.target}")
        return (finish(ep), done) if done else (ep, [])

    def unanswered(self, finding: Finding, *, dequantize_on_cpu: bool = False) -> str | None:
        if finding.extra.get("kind") == "list":
            return None  # the rewrite casts the list
        return f"{finding.message}: {finding.fix}"


def _mixed_list(ctx: ProgramContext, node: Node) -> tuple[str, str, str] | None:
    """``cat``/``stack`` whose first tensor's dtype is not the result's."""
    if node.target not in _TENSOR_LISTS or not node.args or not node.outputs:
        return None
    tensors = [t.name for t in node.args[0] if isinstance(t, TensorRef)]
    first, result = (ctx.dtype(tensors[0]) if tensors else None), ctx.dtype(node.outputs[0])
    if first is None or result is None or first == result:
        return None
    dtypes = ", ".join(str(ctx.dtype(t)) for t in tensors)
    what = (
        f"{node.op_base} of tensors ({dtypes}) whose first is {first} but the result "
        f"{result}: the edge verifier judges the list by its first tensor"
    )
    fix = f"cast the tensors to {result} first, or put a {result} tensor first"
    return what, fix, "list"


def _narrow_int_by_scalar(ctx: ProgramContext, node: Node) -> tuple[str, str, str] | None:
    """``x // 2`` on an integer tensor narrower than int64: the edge step makes the Python
    int an int64 tensor, and ``floor_divide``'s dtype table wants both the same (measured:
    int32 and int16 fail, int64 and a tensor divisor of x's dtype lower)."""
    if node.target != "aten.floor_divide.default" or len(node.args) < 2:
        return None
    divisor = node.args[1]
    if isinstance(divisor, TensorRef) or not isinstance(divisor, int):
        return None
    dtype = ctx.dtype(node.tensor_inputs()[0]) if node.tensor_inputs() else None
    if dtype not in ("int32", "int16", "int8", "uint8"):
        return None
    what = (
        f"floor_divide of a {dtype} tensor by the Python int {divisor}: the edge step makes "
        "the int an int64 tensor, and floor_divide takes operands of one dtype"
    )
    fix = (
        f"divide by a {dtype} tensor (`x // torch.tensor({divisor}, dtype=torch.{dtype})`) "
        "or divide the int64 tensor (`x.long() // n`)"
    )
    return what, fix, "scalar"


def _outside_the_table(ctx: ProgramContext, node: Node) -> tuple[str, str, str] | None:
    """A dtype the edge dialect has no entry for, or complex where the op's table has none."""
    values = [*node.tensor_inputs(), *node.outputs]
    dtypes = [d for d in map(ctx.dtype, values) if d and d != "unknown"]
    odd = sorted({d for d in dtypes if d not in _ORDINARY})
    if odd:
        what = (
            f"{ctx.edge_name(node)} reads or makes {', '.join(odd)}, a dtype ExecuTorch's edge "
            "dialect has no entry for"
        )
        return what, f"keep {', '.join(odd)} out of the exported program", "dtype"
    edge = ctx.edge_name(node).removeprefix("aten.")
    decomposed = ctx.placement.nodes[node.name].decomposed
    if decomposed or edge not in EDGE_TABLE_OPS or edge in _COMPLEX_ONES:
        return None
    complex_ = sorted({d for d in dtypes if d in _COMPLEX})
    if not complex_:
        return None
    what = f"{ctx.edge_name(node)} reads or makes {complex_[0]}, which its edge dtype table lacks"
    fix = "compute the complex values as pairs of real tensors (e.g. RoPE with cos and sin)"
    return what, fix, "complex"


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
def _labels() -> Any:
    return torch.tensor([[3, 1, 2]])


_CAT = r"mismatched dtypes.*aten\.cat\.default.*'tensors': torch\.int64, '__ret_0': torch\.float32"


@case("cat-int64-then-float", expect={"CML606"}, crash=_CAT)
def _():
    return module(lambda s, labels: torch.cat([labels, -torch.ones(1, 2)], dim=1)), (_labels(),)


@case("cat-float-then-int64", expect=set())
def _():
    return module(lambda s, labels: torch.cat([labels.float(), -torch.ones(1, 2)], dim=1)), (
        _labels(),
    )


@case(
    "stack-int64-then-float",
    expect={"CML606"},
    crash=r"mismatched dtypes.*aten\.stack\.default.*'tensors': torch\.int64",
)
def _():
    return module(lambda s, labels: torch.stack([labels, torch.ones(1, 3)])), (_labels(),)


@case(
    "floordiv-int32-by-scalar",
    expect={"CML606"},
    crash=r"mismatched dtypes.*aten\.floor_divide\.default",
)
def _():
    return module(lambda s, x: (x // 2).float()), (torch.arange(1, 9, dtype=torch.int32),)


@case("floordiv-int64-by-scalar", expect=set())
def _():
    return module(lambda s, x: (x // 2).float()), (torch.arange(1, 9),)


@case(
    "complex-rope",
    expect={"CML606"},
    crash=r"mismatched dtypes.*aten\.mul\.Tensor.*'self': torch\.complex64",
)
def _():
    def forward(s, x):
        pairs = torch.view_as_complex(x.reshape(1, 6, 4, 2))
        return torch.view_as_real(pairs * s.freqs).flatten(2)

    torch.manual_seed(0)
    freqs = torch.polar(torch.ones(6, 4), torch.randn(6, 4))
    return module(forward, freqs=freqs), (torch.randn(1, 6, 8),)


@case(
    "float8-round-trip",
    expect={"CML606"},
    crash=r"mismatched dtypes.*_to_dim_order_copy\.default.*torch\.float8_e4m3fn",
)
def _():
    return module(lambda s, x: x.to(torch.float8_e4m3fn).float() * 2), (torch.randn(2, 4),)
