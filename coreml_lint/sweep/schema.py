"""Which ops the sweep measures and what values each argument may take, read from the ops'
own schemas (``torch.ops.aten.<op>.<overload>._schema``), not from a hand-written list.

The scope is every functional ATen overload the stock partitioner would hand to Core ML:
coremltools has a converter for its name (the checked-in op table) and executorch does not
refuse it. An argument's candidate values come from its schema type and default: a bool
flips, an optional argument is tried absent and present, a list of ints has the lengths
its type allows, a string takes the values torch's own error message lists for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from coreml_lint.program.optable import OpTable
from coreml_lint.program.placement import REFUSED_OPS
from coreml_lint.sweep.scope import DECOMPOSED

# Argument types that are never worth varying: the sweep leaves them at their default.
FIXED_TYPES = ("Device", "Layout", "MemoryFormat", "Generator")
RANDOM_NAMES = re.compile(r"(^|_)(rand|randn|randint|multinomial|bernoulli|normal|uniform)")


@dataclass(frozen=True)
class Arg:
    """One schema argument, with the kind the generator works with."""

    name: str
    kind: str  # tensor, tensor?, tensors, tensors?, int, ints, float, floats, scalar, bool,
    #            str, dtype, fixed
    optional: bool
    has_default: bool
    default: Any
    kwarg_only: bool
    length: int | None  # the N of int[N]

    @property
    def is_tensor(self) -> bool:
        return self.kind.startswith("tensor")


def arg_kind(real_type: str) -> tuple[str, bool]:
    """(kind, optional) of a schema type such as ``Optional[List[int]]``."""
    optional = real_type.startswith("Optional[")
    inner = real_type[len("Optional[") : -1] if optional else real_type
    if any(t in inner for t in FIXED_TYPES):
        return "fixed", optional
    kinds = {
        "Tensor": "tensor",
        "List[Tensor]": "tensors",
        "List[Optional[Tensor]]": "tensors?",
        "int": "int",
        "SymInt": "int",
        "List[int]": "ints",
        "List[SymInt]": "ints",
        "float": "float",
        "List[float]": "floats",
        "number": "scalar",
        "bool": "bool",
        "str": "str",
        "ScalarType": "dtype",
    }
    kind = kinds.get(inner, "unknown")
    if kind == "tensor" and optional:
        return "tensor?", True
    return kind, optional


def schema_args(op: Any) -> list[Arg]:
    args = []
    for a in op._schema.arguments:
        kind, optional = arg_kind(str(a.real_type))
        args.append(
            Arg(
                a.name,
                kind,
                optional,
                a.has_default_value(),
                a.default_value,
                a.kwarg_only,
                a.N,
            )
        )
    return args


def returns_tensors(op: Any) -> bool:
    returns = [str(r.type) for r in op._schema.returns]
    return bool(returns) and all(r in ("Tensor", "List[Tensor]") for r in returns)


@dataclass(frozen=True)
class OpInfo:
    name: str  # "amax.default": torch.ops.aten.amax.default
    op: Any
    args: tuple[Arg, ...]

    @property
    def edge_name(self) -> str:
        return f"aten.{self.name}"


def in_scope(table: OpTable) -> tuple[list[OpInfo], dict[str, str]]:
    """The ops to sweep, and the others the partitioner would delegate with why they are
    left out."""
    import torch

    found, left_out = [], {}
    names = sorted({n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")})
    for full in names:
        base, _, overload = full[len("aten::") :].partition(".")
        overload = overload or "default"
        name = f"{base}.{overload}"
        if (base.endswith("_") and not base.endswith("__")) or overload.endswith("out"):
            continue
        if not table.coreml_has_converter(name) and name not in DECOMPOSED:
            continue
        try:
            op = getattr(getattr(torch.ops.aten, base), overload)
        except (AttributeError, RuntimeError):
            continue
        why = _left_out(op, name)
        if why is not None:
            left_out[name] = why
            continue
        found.append(OpInfo(name, op, tuple(schema_args(op))))
    return found, left_out


def _left_out(op: Any, name: str) -> str | None:
    if op._schema.is_mutable:
        return "mutates its input"
    if name in REFUSED_OPS:
        return "executorch refuses it (never delegated)"
    if not returns_tensors(op):
        return "returns no tensor"
    args = schema_args(op)
    if RANDOM_NAMES.search(name) or any("Generator" in str(a) for a in op._schema.arguments):
        return "random: nothing to compare"
    if any(a.kind == "unknown" and not a.has_default for a in args):
        return "an argument type the generator does not make"
    return None


# ---------------------------------------------------------------- candidate values
def int_candidates(arg: Arg, rank: int, side: int) -> list[Any]:
    """Values for a required int: dims, counts and sizes a side-``side`` tensor accepts."""
    return [1, 0, -1, 2, side, side * side, 3]


def ints_candidates(arg: Arg, shape: tuple[int, ...]) -> list[list[int]]:
    """Values for a required int list: spatial lists, dims, sizes and permutations."""
    rank = len(shape)
    spatial = max(rank - 2, 1)
    if arg.length:
        n = arg.length
        # 3 last (earlier finds stay first): the odd kernel models use most, which tiles no
        # even size (a pool's ceil_mode then adds a window: 3-d pools refuse it).
        found = [[1] * n, [2] * n, [0] * n, [shape[-1] if shape else 1] * n, [3] * n]
        found += mixed_lists(n)
    else:
        found = [
            [1] * spatial,
            [0] * spatial,
            [1],
            [0],
            [shape[-1]] if shape else [1],
            list(shape),
            [-1],
            [_numel(shape)],
            list(reversed(range(rank))),
            [2] * spatial,
            [1] * rank,
            [],
            [1, 1],  # one dim's before and after: a pad (last: earlier finds stay first)
        ]
    unique: list[list[int]] = []
    for value in found:
        if value not in unique:
            unique.append(value)
    return unique


def mixed_lists(n: int) -> list[list[int]]:
    """Lists of length ``n`` (2 or more) whose dims differ: ``[1, 0, 1]`` and ``[2, 1, 2]``.
    Models give a dim its own value (a ``(3, 1)`` kernel, a ``(2, 1)`` stride, an
    ``output_padding`` of ``(1, 0)``), and a converter that reads one value for every dim
    is right on ``[n] * k`` and wrong on these; the exact key tells them apart."""
    if n < 2:
        return []
    return [[(high, low)[i % 2] for i in range(n)] for high, low in ((1, 0), (2, 1))]


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


# Equations for an equation-string argument (einsum): matrix products, a batch, ellipsis,
# a repeated label (a diagonal), a trace, an outer product, a transpose.
EQUATIONS = {
    1: ["ij->ji", "ii->i", "ii->", "...ij->...ji", "ij->"],
    2: ["ij,jk->ik", "bij,bjk->bik", "...ij,...jk->...ik", "i,j->ij", "i,i->", "ii,ij->j"],
    3: ["ij,jk,kl->il"],
}


FLOAT_CANDIDATES = [0.5, 1e-5, 0.0, 2.0]
SCALAR_CANDIDATES = [2, 0.5]


# The words ATen's string arguments take (padding and pad modes, FFT norms, sides, matrix
# norms, rounding modes, reductions, interpolation and grid modes): candidates for an
# argument whose error message does not list its values (``Unrecognised padding mode``).
# Torch decides which an op takes (``string_options``); a word no op takes costs a probe.
WORDS = (
    "same", "valid", "constant", "reflect", "replicate", "circular", "forward", "backward",
    "ortho", "left", "right", "fro", "nuc", "trunc", "floor", "none", "tanh", "add",
    "multiply", "sum", "prod", "mean", "amax", "amin", "xy", "ij", "nearest", "linear",
    "bilinear", "bicubic", "trilinear", "area", "zeros", "border", "reflection",
)  # fmt: skip

BOGUS = "@@"


def string_options(op: Any, args: list[Any], kwargs: dict[str, Any], arg: Arg) -> list[str]:
    """The values torch accepts for a string argument: its default, the words its own
    error message lists for a bogus one (``approximate argument must be either none or
    tanh``), and each of ATen's words (``WORDS``) the op does not refuse as it refuses a
    bogus one (a word refused for another reason, a reflect padding wider than the input,
    is a value of the argument: the generator's legal-call search finds its call)."""
    options = [arg.default] if isinstance(arg.default, str) else []
    bogus = _refusal(op, args, kwargs, arg, BOGUS)
    options += _listed_words(bogus or "")
    if bogus is not None:
        options += [
            w for w in WORDS if _refusal(op, args, kwargs, arg, w) != bogus.replace(BOGUS, w)
        ]
    return list(dict.fromkeys(o for o in options if o))


def _refusal(op: Any, args: list[Any], kwargs: dict[str, Any], arg: Arg, word: str) -> str | None:
    """The error message of the op called with ``word`` for ``arg`` (None: it accepts it)."""
    try:  # by name: the arguments before it may be fewer than its position (defaults)
        op(*args, **{**kwargs, arg.name: word})
    except Exception as exc:  # the message is the point
        return str(exc)
    return None


_STOP = {"or", "and", "none_", "but", "found", "received", "got", "None"}


def _listed_words(message: str) -> list[str]:
    first = message.strip().splitlines()[0] if message.strip() else ""
    match = re.search(r"(?:either|one of)\s+(.*?)(?:\s+but\b|\.\s*$|$)", first)
    if not match:
        return []
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", match.group(1))
    return [w for w in words if w not in _STOP]
