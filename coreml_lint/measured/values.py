"""How a key records a non-tensor argument value: small integers and short lists of them
exactly (a stride of ``[1, 1]`` and one of ``[3, 3]`` can lower differently), other values
by *class* (``frac``, ``big``, ``ints8``: exact floats would never match a model's); and the
shape class of the first operand (rank, a size-1 or empty dim). Which exact values of a
class behave alike is read off the measurements (``table.BehaviourTable._lookup_class``),
never assumed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from coreml_lint.program.graph import DType, Opaque, SymRef, TensorRef

FP16_MAX = 65504.0
INT32 = (-(2**31), 2**31 - 1)  # what Core ML's integers hold
# Integers this large are sentinels, not values: ``x[:, 1:]`` exports its end as 2**63 - 1.
INT64_SENTINEL = 2**62
# A float of magnitude one is keyed apart from other whole floats: coremltools folds a
# floor division by one away as if the values were integers, so ``x % 1.0`` becomes
# ``x - x``, 0 everywhere, where ``x % 3.0`` is right; and a Softplus threshold of 1.0 is
# measured wrong where one of 3.0 is right.
ONE = "1.0"


def value_class(value: Any) -> str:
    """The class of a non-tensor argument value, as keys record it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return _int_class(value)
    if isinstance(value, float):
        return _float_class(value)
    if isinstance(value, str):
        return value
    if isinstance(value, DType):
        return value.name
    if isinstance(value, SymRef):
        return "sym"
    if isinstance(value, TensorRef):
        return "T"
    if isinstance(value, Opaque):
        return value.kind
    if isinstance(value, (list, tuple)):
        return _list_class(list(value))
    return type(value).__name__


# Small integers and short lists of them are keyed by their exact value: a stride, padding,
# dilation or output size of [1, 1] and [3, 3] can lower differently, and a class would
# merge them. Which exact values of a class behave alike is then read off the measurements
# (``BehaviourTable._by_class``), never assumed.
EXACT_INT = 64

EXACT_LIST = 6


def value_text(value: Any, shape: tuple[Any, ...] | None = None) -> str:
    """A non-tensor argument value as keys record it: the exact value of a small integer
    or a short list of small integers, else its class (``value_class``). Given the first
    operand's ``shape``, a list of floats is read as scale factors of its trailing dims
    (``scaled_text``)."""
    if shape is not None and (scaled := scaled_text(value, shape)) is not None:
        return scaled
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= EXACT_INT:
        return str(value)
    if (
        isinstance(value, (list, tuple))
        and 0 < len(value) <= EXACT_LIST
        and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
        and all(abs(i) <= EXACT_INT for i in value)
    ):
        return "[" + ",".join(str(i) for i in value) + "]"
    return value_class(value)


# A non-integral scale factor whose product with the dim it scales is whole (10 * 1.5):
# upsampling by it makes a whole output size, and coremltools' upsample refuses only a
# fractional one ("with float output size is not supported"), so the two are keyed apart.
WHOLE_SIZE_FRAC = "frac(whole)"


def scaled_text(value: Any, shape: tuple[Any, ...]) -> str | None:
    """A list of floats as scale factors of the trailing dims of ``shape`` (the float
    lists of the ops the partitioner delegates are ``upsample_*.vec``'s
    ``scale_factors``), or None for any other value or where a scaled dim is unknown."""
    if not (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(i, float) for i in value)
        and len(value) <= len(shape)
    ):
        return None
    dims = shape[len(shape) - len(value) :]
    if not all(isinstance(d, int) for d in dims):
        return None
    texts = [
        WHOLE_SIZE_FRAC if (c := value_class(f)) == "frac" and _whole(d * f) else c
        for f, d in zip(value, dims, strict=True)
    ]
    return "[" + ",".join(texts) + "]"


