"""From a diverging output back to the op that first departs from eager, and from that op to
the edge graph node and the model source line.

coremltools names the var an op computes after the edge node it translates
(``aten_mul_tensor``); the fp16 program adds suffixes (``aten_mul_tensor_cast_fp16`` for
the op run in fp16, ``x_to_fp16`` for a cast of ``x``). Ops coremltools adds have names of
their own (``mul_0``, ``transpose_3``) and match no node; they are not compared. Among the
diverging output's ancestors, in program order, the first matched var whose value departs
from its node's eager value (judged as the pass judges outputs) is where the divergence
shows; the culprit is the first op back from there whose inputs agree with eager and whose
output does not (an op forgives errors up to the scale of its inputs, so a wrong value made
from large inputs may show only at the next op).

A name is not proof: MIL passes move transposes across elementwise ops and keep the var's
name, so a var may hold its node's value in another layout (ConvNeXt's residual ``add``
with 16 channels at 16x16 has the same shape either way). A var is matched *certainly* only
when its shape equals the node's, its dtype kind (float or integer) is the node's, and, when
it departs, no other arrangement of its equal-sized axes agrees with eager. An uncertain var
is skipped, never blamed.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from coreml_lint.verifier.compare import FLOAT16, Numbers, as_numpy, compare, value_scale

MAX_ARRANGEMENTS = 24  # axis arrangements tried on a var with equal-sized axes
EXACT_INTEGERS_FP16 = 2048.0  # every integer up to here is exact in float16
EXACT_INTEGERS_FP32 = 2.0**24

SUFFIXES = ("_cast_fp16", "_cast_fp32", "_to_fp16", "_to_fp32")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)')


@dataclass
class Culprit:
    mil_op: str | None
    mil_var: str | None
    node: str | None
    target: str | None = None
    source: str | None = None
    code: str | None = None


def node_for(var_name: str, values: dict[str, Any]) -> str | None:
    """The eager node whose value the MIL var ``var_name`` holds, by name."""
    if var_name in values:
        return var_name
    for suffix in SUFFIXES:
        if var_name.endswith(suffix) and var_name[: -len(suffix)] in values:
            return var_name[: -len(suffix)]
    return None


def source_of(node: Any) -> tuple[str | None, str | None]:
    """("file:line", code) of the innermost model frame in the node's stack trace."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace:
        return None, None
    frames = _FRAME.findall(trace)
    if not frames:
        return None, None
    own = [f for f in frames if "site-packages" not in f[0] and "/torch/" not in f[0]]
    path, line, code = (own or frames)[-1]
    return f"{path}:{line}", code.strip()


def upstream_nodes(node: Any) -> list[Any]:
    """Every ``torch.fx`` node ``node`` is computed from, nearest first (breadth first)."""
    seen, order, frontier = {node}, [], [node]
    while frontier:
        following = []
        for current in frontier:
            for parent in current.all_input_nodes:
                if parent not in seen:
                    seen.add(parent)
                    order.append(parent)
                    following.append(parent)
        frontier = following
    return order


def ancestors(function: Any, var_name: str) -> set[str]:
    """Names of every var the var ``var_name`` is computed from (itself included)."""
    producers = {v.name: op for op in function.operations for v in op.outputs}
    seen: set[str] = set()
    stack = [var_name]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        op = producers.get(name)
        if op is None:
            continue
        for var in op.inputs.values():
            for v in var if isinstance(var, (list, tuple)) else [var]:
                stack.append(v.name)
    return seen


def first_departure(
    plan: Any,
    values: dict[str, Any],
    eager: dict[str, Any],
    output_var: str | None,
    mode: str,
    skip: frozenset[str] = frozenset(),
    reference: Any = None,
) -> tuple[Any, str, str, Any] | None:
    """(MIL op, var name, eager node name, numbers) of the op that made the first departure
    among the ancestors of ``output_var`` (anywhere when it is None): the first matched var
    that departs, in program order, traced back through inputs that already departed (see
    :func:`_where_made`). Eager nodes named in ``skip`` (uninitialised ``empty*`` memory) are
    not compared. ``reference`` (a float64
    :class:`~coreml_lint.verifier.reference.Reference`) judges float vars as outputs are."""
    wanted = ancestors(plan.function, output_var) if output_var is not None else None
    judge = _Judge(values, eager, mode, skip, reference)
    for step in plan.steps:
        for name, _, _ in step.outputs:
            if wanted is not None and name not in wanted:
                continue
            judged = judge(name, input_scale(step, values))
            if judged is not None and not judged[1].ok:
                return _where_made(plan, judge, step, name, *judged)
    return None


@dataclass
class _Judge:
    """A MIL var against the eager value of the node it is named after, at a given input
    scale: (node, numbers), or None when the var has no certain match."""

    values: dict[str, Any]
    eager: dict[str, Any]
    mode: str
    skip: frozenset[str]
    reference: Any

    def __call__(self, name: str, floor: float) -> tuple[str, Numbers] | None:
        import torch

        node = node_for(name, self.eager)
        expected = self.eager.get(node) if node and node not in self.skip else None
        if name not in self.values or not isinstance(expected, torch.Tensor):
            return None
        exact = self.reference.of(node) if self.reference is not None else None
        numbers = judge_certain(self.values[name], expected, self.mode, floor, exact)
        return None if numbers is None else (node, numbers)


