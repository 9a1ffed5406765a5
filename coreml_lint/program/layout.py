"""A tensor's layout as torch orders its dims in memory (``Tensor.dim_order()``), read from
the strides export records, without torch; and which layouts ExecuTorch's edge dialect
can name (``exir/dim_order_utils.py``: contiguous and channels-last only).

Export records symbolic sizes and strides as sympy text (``Symbol('u0', integer=True)``
for a data-dependent size, ``Max(Integer(1), Symbol('u0', ...))`` for a stride torch
clamps at 1): :func:`concrete` reads those as one large size per symbol, which orders
dims as any size above one does.
"""

from __future__ import annotations

import re
from typing import Any

_SYMBOL = re.compile(r"^Symbol\('(\w+)'[^)]*\)$")
_AT_LEAST_ONE = re.compile(r"^Max\(Integer\(1\), (Symbol\('\w+'[^)]*\))\)$")


def concrete(values: tuple[Any, ...], symbols: dict[str, int]) -> tuple[int, ...] | None:
    """Sizes or strides as ints: a symbol (or its ``Max(1, s)``) as a large size of its own
    (``symbols`` keeps one per name across calls); None for another expression."""
    found = []
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            found.append(value)
            continue
        text = str(value)
        if (at_least := _AT_LEAST_ONE.match(text)) is not None:
            text = at_least.group(1)
        symbol = _SYMBOL.match(text)
        if symbol is None:
            return None
        found.append(symbols.setdefault(symbol.group(1), 1_000_003 + 2 * len(symbols)))
    return tuple(found)


def named_orders(rank: int) -> list[list[int]]:
    """The dim orders ExecuTorch's edge dialect maps to a memory format: contiguous, and
    channels-last at rank 4 (``[0, 2, 3, 1]``) and 5 (``[0, 2, 3, 4, 1]``)."""
    identity = list(range(rank))
    return [identity, [0, *range(2, rank), 1]] if rank in (4, 5) else [identity]


def dim_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """``Tensor.dim_order()`` of a dense tensor of ``shape`` and ``strides``, computed as
    torch computes it (``compute_elementwise_output_logical_to_physical_perm``) without
    torch: contiguous or channels-last alone decide; otherwise an insertion sort by stride,
    a longer dim outer where two strides are equal."""
    rank = len(shape)
    identity = list(range(rank))
    if rank <= 1:
        return identity
    last = [0, *range(2, rank), 1]
    contiguous = dense_in(shape, strides, identity)
    channels_last = rank == 4 and dense_in(shape, strides, last)  # torch.channels_last
    if contiguous != channels_last:
        return identity if contiguous else last

    def at_least(a: int, b: int) -> bool:
        return True if b == 0 else False if a == 0 else a >= b or a % b == 0

    def should_swap(a: int, b: int) -> int:
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] == strides[b]:
            return 0 if at_least(shape[b], shape[a]) else 1
        if at_least(strides[b], strides[a]):
            return -1
        return 1 if at_least(strides[a], strides[b]) else 0

    perm = list(reversed(identity))
    for i in range(1, rank):
        moving = i
        for before in reversed(range(i)):
            order = should_swap(perm[before], perm[moving])
            if order > 0:
                perm[before], perm[moving] = perm[moving], perm[before]
                moving = before
            elif order < 0:
                break
    return list(reversed(perm))


def dense_in(shape: tuple[int, ...], strides: tuple[int, ...], order: list[int]) -> bool:
    """Whether the strides are those of ``order`` (outermost first), as torch's
    ``is_contiguous(memory_format=...)`` checks: a dim of size 1 takes any stride."""
    expected = 1
    for dim in reversed(order):
        if shape[dim] != 1:
            if strides[dim] != expected:
                return False
            expected *= shape[dim]
    return True
