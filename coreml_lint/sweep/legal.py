"""Find calls of an op that torch itself accepts: the sweep only lowers programs that run
in eager, so every outcome it records is Core ML's, not a malformed call's.

The search is generic: every tensor operand starts as a float32 cube of side ``SIDE`` (so
matrix products, convolutions and pools have legal shapes without knowing the op), required
arguments take the candidates of their schema type in order, and when nothing is legal each
operand in turn tries the forms operands take in ATen (an int64 index, a bool mask, a vector,
a scalar tensor). Eager calls are cheap; the number tried per op is capped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from coreml_lint.sweep.schema import (
    EQUATIONS,
    FLOAT_CANDIDATES,
    SCALAR_CANDIDATES,
    Arg,
    OpInfo,
    int_candidates,
    ints_candidates,
)
from coreml_lint.sweep.values import decode, flat_outputs, make_tensor

SIDE = 4
BASE_RANKS = (2, 4, 3, 1, 0, 5)  # rank 4 before 3: a batched image, not an unbatched one
MAX_ARG_COMBOS = 60
MAX_LAYOUTS = 24


@dataclass
class Call:
    """A call of an op: tensor operand specs, and the arguments that reference them."""

    tensors: list[dict[str, Any]]
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> Call:
        """A copy whose tensor specs, shapes included, can be changed in place."""
        return Call(
            [_deep(t) for t in self.tensors], _deep(self.args), dict(_deep(self.kwargs) or {})
        )


def _deep(value: Any) -> Any:
    if isinstance(value, list):
        return [_deep(v) for v in value]
    if isinstance(value, dict):
        return {k: _deep(v) for k, v in value.items()}
    return value


def run_eager(op: Any, call: Call, seed: int = 0) -> Any:
    tensors = [make_tensor(t, seed + i) for i, t in enumerate(call.tensors)]
    args = [decode(a, tensors) for a in call.args]
    kwargs = {k: decode(v, tensors) for k, v in call.kwargs.items()}
    return op(*args, **kwargs)


# The most elements a call's outputs may hold: ``diag_embed`` with an offset of 3001 makes
# 144 million, whose conversion and judging take minutes and measure nothing a small call
# does not (``eye(3001)``, 9 million, stays).
OUTPUT_LIMIT = 2**24


def is_legal(info: OpInfo, call: Call) -> bool:
    """The call runs in eager, returns tensors of at most ``OUTPUT_LIMIT`` elements, and
    (unless it makes uninitialised memory) gives the same result twice."""
    import torch

    try:
        with torch.no_grad():
            first = run_eager(info.op, call)
            flat = flat_outputs(first)
            if not flat or not all(isinstance(t, torch.Tensor) for t in flat):
                return False
            if sum(t.numel() for t in flat) > OUTPUT_LIMIT:
                return False
            if "empty" in info.name:
                return True
            again = flat_outputs(run_eager(info.op, call))
    except Exception:
        return False
    try:
        return all(_same(a, b) for a, b in zip(flat, again, strict=True))
    except Exception:  # a dtype torch cannot even compare (complex half)
        return False


def overflows(info: OpInfo, call: Call) -> bool:
    """Whether the call's integer result wraps around in eager: the same call with its
    integer operands widened to float64 gives other values."""
    import torch

    wide = call.copy()
    ints = [
        i
        for i, t in enumerate(wide.tensors)
        if t["dtype"] not in ("bool", "float32", "float16", "bfloat16", "float64")
        and t.get("values") == "typical"
    ]
    if not ints:
        return False
    try:
        with torch.no_grad():
            narrow = flat_outputs(run_eager(info.op, call))
            tensors = [make_tensor(t, i) for i, t in enumerate(call.tensors)]
            for i in ints:
                tensors[i] = tensors[i].double()
            args = [decode(a, tensors) for a in call.args]
            kwargs = {k: decode(v, tensors) for k, v in call.kwargs.items()}
            widened = flat_outputs(info.op(*args, **kwargs))
    except Exception:
        return False
    for a, b in zip(narrow, widened, strict=False):
        if a.is_floating_point() or a.dtype == torch.bool or a.shape != b.shape:
            continue
        if not torch.equal(a.double(), b.double().trunc()):
            return True
    return False


def _same(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex() or not (a.is_floating_point()):
        return bool(torch.equal(a, b))
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


# ---------------------------------------------------------------- layouts of tensor operands
def tensor_spec(shape: tuple[int, ...], dtype: str = "float32", values: str = "typical") -> dict:
    return {"shape": list(shape), "dtype": dtype, "values": values, "origin": "in"}


def _alternatives(shape: tuple[int, ...]) -> list[dict[str, Any]]:
    """The other forms a tensor operand takes in ATen, most common first."""
    vector, scalar = (SIDE,), ()
    return [
        tensor_spec(shape, "int64", "index"),
        tensor_spec(shape, "bool"),
        tensor_spec(vector, "int64", "index"),
        tensor_spec(vector),
        tensor_spec(scalar, "int64", "index"),
        tensor_spec(scalar),
        tensor_spec(shape[:-1] if shape else scalar),
        tensor_spec((SIDE, SIDE)),
    ]


def _slots(info: OpInfo) -> list[Arg]:
    return [a for a in info.args if a.is_tensor]


def default_layout(info: OpInfo, shape: tuple[int, ...]) -> list[Any]:
    """Per tensor slot: a spec, None (an optional tensor left out) or a list of them."""
    layout: list[Any] = []
    for arg in _slots(info):
        if arg.kind == "tensor":
            layout.append(tensor_spec(shape))
        elif arg.kind == "tensor?":
            layout.append(None)
        elif arg.kind == "tensors":
            layout.append([tensor_spec(shape), tensor_spec(shape)])
        else:  # tensors?: an index list
            layout.append([tensor_spec((SIDE,), "int64", "index")])
    return layout


def layouts(info: OpInfo, shape: tuple[int, ...]) -> Iterator[list[Any]]:
    """The default layout, then each required slot changed alone, then two slots changed."""
    base = default_layout(info, shape)
    yield base
    optional = [i for i, a in enumerate(_slots(info)) if a.kind == "tensor?"]
    if optional:  # clamp.Tensor needs a min or a max tensor
        yield [tensor_spec(shape) if j in optional else s for j, s in enumerate(base)]
    required = [i for i, a in enumerate(_slots(info)) if a.kind == "tensor"]
    lists = [i for i, a in enumerate(_slots(info)) if a.kind == "tensors?"]
    for i in lists:
        for alt in ([None, tensor_spec((SIDE,), "int64", "index")], [tensor_spec(shape, "bool")]):
            yield [alt if j == i else s for j, s in enumerate(base)]
    for i in required:
        for alt in _alternatives(shape):
            yield [alt if j == i else s for j, s in enumerate(base)]
    for i, k in itertools.combinations(required, 2):
        for a, b in itertools.product(_alternatives(shape)[:4], repeat=2):
            yield [a if j == i else b if j == k else s for j, s in enumerate(base)]


# ---------------------------------------------------------------- required arguments
def required_args(info: OpInfo, optional_too: bool = False) -> list[Arg]:
    """Arguments a call must give; with ``optional_too``, also the optional ones left
    ``None`` by default (``clamp`` needs a ``min`` or a ``max``)."""
    return [
        a
        for a in info.args
        if not a.is_tensor
        and a.kind != "fixed"
        and (not a.has_default or (optional_too and a.optional and a.default is None))
    ]


def candidates(arg: Arg, shape: tuple[int, ...], no_tensors: bool) -> list[Any]:
    """Values to try for a required argument, most likely legal first."""
    found: list[Any]
    if arg.kind == "int":
        found = int_candidates(arg, len(shape), SIDE)
    elif arg.kind == "ints":
        found = ints_candidates(arg, shape)
        if no_tensors:
            found = [list(shape), *[v for v in found if v != list(shape)]]
    elif arg.kind == "float":
        found = list(FLOAT_CANDIDATES)
    elif arg.kind == "floats":
        found = [[2.0] * max(len(shape) - 2, 1), [2.0]]
    elif arg.kind == "scalar":
        found = list(SCALAR_CANDIDATES)
    elif arg.kind == "bool":
        found = [False, True]
    elif arg.kind == "dtype":
        found = [{"dtype": "float32"}]
    elif arg.kind == "str" and arg.name == "equation":
        found = [e for n in EQUATIONS.values() for e in n]
    elif arg.kind == "str":
        found = []
    else:
        found = []
    return [None, *found] if arg.optional else found


def ordered_product(lists: list[list[Any]], cap: int) -> Iterator[tuple[Any, ...]]:
    """Combinations in order of increasing index sum (first choices first), at most ``cap``."""
    if any(not values for values in lists):
        return
    total = sum(len(v) - 1 for v in lists)
    made = 0
    for level in range(total + 1):
        for index in _compositions(level, [len(v) for v in lists]):
            yield tuple(values[i] for values, i in zip(lists, index, strict=True))
            made += 1
            if made >= cap:
                return


def _compositions(total: int, sizes: list[int]) -> Iterator[tuple[int, ...]]:
    if not sizes:
        if total == 0:
            yield ()
        return
    for first in range(min(total, sizes[0] - 1) + 1):
        for rest in _compositions(total - first, sizes[1:]):
            yield (first, *rest)


def assemble(info: OpInfo, layout: list[Any], given: dict[str, Any]) -> Call:
    """The call with tensor slots filled from ``layout`` and other arguments from ``given``
    (absent: left at the default; positional arguments before a given one get theirs)."""
    tensors: list[dict[str, Any]] = []

    def ref(spec: Any) -> Any:
        if spec is None:
            return None
        if isinstance(spec, list):
            return [ref(s) for s in spec]
        tensors.append(dict(spec))
        return {"t": len(tensors) - 1}

    slot = iter(layout)
    values: dict[str, Any] = {}
    for arg in info.args:
        if arg.is_tensor:
            values[arg.name] = ref(next(slot))
        elif arg.name in given:
            values[arg.name] = given[arg.name]
    positional = [a for a in info.args if not a.kwarg_only]
    last = max((i for i, a in enumerate(positional) if a.name in values), default=-1)
    args = [
        values[a.name] if a.name in values else _encoded_default(a) for a in positional[: last + 1]
    ]
    kwargs = {a.name: values[a.name] for a in info.args if a.kwarg_only and a.name in values}
    return Call(tensors, args, kwargs)


def _encoded_default(arg: Arg) -> Any:
    if arg.kind == "dtype" and arg.default is not None:
        return None
    return arg.default


def find_call(
    info: OpInfo,
    shape: tuple[int, ...],
    layout: list[Any],
    fixed: dict[str, Any],
    cap: int,
    optional_too: bool = False,
) -> Call | None:
    """The first legal call with this layout, trying required arguments not in ``fixed``."""
    free = [a for a in required_args(info, optional_too) if a.name not in fixed]
    no_tensors = not _slots(info)
    lists = [candidates(a, shape, no_tensors) for a in free]
    for i, arg in enumerate(free):
        if arg.kind == "str" and not lists[i]:
            lists[i] = _probe_strings(info, layout, fixed, free, lists, arg)
    for combo in ordered_product(lists, cap):
        given = dict(fixed)
        given.update({a.name: v for a, v in zip(free, combo, strict=True)})
        call = assemble(info, layout, given)
        if is_legal(info, call):
            return call
    return None


def _probe_strings(info, layout, fixed, free, lists, arg) -> list[str]:
    """A required string's values, from the message of a call with a bogus one."""
    from coreml_lint.sweep.schema import string_options

    given = dict(fixed)
    given.update({a.name: (v[0] if v else None) for a, v in zip(free, lists, strict=True)})
    given.pop(arg.name, None)
    call = assemble(info, layout, given)
    tensors = [make_tensor(t, i) for i, t in enumerate(call.tensors)]
    args = [decode(a, tensors) for a in call.args]
    kwargs = {k: decode(v, tensors) for k, v in call.kwargs.items()}
    positional = [a for a in info.args if not a.kwarg_only]
    index = next((i for i, a in enumerate(positional) if a.name == arg.name), len(args))
    return string_options(info.op, args[:index], kwargs, arg)


