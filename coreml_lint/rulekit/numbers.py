"""Python numbers in an arithmetic op's Tensor slot (``x * 3``): ExecuTorch lifts each into a
constant of its own dtype (an int64 one beside a float tensor, with a cast of its own) that
Core ML holds as int32. Writing the integer as the float torch computes with (the number
takes the tensor's dtype) keeps the values and avoids both (CML602, CML801)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coreml_lint.measured.values import INT32

# Ops whose Tensor slot takes a Python number as a lifted constant; a Scalar overload keeps
# its number, and an int argument (``split.Tensor``'s size) is no operand.
LIFTED_BASES = frozenset({"add", "sub", "mul", "div", "remainder", "fmod", "floor_divide"})


def lifted(target: str) -> bool:
    """``aten.mul.Tensor`` and ``aten.div.Tensor_mode``, not ``aten.pow.Tensor_Scalar``."""
    namespace, _, rest = target.partition(".")
    base, _, overload = rest.partition(".")
    return namespace == "aten" and base in LIFTED_BASES and overload in ("Tensor", "Tensor_mode")


def integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def past_int32(value: Any) -> bool:
    return integer(value) and not INT32[0] <= value <= INT32[1]


def integers_as_floats(ep: Any, wanted: Callable[[int], bool]) -> list[str]:
    """Write each ``wanted`` integer in a lifted slot beside a float tensor of the exported
    program as that float, in place; what was written, one line per node."""
    done = []
    for node in ep.graph.nodes:
        if node.op != "call_function" or not lifted(str(node.target).replace("::", ".")):
            continue
        first, number = (*node.args[:2], None, None)[:2]
        value = getattr(first, "meta", {}).get("val")
        if not integer(number) or not wanted(number):
            continue
        if value is None or not value.dtype.is_floating_point:
            continue
        node.args = (first, float(number), *node.args[2:])
        done.append(f"{node.name}: the integer {number} written as {float(number)!r}")
    return done