def _where_made(
    plan: Any, judge: _Judge, step: Any, name: str, node: str, numbers: Numbers
) -> tuple[Any, str, str, Numbers]:
    """The op that made a departure: the departing var's op, unless one of its inputs
    already departs at that op's input scale. Then the error came in through that input
    and its producer is blamed instead, and so on back. An op's own judgement forgives
    errors up to the scale of its inputs, so a wrong value made where the inputs are large
    (a ``clamp`` of values in the hundreds to [0, 1]) passes its own op and shows only at
    the next (the ``add`` after it); the add's inputs do not agree with eager, the clamp's
    do."""
    producers = {out: s for s in plan.steps for out, _, _ in s.outputs}
    while True:
        came_in = _departing_input(step, judge, producers)
        if came_in is None:
            return step.op, name, node, numbers
        name, node, numbers = came_in
        step = producers[name]


def _departing_input(
    step: Any, judge: _Judge, producers: dict[str, Any]
) -> tuple[str, str, Numbers] | None:
    """(var, node, numbers) of the first input ``step`` computes from that departs from eager
    at ``step``'s input scale (constants and the function's inputs are not ops to blame)."""
    floor = input_scale(step, judge.values)
    for ref in _input_names(step):
        judged = judge(ref, floor) if ref in producers else None
        if judged is not None and not judged[1].ok:
            return ref, *judged
    return None


def _input_names(step: Any) -> list[str]:
    names: list[str] = []
    for _, ref in step.inputs:
        names.extend(ref if isinstance(ref, tuple) else (ref,))
    return names


def judge_certain(
    actual: Any, expected: Any, mode: str, floor: float = 0.0, exact: Any = None
) -> Numbers | None:
    """``compare`` of a MIL var with the eager value of the node it is named after, or None
    when the match is not certain (other shape, other dtype kind, or the values agree in
    another arrangement of equal-sized axes: a layout a MIL pass chose)."""
    a, e = np.asarray(actual), as_numpy(expected)
    if a.shape != e.shape or _is_float(a) != _is_float(e):
        return None
    numbers = compare(a, e, mode, floor, exact)
    if numbers.ok:
        return numbers
    for order in _arrangements(e.shape):
        if compare(np.transpose(a, order), e, mode, floor, exact).ok:
            return None
    return numbers


def _is_float(array: np.ndarray) -> bool:
    return bool(np.issubdtype(array.dtype, np.floating))


