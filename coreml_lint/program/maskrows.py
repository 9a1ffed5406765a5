"""Which rows of an attention mask a program's inputs can mask entirely, found by evaluating
the mask's condition on probe inputs, in pure Python (the linting path imports no numpy).

A mask filled with a value float16 cannot hold becomes -inf in Core ML, and a row whose
every position is masked then comes out NaN from the softmax. Whether that happens to a
sequence that has tokens is what matters: a *causal* mask combined with a *right-padded*
length mask (``arange(T) < lengths``) keeps the first position of every row of a sequence
with one token or more, and masks whole rows only where the sequence is empty; a left-padded
mask under a causal one, or a padding mask applied to the query rows too, masks some rows of
a sequence that has tokens.

So the condition (``masked_fill``'s mask) is evaluated with each input it reads set to probe
values: 0/1 patterns kept as a prefix and as a suffix along the last axis (right and left
padding), and, for integer inputs, whole numbers from 0 to past the key length (lengths).
Then each slice of rows (every axis but the last two) is read: some but not all of its rows
fully masked means a sequence with tokens loses rows (:data:`PARTIAL`); whole slices only
means only an empty sequence does (:data:`WHOLE`). Anything the evaluator does not know (an
op outside :data:`OPS`, a float input, a symbolic size, a mask past :data:`MAX_ELEMENTS`)
answers None, and the caller keeps its general verdict.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator
from random import Random
from typing import Any

from coreml_lint.program.graph import Graph, Node, TensorRef

PARTIAL = "partial"  # some rows of a sequence with tokens are fully masked
WHOLE = "whole"  # only every row of a slice at once: an empty sequence
NEVER = "never"  # no probe masks a row fully
MAX_ELEMENTS = 1 << 14  # per evaluated value: a mask from a short example sequence
MAX_NODES = 64  # of the condition's subgraph
MAX_WORK = 1 << 26  # probes x elements x nodes: about a second of pure Python at most


class _Unknown(Exception):
    """The evaluator cannot say (an unsupported op or argument)."""


class Tensor:
    """A small dense tensor: its shape and its elements in row-major order."""

    __slots__ = ("data", "shape")

    def __init__(self, shape: tuple[int, ...], data: list[Any]) -> None:
        if math.prod(shape) != len(data) or len(data) > MAX_ELEMENTS:
            raise _Unknown("size")
        self.shape, self.data = shape, data

    def at(self, index: tuple[int, ...]) -> Any:
        flat = 0
        for size, i in zip(self.shape, index, strict=False):
            flat = flat * size + i
        return self.data[flat]


def _indices(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*(range(s) for s in shape))


def _broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise _Unknown("broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _expand(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    if t.shape == shape:
        return t
    if math.prod(shape) > MAX_ELEMENTS:
        raise _Unknown("size")
    pad = len(shape) - len(t.shape)
    if pad < 0:
        raise _Unknown("expand")
    own = (1,) * pad + t.shape

    def source(index: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(0 if s == 1 else i for s, i in zip(own, index, strict=False))

    padded = Tensor(own, t.data)
    return Tensor(shape, [padded.at(source(i)) for i in _indices(shape)])


def _elementwise(fn: Callable[..., Any], *operands: Any) -> Tensor:
    tensors = [o for o in operands if isinstance(o, Tensor)]
    shape = _broadcast_shape(*(t.shape for t in tensors))
    columns = [
        _expand(o, shape).data if isinstance(o, Tensor) else itertools.repeat(o) for o in operands
    ]
    return Tensor(shape, [fn(*values) for values in zip(*columns, strict=False)])


def _dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def _permute(t: Tensor, dims: list[int]) -> Tensor:
    dims = [_dim(d, len(t.shape)) for d in dims]
    shape = tuple(t.shape[d] for d in dims)
    back = [dims.index(a) for a in range(len(dims))]
    return Tensor(shape, [t.at(tuple(i[b] for b in back)) for i in _indices(shape)])


def _view(t: Tensor, shape: list[int]) -> Tensor:
    if not all(isinstance(s, int) for s in shape):
        raise _Unknown("symbolic view")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = [len(t.data) // known if s == -1 else s for s in shape]
    return Tensor(tuple(shape), t.data)


def _slice(t: Tensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Tensor:
    dim = _dim(dim, len(t.shape))
    kept = range(t.shape[dim])[slice(start, end, step)]
    shape = (*t.shape[:dim], len(kept), *t.shape[dim + 1 :])
    return Tensor(shape, [t.at((*i[:dim], kept[i[dim]], *i[dim + 1 :])) for i in _indices(shape)])


def _select(t: Tensor, dim: int, index: int) -> Tensor:
    dim = _dim(dim, len(t.shape))
    index = index + t.shape[dim] if index < 0 else index
    shape = t.shape[:dim] + t.shape[dim + 1 :]
    return Tensor(shape, [t.at((*i[:dim], index, *i[dim:])) for i in _indices(shape)])


def _triangle(t: Tensor, diagonal: int = 0, *, upper: bool) -> Tensor:
    if len(t.shape) < 2:
        raise _Unknown("triangle")
    zero = False if isinstance(t.data[0], bool) else 0
    kept = [
        v if ((i[-1] - i[-2] >= diagonal) if upper else (i[-1] - i[-2] <= diagonal)) else zero
        for i, v in zip(_indices(t.shape), t.data, strict=True)
    ]
    return Tensor(t.shape, kept)


def _like(made: Tensor, like: Tensor) -> Tensor:
    """``made`` in the kind of element ``like`` holds (bool, int or float)."""
    sample = like.data[0] if like.data else 0.0
    kind = "bool" if isinstance(sample, bool) else "int64" if isinstance(sample, int) else "f"
    return _cast(made, kind)


def _index(t: Tensor, indices: list[Any]) -> Tensor:
    """``t[i0, i1, ...]`` with index tensors for the leading dims (``mask[batch, kv]``, as
    transformers builds a padding mask): the indices broadcast together, the other dims
    follow."""
    taken = [i for i in indices if i is not None]
    if not taken or any(i is None for i in indices[: len(taken)]) or len(taken) > len(t.shape):
        raise _Unknown("index")
    shape = _broadcast_shape(*(i.shape for i in taken))
    columns = [_expand(i, shape).data for i in taken]
    rest = t.shape[len(taken) :]
    data = []
    for at in zip(*columns, strict=True):
        lead = tuple(v + s if v < 0 else v for v, s in zip(at, t.shape, strict=False))
        data += [t.at(lead + tail) for tail in _indices(rest)]
    return Tensor(shape + rest, data)


def _unsqueeze(t: Tensor, dim: int) -> Tensor:
    dim = _dim(dim, len(t.shape) + 1)
    return Tensor((*t.shape[:dim], 1, *t.shape[dim:]), t.data)


def _squeeze(t: Tensor, dims: Any = None) -> Tensor:
    rank = len(t.shape)
    if dims is None:
        dims = [d for d, s in enumerate(t.shape) if s == 1]
    dims = {_dim(d, rank) for d in ([dims] if isinstance(dims, int) else dims)}
    return Tensor(tuple(s for d, s in enumerate(t.shape) if d not in dims or s != 1), t.data)


def _arange(*args: Any) -> Tensor:
    if not all(isinstance(a, int) for a in args):
        raise _Unknown("arange")
    values = list(range(*args))
    return Tensor((len(values),), values)


def _full(shape: list[int], value: Any) -> Tensor:
    if not all(isinstance(s, int) for s in shape) or math.prod(shape) > MAX_ELEMENTS:
        raise _Unknown("symbolic or large full")
    return Tensor(tuple(shape), [value] * math.prod(shape))


def _cast(t: Tensor, dtype: str | None) -> Tensor:
    if dtype is None:
        return t
    if dtype == "bool":
        return Tensor(t.shape, [bool(v) for v in t.data])
    if "int" in dtype:
        return Tensor(t.shape, [int(v) for v in t.data])
    return Tensor(t.shape, [float(v) for v in t.data])


def _not(t: Tensor) -> Tensor:
    return Tensor(t.shape, [(not v) if isinstance(v, bool) else ~v for v in t.data])


def _dtype_of(node: Node) -> str | None:
    dtype = node.kwargs.get("dtype")
    return getattr(dtype, "name", None)


COMPARE = {
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}  # fmt: skip
LOGICAL = {
    "__and__": operator.and_, "bitwise_and": operator.and_, "logical_and": operator.and_,
    "__or__": operator.or_, "bitwise_or": operator.or_, "logical_or": operator.or_,
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
}  # fmt: skip
SAME = {"clone", "alias", "contiguous", "lift_fresh_copy", "detach"}
OPS = (
    set(COMPARE) | set(LOGICAL) | SAME
    | {"arange", "view", "reshape", "_unsafe_view", "expand", "unsqueeze", "squeeze",
       "permute", "transpose", "t", "slice", "select", "triu", "tril", "full", "ones",
       "zeros", "eye", "new_ones", "new_zeros", "new_full", "index",
       "full_like", "ones_like", "zeros_like", "_to_copy", "to", "bitwise_not",
       "logical_not", "rsub", "where"}
)  # fmt: skip


def _apply(node: Node, args: list[Any]) -> Tensor:
    op, kw = node.op_base, node.kwargs
    if op in COMPARE:
        return _elementwise(COMPARE[op], args[0], args[1])
    if op in LOGICAL:
        if op in ("add", "sub") and kw.get("alpha", 1) != 1:
            raise _Unknown("alpha")
        return _elementwise(LOGICAL[op], args[0], args[1])
    if op == "rsub":
        return _elementwise(operator.sub, args[1], args[0])
    if op in SAME:
        return args[0]
    if op in ("bitwise_not", "logical_not"):
        return _not(args[0]) if op == "bitwise_not" else _cast(_not(_cast(args[0], "bool")), None)
    if op == "where":
        return _elementwise(lambda c, a, b: a if c else b, *args[:3])
    if op == "arange":
        return _arange(*[a for a in args if a is not None])
    if op in ("view", "reshape", "_unsafe_view"):
        return _view(args[0], args[1])
    if op == "expand":
        sizes, own = args[1], args[0].shape
        own = (1,) * (len(sizes) - len(own)) + own
        return _expand(
            args[0], tuple(o if s == -1 else s for s, o in zip(sizes, own, strict=False))
        )
    if op == "unsqueeze":
        return _unsqueeze(args[0], args[1])
    if op == "squeeze":
        return _squeeze(args[0], args[1] if len(args) > 1 else None)
    if op == "permute":
        return _permute(args[0], args[1])
    if op in ("transpose", "t"):
        rank = len(args[0].shape)
        a, b = (args[1], args[2]) if op == "transpose" else (0, 1)
        dims = list(range(rank))
        dims[_dim(a, rank)], dims[_dim(b, rank)] = dims[_dim(b, rank)], dims[_dim(a, rank)]
        return _permute(args[0], dims)
    if op == "slice":
        return _slice(*args)
    if op == "select":
        return _select(*args)
    if op in ("triu", "tril"):
        return _triangle(args[0], *args[1:2], upper=op == "triu")
    if op in ("full", "ones", "zeros"):
        value = {"ones": 1, "zeros": 0}.get(op, args[1] if len(args) > 1 else None)
        return _cast(_full(args[0], value), _dtype_of(node) or "float32")
    if op in ("new_ones", "new_zeros", "new_full"):
        value = {"new_ones": 1, "new_zeros": 0}.get(op, args[2] if len(args) > 2 else None)
        made = _full(args[1], value)
        dtype = _dtype_of(node)
        return _cast(made, dtype) if dtype else _like(made, args[0])
    if op == "index":
        return _index(args[0], args[1])
    if op == "eye":
        rows = args[0]
        cols = args[1] if len(args) > 1 and isinstance(args[1], int) else rows
        eye = Tensor((rows, cols), [int(i == j) for i in range(rows) for j in range(cols)])
        return _cast(eye, _dtype_of(node) or "float32")
    if op in ("full_like", "ones_like", "zeros_like"):
        value = {"ones_like": 1, "zeros_like": 0}.get(op, args[1] if len(args) > 1 else None)
        return _full(list(args[0].shape), value)
    if op in ("_to_copy", "to"):
        return _cast(args[0], _dtype_of(node))
    raise _Unknown(op)


class _Evaluator:
    def __init__(self, graph: Graph, producers: dict[str, Node], inputs: dict[str, Tensor]):
        self.graph, self.producers, self.inputs = graph, producers, inputs
        self.memo: dict[str, Tensor] = {}

    def value(self, name: str) -> Tensor:
        if name in self.inputs:
            return self.inputs[name]
        if name in self.memo:
            return self.memo[name]
        node = self.producers.get(name)
        if node is None or node.op_base not in OPS or len(node.outputs) != 1:
            raise _Unknown(name)
        args = [self._arg(a) for a in node.args]
        result = _apply(node, args)
        self.memo[name] = result
        return result

    def _arg(self, arg: Any) -> Any:
        if isinstance(arg, TensorRef):
            return self.value(arg.name)
        if isinstance(arg, (list, tuple)):
            return [self._arg(a) for a in arg]
        if arg is None or isinstance(arg, (bool, int, float)):
            return arg
        raise _Unknown(repr(arg))


def _subgraph(condition: str, producers: dict[str, Node], inputs: set[str]) -> set[str] | None:
    """The user inputs ``condition`` is computed from, or None past :data:`MAX_NODES`."""
    found, seen, frontier = set(), {condition}, [condition]
    while frontier:
        if len(seen) > MAX_NODES:
            return None
        value = frontier.pop()
        if value in inputs:
            found.add(value)
            continue
        node = producers.get(value)
        for name in node.tensor_inputs() if node is not None else ():
            if name not in seen:
                seen.add(name)
                frontier.append(name)
    return found


def _probes(shape: tuple[int, ...], dtype: str, keys: int, pads: list[int]) -> Iterator[Tensor]:
    """Padding patterns: along the last axis a prefix kept and a suffix kept, the same for
    every row; the first or the last row (axis -2) all padding and the rest kept; seeded
    random patterns, element by element (a mask that carries its own query axis). Kept and
    padding are 1 and 0, and for integers also each number ``pads`` holds beside the next
    one (a pad id compared in the mask: ``ids != 50256``); integers also take whole numbers
    from 0 to past ``keys`` everywhere (lengths)."""
    last = shape[-1] if shape else 1
    size = math.prod(shape)
    rows = size // last
    kind = bool if dtype == "bool" else int
    pairs = [(1, 0)] if dtype == "bool" else [(1, 0), *((p + 1, p) for p in pads)]
    pairs += [(pad, kept) for kept, pad in pairs[1:]]
    random = Random(0)
    for kept_value, pad_value in pairs:
        kept_value, pad_value = kind(kept_value), kind(pad_value)
        for kept in sorted({0, 1, 2, last // 2, last - 1, last}):
            if not 0 <= kept <= last:
                continue
            prefix = [kept_value] * kept + [pad_value] * (last - kept)
            yield Tensor(shape, prefix * rows)
            yield Tensor(shape, prefix[::-1] * rows)
        if len(shape) >= 2 and shape[-2] > 1:
            empty, full = [pad_value] * last, [kept_value] * last
            first = [empty if (r % shape[-2]) == 0 else full for r in range(rows)]
            final = [empty if (r % shape[-2]) == shape[-2] - 1 else full for r in range(rows)]
            yield Tensor(shape, [v for row in first for v in row])
            yield Tensor(shape, [v for row in final for v in row])
        for chance in (0.2, 0.5, 0.8):
            for _ in range(2):
                values = [
                    kept_value if random.random() < chance else pad_value for _ in range(size)
                ]
                yield Tensor(shape, values)
    if dtype != "bool":
        for number in sorted({0, 1, 2, keys // 2, keys - 1, keys, keys + 1}):
            yield Tensor(shape, [number] * size)


def _pad_numbers(condition: str, producers: dict[str, Node]) -> list[int]:
    """The whole numbers the mask compares its inputs with (``ids != 50256``), at most
    four, other than 0 and 1 (which every probe has)."""
    found: list[int] = []
    seen, frontier = {condition}, [condition]
    while frontier:
        node = producers.get(frontier.pop())
        if node is None:
            continue
        if node.op_base in COMPARE:
            found += [a for a in node.args[1:2] if type(a) is int and a not in (0, 1)]
        for name in node.tensor_inputs():
            if name not in seen:
                seen.add(name)
                frontier.append(name)
    return sorted(set(found))[:4]


def masked_rows(graph: Graph, condition: str, masked_when: bool) -> str | None:
    """:data:`PARTIAL`, :data:`WHOLE` or :data:`NEVER` for the mask ``condition`` (masked
    where it equals ``masked_when``) over the last axis, the keys; None where the evaluator
    cannot tell (or would take longer than :data:`MAX_WORK` element steps)."""
    info = graph.tensors.get(condition)
    inputs = {s.name for s in graph.inputs if s.kind == "user_input"}
    producers = graph.producers()
    reads = _subgraph(condition, producers, inputs)
    if info is None or not reads or len(reads) > 2:
        return None  # three inputs or more: too many combinations to probe
    if not all(isinstance(s, int) for s in info.shape) or math.prod(info.shape) > MAX_ELEMENTS:
        return None
    specs = {name: graph.tensors.get(name) for name in reads}
    if any(s is None or s.dtype not in ("bool", "int64", "int32") for s in specs.values()):
        return None  # a float input can hold anything: no probe speaks for it
    if any(not all(isinstance(d, int) for d in s.shape) for s in specs.values()):
        return None
    if any(not 0 < math.prod(s.shape) <= MAX_ELEMENTS for s in specs.values()):
        return None  # an empty input masks nothing; a long one costs too much to probe
    keys = info.shape[-1] if info.shape else 1
    pads = _pad_numbers(condition, producers)
    names = sorted(specs)
    families = [list(_probes(specs[n].shape, specs[n].dtype, keys, pads)) for n in names]
    steps = math.prod(len(f) for f in families) * math.prod(info.shape) * MAX_NODES
    if steps > MAX_WORK:
        return None
    verdict = NEVER
    try:
        for combination in itertools.product(*families):
            probe = dict(zip(names, combination, strict=True))
            rows = _fully_masked(_Evaluator(graph, producers, probe).value(condition), masked_when)
            if rows == PARTIAL:
                return PARTIAL
            if rows == WHOLE:
                verdict = WHOLE
    except (_Unknown, IndexError, TypeError, ValueError, ZeroDivisionError):
        return None
    return verdict


def _fully_masked(mask: Tensor, masked_when: bool) -> str:
    """Over each slice of rows (every axis but the last two): whether some rows are fully
    masked but not all (:data:`PARTIAL`), all of them (:data:`WHOLE`), or none."""
    shape = mask.shape or (1,)
    keys = shape[-1]
    full = [
        all(bool(v) == masked_when for v in mask.data[start : start + keys])
        for start in range(0, len(mask.data), keys)
    ]
    rows = shape[-2] if len(shape) >= 2 else 1
    verdict = NEVER
    for start in range(0, len(full), rows):
        block = full[start : start + rows]
        if any(block) and not all(block):
            return PARTIAL
        if all(block):
            verdict = WHOLE
    return verdict