def find_base(info: OpInfo) -> tuple[Call, tuple[int, ...], dict[str, Any]] | None:
    """A legal float32 call of the op: (call, its cube shape, the required values). Optional
    arguments stay at their default unless no call is legal without them."""
    for optional_too in (False, True):
        for rank in BASE_RANKS:
            shape = (SIDE,) * rank
            for n, layout in enumerate(itertools.islice(layouts(info, shape), MAX_LAYOUTS)):
                cap = MAX_ARG_COMBOS if n == 0 else 8
                call = find_call(info, shape, layout, {}, cap, optional_too)
                if call is not None:
                    return call, shape, _given(info, call)
    for rank in BASE_RANKS:  # tried last, so that no op found before finds another call
        shape = (SIDE,) * rank
        for layout in coordinate_layouts(info, shape):
            call = find_call(info, shape, layout, {}, 8)
            if call is not None:
                return call, shape, _given(info, call)
    return None


COORDINATES = (2, 3)


def coordinate_layouts(info: OpInfo, shape: tuple[int, ...]) -> Iterator[list[Any]]:
    """Layouts whose last dim holds coordinates (2 or 3 of them): each required tensor
    alone (``grid_sample``'s ``[N, H, W, 2]`` grid beside an image), then every one at once
    (``cross`` of two 3-vectors)."""
    if not shape:
        return
    base = default_layout(info, shape)
    required = [i for i, a in enumerate(_slots(info)) if a.kind == "tensor"]
    for k in COORDINATES:
        coordinates = tensor_spec((*shape[:-1], k))
        for i in required if len(required) > 1 else ():
            yield [coordinates if j == i else s for j, s in enumerate(base)]
        yield [coordinates if j in required else s for j, s in enumerate(base)]


def _given(info: OpInfo, call: Call) -> dict[str, Any]:
    """The non-tensor arguments a call passes, by name."""
    positional = [a for a in info.args if not a.kwarg_only]
    found = {a.name: v for a, v in zip(positional, call.args, strict=False) if not a.is_tensor}
    found.update({k: v for k, v in call.kwargs.items() if not _is_tensor_arg(info, k)})
    return found


def _is_tensor_arg(info: OpInfo, name: str) -> bool:
    return any(a.name == name and a.is_tensor for a in info.args)


def layout_of(info: OpInfo, call: Call) -> list[Any]:
    """The tensor-slot layout a call was assembled from."""
    positional = [a for a in info.args if not a.kwarg_only]
    by_name = {a.name: v for a, v in zip(positional, call.args, strict=False)}
    by_name.update(call.kwargs)

    def spec(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, list):
            return [spec(v) for v in value]
        return dict(call.tensors[value["t"]])

    return [spec(by_name.get(a.name)) for a in _slots(info)]


def with_layout(info: OpInfo, call: Call, layout: list[Any]) -> Call:
    return assemble(info, layout, _given(info, call))


def with_given(info: OpInfo, call: Call, given: dict[str, Any]) -> Call:
    return assemble(info, layout_of(info, call), given)
