"""Inputs at the edges of a dynamic program's allowed sizes, for ``verify``.

A program exported with ``torch.export.Dim`` is one Core ML model for every size its
range constraints allow (coremltools makes each dynamic dim a ``RangeDim``), but its
example inputs show one size only. A MIL op that is right at the example size can be
wrong, or fail to run, at another (a resize whose scale is read from the example, a
shape computed from a symbolic size). So ``verify`` runs such a program at the example
size and again with every dynamic dim at the smallest and at the largest value the
constraints allow.
"""

from __future__ import annotations

from typing import Any

import torch

from coreml_lint.verifier.inputs import _tensor, index_bound, user_input_nodes

# A bound beyond this (or none: ``Dim("b")`` without max) is not run: the largest inputs
# would not fit a test run's memory and time.
MAX_ELEMENTS = 1 << 22


def symbol_ranges(ep: Any) -> dict[Any, tuple[int, int | None]]:
    """Each plain symbol's (lower, upper) bound; None for an unbounded upper."""
    import sympy

    found = {}
    for symbol, bounds in ep.range_constraints.items():
        if not isinstance(symbol, sympy.Symbol):
            continue  # a derived dim's expression: its symbol has its own entry
        found[symbol] = (int(bounds.lower), _finite(bounds.upper))
    return found


def _finite(bound: Any) -> int | None:
    try:
        return int(bound)
    except (OverflowError, TypeError, ValueError, AttributeError):
        return None  # torch's int_oo


def is_dynamic(ep: Any) -> bool:
    """Whether a user input has a symbolic size."""
    for node in user_input_nodes(ep):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and not all(isinstance(d, int) for d in value.shape):
            return True
    return False


def edge_inputs(ep: Any, seed: int = 0) -> tuple[dict[str, list[Any]], list[str]]:
    """``{"smallest": inputs, "largest": inputs}`` (the user inputs, flat, in order) and a
    note per size that cannot be run (unbounded, or too large)."""
    ranges = symbol_ranges(ep)
    sizes: dict[str, list[Any]] = {}
    notes: list[str] = []
    for label, pick in (("smallest", 0), ("largest", 1)):
        values = {symbol: bounds[pick] for symbol, bounds in ranges.items()}
        unbounded = sorted(str(s) for s, v in values.items() if v is None)
        if unbounded:
            notes.append(f"{label} sizes not run: {', '.join(unbounded)} has no upper bound")
            continue
        made = _inputs_at(ep, values, seed)
        total = sum(t.numel() for t in made if isinstance(t, torch.Tensor))
        if total > MAX_ELEMENTS:
            notes.append(f"{label} sizes not run: {total} input elements (over {MAX_ELEMENTS})")
            continue
        sizes[label] = made
    return sizes, notes


def _inputs_at(ep: Any, values: dict[Any, int], seed: int) -> list[Any]:
    generator = torch.Generator().manual_seed(seed)
    made = []
    for node in user_input_nodes(ep):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            made.append(value)
            continue
        shape = [_size(d, values) for d in value.shape]
        made.append(_tensor(value.dtype, shape, index_bound(node), generator))
    return made


def _size(dim: Any, values: dict[Any, int]) -> int:
    if isinstance(dim, int):
        return dim
    return int(dim.node.expr.subs(values))


def describe(inputs: list[Any]) -> str:
    return ", ".join(
        "x".join(map(str, t.shape)) if isinstance(t, torch.Tensor) else repr(t) for t in inputs
    )
