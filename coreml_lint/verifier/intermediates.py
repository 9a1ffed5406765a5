"""Integer intermediates: the one kind of intermediate that is a verdict of its own.

A partition's outputs are the verdict (:mod:`coreml_lint.verifier.partition`); float
intermediates only localise, because a MIL pass may legitimately change them (a moved
transpose, a folded scale, fp16 turning a ``finfo.min`` mask into ``-inf``). An integer
intermediate is different: it is an index, a gather position, a count or a value cast back
to int, and integers are exact on both sides. One that differs from eager means Core ML
read other rows, wrapped an int64 past int32, or rounded a float before it became an index,
even when the float output happens to hide it on these inputs. Only vars whose match to an
eager node is certain (:func:`coreml_lint.verifier.localize.judge_certain`) are held to it,
and a rounding flip at a float-to-int boundary is excused as it is for outputs. A
``quantize`` op's integers are not: coremltools moves scales between the quantize and
dequantize ops around an add (``dq(a, s1) + dq(b, s2)`` becomes ``dq(a, s1/s2) + dq(b, 1)``
quantized with ``s_out/s2``), so its int8 values are rescaled by design.
"""

from __future__ import annotations

from typing import Any

from coreml_lint.verifier.localize import judge_certain, node_for, rounding_flip
from coreml_lint.verifier.mil.dtypes import mil_dtype

INTEGER_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"}
RESCALED = {"quantize"}  # integers whose scale a MIL pass may change (see above)


def first_integer_departure(
    plan: Any,
    values: dict[str, Any],
    eager: dict[str, Any],
    mode: str,
    skip: frozenset[str] = frozenset(),
) -> tuple[Any, str, str, Any] | None:
    """(MIL op, var name, eager node name, numbers) of the first integer var, in program
    order, that certainly holds an eager integer node's value and differs from it."""
    import torch

    for step in plan.steps:
        if step.op.op_type in RESCALED:
            continue
        for var in step.op.outputs:
            name = var.name
            if name not in values or mil_dtype(var) not in INTEGER_TYPES:
                continue
            node = node_for(name, eager)
            expected = eager.get(node) if node and node not in skip else None
            if not isinstance(expected, torch.Tensor) or not _is_integer(expected):
                continue
            numbers = judge_certain(values[name], expected, mode)
            if numbers is None or numbers.ok:
                continue
            if rounding_flip(plan, values, eager, name, mode) is not None:
                continue
            return step.op, name, node, numbers
    return None


def _is_integer(value: Any) -> bool:
    import torch

    return value.dtype != torch.bool and not value.dtype.is_floating_point
