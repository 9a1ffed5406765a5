"""The sweep's records, typed: a generated case, the tensors it is made of, and its result.

They travel as JSON (the live folder's lines, the repository's shards, Dask tasks), so
they are ``TypedDict``s: a record read back from a shard is the same dict a generator
wrote, and a type checker still knows its fields. A new sweep dimension is one field here
(and in ``key.MeasuredKey`` when the linter must key it) and one generator axis.
"""

from __future__ import annotations

from typing import Any, TypedDict

from coreml_lint.measured.key import MeasuredKey


class TensorSpec(TypedDict, total=False):
    """One tensor operand of a case: shape, dtype, and how its values are made."""

    shape: list[int]
    dtype: str
    values: str  # "typical", "small", "index", "mask"
    origin: str  # "in" (an input), "op" (made in the program), "const" (a buffer)
    range: str  # an integer dtype the op casts the values to
    high: int  # an index operand's bound


class Case(TypedDict, total=False):
    """One single-op call to measure at one deployment target (``id``: a hash of the rest)."""

    id: str
    op: str  # the overload's name without ``aten.`` (``amax.default``)
    args: list[Any]  # encoded: tensors as references to ``tensors``
    kwargs: dict[str, Any]
    tensors: list[TensorSpec]
    context: str  # "", "inside", or the consumer op's name
    axis: str  # the generator axis that made it ("base", "dtype", "pairs", ...)
    label: str  # what the axis changed, in words
    target: int  # the iOS version
    returns: list[int]  # the outputs a model reads (``check --measure``)


class Result(TypedDict, total=False):
    """What measuring a case found, and the key of each node its op became."""

    id: str
    op: str
    target: int
    outcome: str  # see ``outcomes.py``, plus "export" and "error" (not the op's)
    message: str
    keys: list[MeasuredKey]


def result_of(
    case: Case, outcome: str, message: str, keys: list[MeasuredKey] | None = None
) -> Result:
    """The result of measuring ``case`` (every target's sweep writes this one form)."""
    return Result(
        id=case["id"],
        op=case["op"],
        target=case["target"],
        outcome=outcome,
        message=message,
        keys=keys or [],
    )