# A resize's output size is keyed by what it does to each spatial dim, as its scale factors
# are: coremltools chooses its path by the ratio (a whole scale or a fractional one), and a
# model's sizes (224, 56, 20 -> 8) are numbers no sweep can enumerate. The ratio class does
# not decide everything (one class answering another held out at 0.56 in the resize family,
# so that reading is gated): a cell answers only the class it measured. Per dim: ``same``,
# ``1``, ``up`` (a multiple), ``up(frac)``, ``down`` (a divisor), ``down(frac)``. A nearest
# resize is keyed by another class (``_nearest_class``).
def sized_text(target: str, args: list[Any], shape: tuple[Any, ...] | None) -> str | None:
    """The output size (argument 1) of an ``upsample`` op by its ratio to the input's
    trailing dims (a nearest one by ``_nearest_class``), or None where it is not one, not
    given, or a dim is unknown; a nearest-exact resize keeps its exact sizes."""
    if "upsample" not in target or "nearest_exact" in target or not shape or len(args) < 2:
        return None
    size = args[1]
    if not (isinstance(size, list) and size and len(size) <= len(shape)):
        return None
    dims = shape[len(shape) - len(size) :]
    classed = _nearest_class if "nearest" in target else _size_class
    texts = [classed(o, i) for o, i in zip(size, dims, strict=True)]
    if any(t is None for t in texts):
        return None
    return "[" + ",".join(texts) + "]"  # type: ignore[arg-type]


# A nearest resize to a size that is not a multiple of the input's: coremltools makes its
# scale ``(out + 1e-4) / in`` and Core ML reads source row ``floor(i / scale)``, one row
# short of torch's ``floor(i * in / out)`` wherever ``i * in / out`` is whole for some
# ``0 < i < out``: exactly where ``in`` and ``out`` share a divisor (20 -> 8, 8 -> 4 and
# 4 -> 6 are wrong; 4 -> 3, 4 -> 5 and 7 -> 3 right, as measured). So its class is the
# direction and whether the sizes are coprime: ``up(common)``, ``up(coprime)``,
# ``down(common)`` (a divisor among them), ``down(coprime)``.
# From an output of 100 rows on, the row ``1e-4`` moves is within the 1e-6 (relative) that
# verify's nearest kernel reads as a whole number (``k_resize.scaled_sources``), so verify
# finds such sizes right: whether the device rounds as the kernel does is not measured, and
# the table does not class them with the small sizes it measured (their exact sizes key).
NEAREST_SNAPPED = 100


def _nearest_class(out: Any, size: Any) -> str | None:
    word = _size_class(out, size)
    if word in (None, "same", "1", "up"):
        return word
    if out >= NEAREST_SNAPPED:
        return None
    shared = "common" if math.gcd(out, size) > 1 else "coprime"
    return f"{'up' if out > size else 'down'}({shared})"


def _size_class(out: Any, size: Any) -> str | None:
    if not (isinstance(out, int) and isinstance(size, int)) or size <= 0 or out <= 0:
        return None
    if out == size:
        return "same"
    if out == 1:
        return "1"
    if out > size:
        return "up" if out % size == 0 else "up(frac)"
    return "down" if size % out == 0 else "down(frac)"


# A pooling's ``ceil_mode=True`` is keyed by what the ceil does to the output sizes, since
# coremltools decides by it: windows that tile every padded dim exactly change no size
# (``True(same size)``); a ceil whose extra window torch drops again (it would start past
# the input: torch's last-window correction, which coremltools applies only with padding,
# so its sizes differ from torch's) is ``True(last window dropped)``; a ceil that adds a
# window keeps the plain ``True`` (coremltools' 3-d pools pad for it and refuse the padding:
# "pool3D with ceil mode=True and include_pad=True not supported").
CEIL_WITHOUT_EFFECT = "True(same size)"
CEIL_WINDOW_DROPPED = "True(last window dropped)"

# Pooling ops: (spatial rank, argument positions of kernel, stride, padding, dilation
# (None: the op has none) and ceil_mode).
POOLS = {
    f"aten.{kind}_pool{n}d{suffix}.default": (n, 1, 2, 3, dilation, ceil)
    for n in (1, 2, 3)
    for kind, suffix, dilation, ceil in (
        ("avg", "", None, 4),
        ("max", "", 4, 5),
        ("max", "_with_indices", 4, 5),
    )
}