def _arrangements(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Axis orders other than the identity that keep the shape (swap equal-sized axes)."""
    identity = tuple(range(len(shape)))
    groups: dict[int, list[int]] = {}
    for axis, size in enumerate(shape):
        if size > 1:
            groups.setdefault(size, []).append(axis)
    found = []
    for axes in groups.values():
        for perm in itertools.permutations(axes):
            order = list(identity)
            for source, target in zip(axes, perm, strict=True):
                order[source] = target
            if tuple(order) != identity:
                found.append(tuple(order))
            if len(found) >= MAX_ARRANGEMENTS:
                return found
    return found


COMPARISONS = {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal"}
ARG_OPS = {"reduce_argmax", "reduce_argmin", "argsort", "topk"}
FLOAT_TYPES = {"fp16", "fp32"}


def float_to_int_boundary(op: Any) -> bool:
    """Whether ``op`` turns float values into integers or bools (a cast, a comparison, an
    argmax): in fp16 its result may flip where the float lies within rounding of a boundary."""
    from coreml_lint.verifier.mil.dtypes import mil_dtype

    x = op.inputs.get("x")
    if x is None or isinstance(x, (list, tuple)) or mil_dtype(x) not in FLOAT_TYPES:
        return False
    if op.op_type == "cast":
        return mil_dtype(op.outputs[0]) not in FLOAT_TYPES
    return op.op_type in COMPARISONS or op.op_type in ARG_OPS


def tie_order(
    plan: Any, values: dict, eager: dict, var_name: str, mode: str
) -> tuple[str, str, Any] | None:
    """(op type, var, eager's indices), when the first departure among ``var_name``'s
    ancestors is the indices of an ``argsort`` (or an arg-reduction or ``topk`` whose
    indices var is matched to its node) that pick values equal to the ones eager's indices
    pick (within the pass's tolerance): the order among ties, which torch's unstable sort
    does not define either, so the values gathered by them later differ without either
    side being wrong (a score filter's zeros sorted, then boxes gathered). Indices that
    pick other values are a divergence. Whether the output is then right is for the caller
    to judge, running the program again with eager's indices in their place (an error
    elsewhere in the output is not the tie's)."""
    culprit = first_departure(plan, values, eager, var_name, mode)
    if culprit is None:
        return None
    op, var, node, _ = culprit
    if op.op_type not in ARG_OPS or op.inputs.get("x") is None:
        return None
    x = values.get(op.inputs["x"].name)
    mine, theirs = values.get(var), eager.get(node)
    if x is None or mine is None or theirs is None:
        return None
    x, mine, theirs = (np.asarray(as_numpy(v)) for v in (x, mine, theirs))
    if mine.dtype.kind not in "iu" or mine.shape != theirs.shape:
        return None  # topk's values output departs: not an order
    axis = _value(op, "axis", -1)
    if mine.ndim < x.ndim:  # an arg-reduction without keep_dims
        mine, theirs = np.expand_dims(mine, axis), np.expand_dims(theirs, axis)
    try:
        picked = np.take_along_axis(x, mine.astype(np.int64), axis)
        meant = np.take_along_axis(x, theirs.astype(np.int64), axis)
    except (IndexError, ValueError):
        return None  # an index out of range is wrong, not an order
    if not compare(picked, meant, mode, value_scale([x])).ok:
        return None
    return op.op_type, var, eager.get(node)


def _value(op: Any, name: str, default: Any) -> Any:
    var = op.inputs.get(name)
    return default if var is None or var.val is None else int(np.asarray(var.val))


def rounding_flip(plan: Any, values: dict, eager: dict, var_name: str, mode: str) -> str | None:
    """The op type, when an integer value's first departure from eager is a float-to-int
    boundary whose float inputs still agree within tolerance: a rounding flip (``argmax`` of
    near-ties, ``(x * 10).long()`` at x = 1.7998, ``x * 255`` at 226.97 rounded to 227 in
    fp16), not a wrong op. Not when the cast's float input is past the last integer its
    precision holds exactly (2048 in fp16): positions held as floats there lose integers
    wholesale, whatever the inputs, and that is a divergence."""
    culprit = first_departure(plan, values, eager, var_name, mode)
    op = _origin(plan.function, culprit[1] if culprit is not None else var_name)
    if op is None or not float_to_int_boundary(op):
        return None
    if op.op_type == "cast" and value_scale([values.get(op.inputs["x"].name, 0.0)]) > (
        EXACT_INTEGERS_FP16 if mode == FLOAT16 else EXACT_INTEGERS_FP32
    ):
        return None
    return op.op_type


def quantum_flip(
    plan: Any,
    values: dict,
    eager: dict,
    var_name: str,
    mode: str,
    numbers: Numbers,
    actual: Any,
    expected: Any,
) -> bool:
    """Whether a float output departs from eager only by one quantization step at a few
    elements, first at a MIL ``dequantize``: the requantize before it rounded a near-tie
    the other way (float32 in another order than torch's kernel), not a wrong op. A wrong
    zero point or scale moves every element, so more than one element in a hundred (or
    any by more than the step) is a divergence."""
    culprit = first_departure(plan, values, eager, var_name, mode)
    if culprit is None or culprit[0].op_type != "dequantize":
        return False
    scale = getattr(culprit[0].inputs.get("scale"), "val", None)
    if scale is None or numbers.mismatched > max(1, numbers.size // 100):
        return False
    step = float(np.max(np.abs(np.asarray(scale, dtype=np.float64))))
    got = np.asarray(actual, dtype=np.float64).reshape(-1)
    want = as_numpy(expected).astype(np.float64).reshape(-1)
    if got.size != want.size:
        return False
    return bool(np.all(np.abs(got - want) <= step * (1 + 1e-3) + 1e-7))


# ops that move integers without computing: a flip is the boundary's that made them
MOVES = {
    "transpose",
    "reshape",
    "squeeze",
    "expand_dims",
    "slice_by_index",
    "slice_by_size",
    "identity",
    "tile",
}


def _origin(function: Any, var_name: str) -> Any:
    """The op that computed the values of ``var_name``, looking through ops that only move
    them (a permute after the cast that rounded)."""
    producers = {v.name: op for op in function.operations for v in op.outputs}
    op = producers.get(var_name)
    while op is not None and op.op_type in MOVES:
        x = op.inputs.get("x")
        if x is None or isinstance(x, (list, tuple)):
            break
        op = producers.get(x.name, op)
        if op.outputs[0].name != x.name:
            break
    return op


def input_scale(step: Any, values: dict[str, Any]) -> float:
    """Largest magnitude among the float inputs of a plan step (see ``compare``)."""
    refs = _input_names(step)
    return value_scale(values[r] for r in refs if r in values and not hasattr(values[r], "value"))


def uninitialised(graph_module: Any) -> frozenset[str]:
    """Nodes whose eager value is uninitialised memory (``empty``, ``empty_like``, ...)."""
    return frozenset(
        n.name
        for n in graph_module.graph.nodes
        if n.op == "call_function" and "empty" in getattr(n.target, "__name__", str(n.target))
    )


def describe_node(graph_module: Any, name: str | None) -> tuple[str | None, str | None, str | None]:
    """(target, source "file:line", code) of the edge node called ``name``."""
    if name is None:
        return None, None, None
    node = next((n for n in graph_module.graph.nodes if n.name == name), None)
    if node is None:
        return None, None, None
    target = (
        getattr(node.target, "__name__", str(node.target)) if node.op != "placeholder" else "input"
    )
    source, code = source_of(node)
    return target, source, code