def ceil_text(op: str, args: list[Any], shape: tuple[Any, ...] | None) -> str | None:
    """How a pooling node's ``ceil_mode=True`` is keyed (``True``, ``CEIL_WITHOUT_EFFECT``
    or ``CEIL_WINDOW_DROPPED``: the first that fits any dim wins over the others in that
    order), or None where it is not such a node or a size is unknown."""
    if op not in POOLS or shape is None:
        return None
    rank, k, s, p, d, c = POOLS[op]
    if len(args) <= c or args[c] is not True or len(shape) < rank:
        return None

    def spread(value: Any, default: int) -> list[Any] | None:
        value = [default] if value in (None, []) else value
        if not isinstance(value, (list, tuple)):
            value = [value]
        return list(value) * rank if len(value) == 1 else list(value)

    kernel = spread(args[k], 1)
    stride = spread(args[s] if len(args) > s and args[s] else kernel, 1)
    padding = spread(args[p] if len(args) > p else None, 0)
    dilation = spread(args[d] if d is not None and len(args) > d else None, 1)
    dims = list(shape[len(shape) - rank :])
    values = [kernel, stride, padding, dilation, dims]
    if any(v is None or len(v) != rank for v in values) or not all(
        isinstance(i, int) and not isinstance(i, bool) for v in values for i in v
    ):
        return None
    kinds = set()
    for size, kk, ss, pp, dd in zip(dims, kernel, stride, padding, dilation, strict=True):
        span = size + 2 * pp - dd * (kk - 1) - 1
        if ss <= 0 or span < 0:
            return None
        if span % ss == 0:
            kinds.add(CEIL_WITHOUT_EFFECT)
        elif (span // ss + 1) * ss >= size + pp:  # the extra window would start past it
            kinds.add(CEIL_WINDOW_DROPPED)
        else:
            kinds.add("True")
    return next(t for t in ("True", CEIL_WINDOW_DROPPED, CEIL_WITHOUT_EFFECT) if t in kinds)


# A squeeze whose dims have no size-1 dim among them changes nothing, and coremltools then
# returns its input var itself (a partition returning the squeeze returns its own input, a
# wrong value on device); one that removes a dim converts to a real op. The two are keyed
# apart by the operand's shape: ``[1](no-op)``.
SQUEEZE_WITHOUT_EFFECT = "(no-op)"
SQUEEZES = frozenset(
    f"aten.{base}.{overload}"
    for base in ("squeeze", "squeeze_copy")
    for overload in ("dim", "dims")
)


def squeeze_text(op: str, args: list[Any], shape: tuple[Any, ...] | None) -> str | None:
    """How a squeeze node's dims are keyed: their value with ``SQUEEZE_WITHOUT_EFFECT``
    where none of them has size 1 in ``shape`` (an empty list squeezes nothing), or None
    where it is not a squeeze, removes a dim, or a size is unknown."""
    if op not in SQUEEZES or shape is None or len(args) < 2:
        return None
    dims = list(args[1]) if isinstance(args[1], (list, tuple)) else [args[1]]
    rank = len(shape)
    if not all(isinstance(d, int) and not isinstance(d, bool) and -rank <= d < rank for d in dims):
        return None
    sizes = [shape[d % rank] for d in dims]
    if not all(isinstance(size, int) for size in sizes) or 1 in sizes:
        return None
    return value_text(args[1]) + SQUEEZE_WITHOUT_EFFECT


# Grouped-query attention: ``scaled_dot_product_attention(q, k, v, enable_gqa=True)`` with
# fewer key/value heads than query heads. coremltools 9.0 converts it as if the heads were
# equal and fails to broadcast them ("Incompatible dim"); with equal heads the flag changes
# nothing and it converts. The two are keyed apart by the operands' heads (dim -3).
GROUPED_HEADS = "grouped"
ATTENTION = frozenset({"aten.scaled_dot_product_attention.default"})


def grouped_text(
    op: str, kwargs: dict[str, Any], shapes: list[tuple[Any, ...] | None] | None
) -> str | None:
    """``GROUPED_HEADS`` for an attention node with ``enable_gqa=True`` whose key has other
    heads than its query; None where it is not one or a size is unknown."""
    if op not in ATTENTION or kwargs.get("enable_gqa") is not True or not shapes:
        return None
    if len(shapes) < 2 or any(s is None or len(s) < 3 for s in shapes[:2]):
        return None
    query, key = shapes[0][-3], shapes[1][-3]  # type: ignore[index]
    if not (isinstance(query, int) and isinstance(key, int)) or query == key:
        return None
    return GROUPED_HEADS


# Ops whose operands' ranks choose the converter's path together: ``matmul`` promotes a
# vector operand and broadcasts batch dims, and coremltools types a vector times a rank-3
# tensor as (1, n) where the op computes (b, n), while a vector times a matrix is right. The
# first operand's shape class cannot tell these apart, so a call whose operands' ranks
# differ is keyed with both (``ranks=1x3``).
RANK_PAIRED = frozenset({"aten.matmul.default"})


def ranks_text(op: str, shapes: list[tuple[Any, ...] | None] | None) -> str | None:
    """``ranks=AxB`` for a ``RANK_PAIRED`` node whose first two operands' ranks differ;
    None where they agree or one is unknown."""
    if op not in RANK_PAIRED or not shapes or len(shapes) < 2:
        return None
    first, second = shapes[0], shapes[1]
    if first is None or second is None or len(first) == len(second):
        return None
    return f"ranks={len(first)}x{len(second)}"


# Ops that read or write along ``dim`` where an ``index`` operand of the input's rank says
# (``gather``, ``scatter``): torch takes an index narrower than the input on the other dims
# (the x and y of K keypoints out of x, y and a score) and a scatter's ``src`` wider than
# the index (only its index-shaped corner is written), where coremltools' gather_along_axis
# and scatter_along_axis take shapes that match ("should have the same size at axis 2"). The
# key holds the relation, so a call of equal shapes never answers for one that differs:
# op -> the position of ``src`` among the tensor operands (None: the op has none).
ALONG_DIM = {
    "aten.gather.default": None,
    "aten.scatter.src": 2,
    "aten.scatter.value": None,
    "aten.scatter.reduce": 2,
    "aten.scatter.value_reduce": None,
    "aten.scatter_add.default": 2,
    "aten.scatter_reduce.two": 2,
}
NARROW_INDEX = "index=narrower"
WIDE_SRC = "src=wider"


# Ops whose kernel and stride decide together (kernel_size's position, stride's): coremltools
# folds patches back (``F.fold``, ``col2im``) only where they do not overlap ("Only supports
# stride >= kernel_size"), which no exact value or class of either list says alone. A call
# whose windows overlap is keyed ``window=overlap`` beside its exact values, so the cells of
# every overlapping call measured answer one that was not (the table's word reading).
WINDOWS = {"aten.col2im.default": (2, 5), "aten.im2col.default": (1, 4)}
OVERLAP = "window=overlap"


def overlap_text(target: str, args: list[Any]) -> str | None:
    """``window=overlap`` for a windowed op whose stride is below its kernel in some dim."""
    where = WINDOWS.get(target)
    if where is None or len(args) <= max(where):
        return None
    kernel, stride = args[where[0]], args[where[1]]
    if not (isinstance(kernel, list) and isinstance(stride, list) and len(kernel) == len(stride)):
        return None
    numbers = [*kernel, *stride]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        return None
    return OVERLAP if any(s < k for k, s in zip(kernel, stride, strict=True)) else None


def along_dim_texts(
    op: str, args: list[Any], shapes: list[tuple[Any, ...] | None] | None
) -> list[str]:
    """``NARROW_INDEX`` where the index of a gather or scatter is narrower than its input on
    a dim other than ``dim``, ``WIDE_SRC`` where a scatter's ``src`` is wider than the index
    on any dim; nothing where the shapes match, a size is unknown or the op is another."""
    if op not in ALONG_DIM or not shapes or len(shapes) < 2 or len(args) < 2:
        return []
    data, index, dim = shapes[0], shapes[1], args[1]
    if data is None or index is None or len(data) != len(index) or not data:
        return []
    if not isinstance(dim, int) or isinstance(dim, bool) or not -len(data) <= dim < len(data):
        return []
    found = []
    others = [axis for axis in range(len(data)) if axis != dim % len(data)]
    if any(_less(index[axis], data[axis]) for axis in others):
        found.append(NARROW_INDEX)
    at = ALONG_DIM[op]
    src = shapes[at] if at is not None and len(shapes) > at else None
    pairs = zip(src, index, strict=True) if src is not None and len(src) == len(index) else ()
    if any(_less(i, s) for s, i in pairs):
        found.append(WIDE_SRC)
    return found


# An antialiased resize (``F.interpolate(..., antialias=True)``) differs from a plain one
# only where it shrinks a dim: there torch widens the filter to cover every input pixel,
# which coremltools drops (its ``upsample_bilinear`` ignores the flag: wrong in float32).
# An output size or scale factor by itself does not say whether it shrinks (``[12, 16]`` of
# a 32x40 input does, of a 4x4 one it does not), so a shrinking call is keyed
# ``size=down`` beside its exact values: every shrinking call measured then answers one
# that was not (the class reading), and a growing one never answers for it.
ANTIALIASED = frozenset(
    {
        "aten._upsample_bilinear2d_aa.vec",
        "aten._upsample_bilinear2d_aa.default",
        "aten._upsample_bicubic2d_aa.vec",
        "aten._upsample_bicubic2d_aa.default",
    }
)
DOWNSIZED = "size=down"


def downsized_text(target: str, args: list[Any], shape: tuple[Any, ...] | None) -> str | None:
    """``size=down`` for an antialiased resize whose output size (argument 1) is below
    the input's in some dim, or whose scale factor (``.vec``'s argument 3) is below 1."""
    if target not in ANTIALIASED or not shape:
        return None
    size = args[1] if len(args) > 1 else None
    if isinstance(size, list) and size and len(size) <= len(shape):
        spatial = shape[len(shape) - len(size) :]
        if any(_less(o, i) for o, i in zip(size, spatial, strict=True)):
            return DOWNSIZED
    scales = args[3] if target.endswith(".vec") and len(args) > 3 else None
    if isinstance(scales, list) and any(isinstance(f, float) and f < 1 for f in scales):
        return DOWNSIZED
    return None


def _less(a: Any, b: Any) -> bool:
    """``a < b`` for two known sizes; a symbolic one (a dynamic batch) compares as equal."""
    return isinstance(a, int) and isinstance(b, int) and a < b


def _whole(size: float) -> bool:
    """Whole as coremltools reads an output size (``_is_float_value``: within 1e-3)."""
    return size - math.floor(size) <= 1e-3


_EXACT_INT = re.compile(r"-?\d+")

_EXACT_LIST = re.compile(r"\[-?\d+(,-?\d+)*\]")


def class_of_text(text: str) -> str:
    """The class of a value as a key records it (an exact value's class; a class is its
    own)."""
    if _EXACT_INT.fullmatch(text):
        return _int_class(int(text))
    if _EXACT_LIST.fullmatch(text):
        return _list_class([int(i) for i in text[1:-1].split(",")])
    return text


def is_exact_text(text: str) -> bool:
    """Whether a value as a key records it is the value itself (an integer, a list of
    them, a bool, None), not a class of values."""
    exact = _EXACT_INT.fullmatch(text) or _EXACT_LIST.fullmatch(text)
    return text in ("True", "False", "None") or exact is not None


def class_variant(variant: str) -> str:
    """A variant with every exact value replaced by its class."""
    return ";".join(
        f"{name}={class_of_text(value)}"
        for name, value in (part.partition("=")[::2] for part in variant.split(";") if part)
    )


# Texts a key writes for values that are not a string argument's own (``value_class``):
# number classes, ``bool`` (the one dtype name without digits), the symbol mark, the kinds
# of opaque values (a device, layout or memory format) and the type names of other values.
_NOT_WORDS = frozenset(
    {"int", "big", "huge", "tiny", "whole", "frac", "inf", "nan", "sym", "bool"}
    | {"device", "layout", "memory_format", "complex", "float", "list", "tuple", "dict"}
)


def is_word(text: str) -> bool:
    """Whether a value as a key records it is a string argument's word (``circular``,
    ``tanh``, ``floor``): the value itself, lower case, not a class of numbers, a dtype or
    an opaque kind (``as_layout``, ``layout``)."""
    return (
        re.fullmatch(r"[a-z][a-z_]*", text) is not None
        and text not in _NOT_WORDS
        and not text.startswith("as_")
    )


def negative_list(text: str) -> bool:
    """Whether a value as a key records it is a list of integers holding a negative one
    (``[-2,-2,-2,-2]``, or its class ``ints8-``): a pad that crops."""
    if _EXACT_LIST.fullmatch(text):
        return any(int(i) < 0 for i in text[1:-1].split(","))
    return re.fullmatch(r"ints\d+-0?", text) is not None


def underived(variant: str) -> str:
    """A variant as a table written before the squeeze derivation keyed the same call (the
    scale and ceil derivations are older than any table carried from)."""
    return variant.replace(SQUEEZE_WITHOUT_EFFECT, "")


def _int_class(value: int) -> str:
    if value in (0, 1, -1):
        return str(value)
    if abs(value) >= INT64_SENTINEL:  # a slice's open end, iinfo(int64): as before
        return "big" if value > 0 else "-big"
    if not INT32[0] <= value <= INT32[1]:  # Core ML holds an int32: the number wraps
        return "big64" if value > 0 else "-big64"
    if abs(value) > 2048:  # not exact in float16
        return "big" if value > 0 else "-big"
    return "int" if value > 0 else "-int"


def _float_class(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0.0:
        return "0.0"
    magnitude = abs(value)
    sign = "-" if value < 0 else ""  # a negative slope or bound is another call
    if magnitude > FP16_MAX:
        return sign + "huge"
    if magnitude < 1e-4:
        return sign + "tiny"
    if magnitude == 1.0:  # a floor division by one is folded away: x % 1.0 is x - x
        return sign + ONE
    if value.is_integer():
        return sign + "whole"
    return sign + "frac"


def _list_class(items: list[Any]) -> str:
    if not items:
        return "[]"
    if all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        marks = ("-" if any(i < 0 for i in items) else "") + ("0" if 0 in items else "")
        return f"ints{len(items)}{marks}"
    if any(isinstance(i, TensorRef) or i is None for i in items):
        return "[" + ",".join("T" if isinstance(i, TensorRef) else "None" for i in items) + "]"
    return "[" + ",".join(value_class(i) for i in items) + "]"


def shape_class(shape: tuple[int | str, ...] | None) -> str:
    """``r<rank>`` plus ``u`` for a size-1 dim and ``e`` for an empty one."""
    if shape is None:
        return "r?"
    marks = ("u" if 1 in shape else "") + ("e" if 0 in shape else "")
    return f"r{len(shape)}{marks}"


# How many shape classes, of how many ranks, must agree before a measurement answers for
# every shape: two classes are too few, and so are two ranks. A model's per-channel PReLU
# crashes at rank 2 and at rank 3 (the sweep's base and model shapes: 2x4, 1x4x4 and 2x4x4,
# three classes) and converts at rank 4 (ExecuTorch's operator suite). The sweep folds such
# cells into ``*``; the table takes an op whose base call agrees so as shape-free.
FOLD_SHAPES = 3
FOLD_RANKS = 3


def ranks_of(shapes: Iterable[str]) -> set[str]:
    """The ranks of shape classes (``r3u`` is rank 3; ``*`` and ``r?`` have none)."""
    return {m.group(1) for s in shapes if (m := re.match(r"r(\d+)", s))}


def describe_variant(variant: str, names: list[str] | None) -> str:
    parts = []
    for part in filter(None, variant.split(";")):
        name, _, value = part.partition("=")
        if names and re.fullmatch(r"a\d+", name) and int(name[1:]) < len(names):
            name = names[int(name[1:])]
        if name == "ranks":  # ``ranks_text``: not an argument, the operands' ranks
            parts.append("operands of ranks " + value.replace("x", " and "))
            continue
        parts.append(f"{name}={value}".replace(SQUEEZE_WITHOUT_EFFECT, " (no dim of size 1)"))
    return ", ".join(parts)


def factors(variant: str) -> dict[str, str]:
    """A variant as argument -> value class (an argument left out is absent)."""
    return dict(part.partition("=")[::2] for part in variant.split(";") if part)
