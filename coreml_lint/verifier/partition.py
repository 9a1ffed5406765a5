"""Verify one Core ML partition: its interface, the semantic pass and the float16 pass.

- *interface*: what the embedded program hands back to ExecuTorch: one output per eager
  output, no output that is an input var or a var returned twice (the device's behaviour is
  undefined), dtypes ExecuTorch's Core ML runtime can take. The runtime copies each output
  into the program's tensor converting element by element from Core ML's fp16, fp32 and
  int32 to bool, uint8, int16, int32, int64 and floats; it has no int8 type. So an integer
  returned as float is carried (whether its values are exact integers is the value passes'
  question), an int8 output is not, nor is an integer buffer held in an fp16 state.
- *semantic*: the float32 conversion of the partition, executed, against eager, tightly.
- *float16*: the program ExecuTorch embeds, executed with fp16 storage, judged for what fp16
  cannot excuse (:mod:`coreml_lint.verifier.compare`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from coreml_lint.verifier.compare import (
    FLOAT16,
    SEMANTIC,
    SEMANTIC_HALF,
    Numbers,
    as_numpy,
    compare,
)
from coreml_lint.verifier.eager import PartitionRun
from coreml_lint.verifier.localize import (
    describe_node,
    first_departure,
    input_scale,
    quantum_flip,
    rounding_flip,
    tie_order,
    uninitialised,
)
from coreml_lint.verifier.mil.dtypes import mil_dtype, round_fp16, store
from coreml_lint.verifier.mil.program import ExecutionError, Plan, fp16_state_vars, static_shape
from coreml_lint.verifier.mil.registry import Unsupported
from coreml_lint.verifier.report import (
    AGREE,
    DIVERGE,
    ERROR,
    NOT_VERIFIED,
    Divergence,
    PartitionResult,
    PassResult,
)

# eager dtype -> the MIL dtypes that carry it faithfully across the delegate boundary
_NUMBERS = {"int32", "fp16", "fp32"}  # what the runtime converts from, element by element
CARRIERS = {
    "float32": {"fp32", "fp16"},  # an fp16 output (iOS16+): precision, judged by the fp16 pass
    "float16": {"fp16", "fp32"},
    "int64": _NUMBERS,
    "int32": _NUMBERS,
    "int16": _NUMBERS | {"int16"},
    "uint8": _NUMBERS | {"uint8"},
    "bool": _NUMBERS | {"bool"},
    "int8": set(),  # the runtime's tensor-type table has no int8: the delegate fails to run
}
STATE_CARRIERS = {"float32": {"fp16"}, "float16": {"fp16"}}


@dataclass
class Partition:
    index: int
    name: str  # lowered_module_<i>
    lowered: Any  # LoweredBackendModule
    mlmodel: Any  # the embedded (fp16) MlModel
    run: PartitionRun  # eager reference
    reference: Any = None  # the float64 Reference the semantic pass judges against


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _user_input_names(ep: Any) -> list[str]:
    return [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]


def _output_names(ep: Any) -> list[str]:
    return [s.arg.name for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]


def _state_targets(function: Any, eager: PartitionRun) -> dict[str, str]:
    """MIL state input name -> mutated buffer target."""
    from coremltools.converters.mil.mil import types

    by_clean = {_sanitize(t): t for t in eager.buffers}
    found = {}
    for name, var in function.inputs.items():
        if types.is_state(var.sym_type):
            target = name if name in eager.buffers else by_clean.get(_sanitize(name))
            if target is not None:
                found[name] = target
    return found


def bind_inputs(function: Any, ep: Any, run: PartitionRun, widen: bool) -> tuple[dict, dict, dict]:
    """(inputs, initial states, state name -> buffer target) for the MIL function."""
    from coremltools.converters.mil.mil import types

    names = _user_input_names(ep)
    by_name = dict(zip(names, run.inputs, strict=False))
    by_clean = {_sanitize(n): v for n, v in by_name.items()}
    plain = [n for n, v in function.inputs.items() if not types.is_state(v.sym_type)]
    inputs = {}
    for position, name in enumerate(plain):
        value = by_name.get(name, by_clean.get(_sanitize(name)))
        if value is None and position < len(run.inputs):
            value = run.inputs[position]
        if value is None:
            raise KeyError(f"no eager value for Core ML input {name}")
        inputs[name] = store(as_numpy(value), mil_dtype(function.inputs[name]))
    targets = _state_targets(function, run)
    states = {}
    for name, target in targets.items():
        value = as_numpy(run.buffers[target]).astype(np.float32)
        states[name] = value if widen else round_fp16(value)
    return inputs, states, targets


def check_interface(p: Partition, function: Any) -> list[Divergence]:
    """Divergences in what the embedded program hands back to ExecuTorch."""
    found: list[Divergence] = []

    def add(kind: str, label: str, message: str) -> None:
        found.append(_div(p, "interface", kind, label, message))

    names = _output_names(p.lowered.original_module)
    outputs = list(function.outputs)
    if len(outputs) != len(p.run.outputs):
        add("interface", "outputs", f"Core ML returns {len(outputs)}, eager {len(p.run.outputs)}")
    seen: dict[str, int] = {}
    for i, (var, value) in enumerate(zip(outputs, p.run.outputs, strict=False)):
        label = f"output {i} ({names[i] if i < len(names) else var.name})"
        if var.name in function.inputs:
            add("output-is-input", label, f"the Core ML output is the input var {var.name} itself")
        if var.name in seen:
            add(
                "duplicate-output",
                label,
                f"the output var {var.name} is also output {seen[var.name]}",
            )
        seen.setdefault(var.name, i)
        eager_dtype = str(getattr(value, "dtype", "")).replace("torch.", "")
        mil = mil_dtype(var)
        if eager_dtype in CARRIERS and mil not in CARRIERS[eager_dtype]:
            add("dtype", label, f"Core ML returns {mil} where eager returns {eager_dtype}")
    for name, target in _state_targets(function, p.run).items():
        eager_dtype = str(p.run.buffers[target].dtype).replace("torch.", "")
        mil = mil_dtype(function.inputs[name])
        if mil not in STATE_CARRIERS.get(eager_dtype, {eager_dtype}):
            add(
                "dtype",
                f"state {target}",
                f"the {eager_dtype} buffer is held in a {mil} "
                "Core ML state (integers above 2048 are not exact in fp16)",
            )
    return found


def _div(p: Partition, check: str, kind: str, output: str, message: str) -> Divergence:
    return Divergence(partition=p.index, check=check, kind=kind, output=output, message=message)


def run_pass(
    p: Partition, program: Any, mode: str, explain: Callable[[str], str | None] | None
) -> tuple[PassResult, list[Divergence]]:
    """Execute ``program`` on the partition's eager inputs and judge it as ``mode`` judges."""
    start = time.perf_counter()
    result = PassResult()
    plan = Plan.of(program)
    result.mil_ops = len(plan.steps)
    result.op_types = sorted(plan.op_types)
    if not plan.runnable:
        result.status, result.not_verified_ops = NOT_VERIFIED, list(plan.unknown)
        result.message = "not verified: " + ", ".join(f"op {op}" for op in plan.unknown)
        return result, []
    ep = p.lowered.original_module
    widen = mode == SEMANTIC
    try:
        inputs, states, targets = bind_inputs(plan.function, ep, p.run, widen)
        wide = fp16_state_vars(plan.function) if widen else frozenset()
        initial = {name: np.copy(value) for name, value in states.items()}
        values = plan.run(inputs, states, wide)
    except Unsupported as exc:
        result.status, result.message = NOT_VERIFIED, f"not verified: {exc}"
        result.not_verified_ops = [str(exc)]
        return result, []
    except (ExecutionError, KeyError) as exc:
        declared = _declared_shape_divergences(p, plan, mode, explain)
        if declared:  # the program's own type says it returns another shape than eager
            result.status, result.message = DIVERGE, declared[0].message
            result.seconds = time.perf_counter() - start
            return result, declared
        result.status, result.message = ERROR, f"could not execute: {exc}"
        return result, []
    if mode == SEMANTIC and computes_in_half(p.run, ep.graph_module):
        mode = SEMANTIC_HALF

    def rerun(overrides: dict[str, Any]) -> dict[str, Any]:
        again = {name: np.copy(value) for name, value in initial.items()}
        return plan.run(inputs, again, wide, overrides)

    divergences = _judge(p, plan, values, states, targets, mode, result, explain, rerun)
    result.status = DIVERGE if divergences else AGREE
    result.seconds = time.perf_counter() - start
    return result, divergences


def _declared_shape_divergences(
    p: Partition, plan: Plan, mode: str, explain: Callable[[str], str | None] | None
) -> list[Divergence]:
    """Outputs whose static shape, as the converted program declares it, holds another
    number of elements than eager's value: whether Core ML returns a tensor of the declared
    shape or refuses the program, it does not return eager's output. Asked only when
    execution failed (a kernel's result contradicts the program's declared type, as
    coremltools' matmul of a vector and a rank-3 tensor declares (1, n) where the op
    computes (b, n)): the program cannot be run, but its interface already disagrees."""
    names = _output_names(p.lowered.original_module)
    found = []
    check = SEMANTIC if mode == SEMANTIC_HALF else mode
    for i, var in enumerate(plan.function.outputs[: len(p.run.outputs)]):
        declared, expected = static_shape(var), np.shape(as_numpy(p.run.outputs[i]))
        if declared is None or int(np.prod(declared)) == int(np.prod(expected)):
            continue
        label = f"output {i} ({names[i] if i < len(names) else var.name})"
        message = f"the program declares shape {declared}, eager computes {tuple(expected)}"
        div = _div(p, check, "shape", label, message)
        _at_output(p, plan, div, var.name, label)
        found.append(_described(p, div, explain))
    return found


# edge ops that only convert or move a value: a model that rounds through float16 with them
# (``x.half().float()``) does not compute in float16, and is held to float32 agreement
_CONVERSIONS = ("_to_copy", "to_dim_order_copy", "clone", "view", "alias", "copy", "permute")


def computes_in_half(run: PartitionRun, graph_module: Any = None) -> bool:
    """Whether the partition's eager module computes anything in float16/bfloat16: an op
    other than a conversion or a move produces a half value (any half value, without the
    graph)."""
    import torch

    half = (torch.float16, torch.bfloat16)
    targets = {}
    if graph_module is not None:
        targets = {
            n.name: str(getattr(n.target, "__name__", n.target))
            for n in graph_module.graph.nodes
            if n.op == "call_function"
        }
    for name, value in run.values.items():
        if not (isinstance(value, torch.Tensor) and value.dtype in half):
            continue
        if graph_module is None:
            return True
        target = targets.get(name)  # None: an input or a weight, not a computation
        if target is not None and not any(word in target for word in _CONVERSIONS):
            return True
    return False


def _judge(p, plan, values, states, targets, mode, result, explain, rerun) -> list[Divergence]:
    names = _output_names(p.lowered.original_module)
    found = []
    checks = []
    for i, var in enumerate(plan.function.outputs[: len(p.run.outputs)]):
        label = f"output {i} ({names[i] if i < len(names) else var.name})"
        checks.append((label, var.name, values.get(var.name), p.run.outputs[i]))
    for name, target in targets.items():
        if target in p.run.mutations:
            checks.append((f"state {target}", None, states[name], p.run.mutations[target]))
    producers = {name: step for step in plan.steps for name, _, _ in step.outputs}
    garbage = uninitialised(p.lowered.original_module.graph_module)
    for label, var_name, actual, expected in checks:
        if _output_node(p, label) in garbage:
            continue  # eager returns uninitialised memory: nothing to agree with
        step = producers.get(var_name)
        floor = input_scale(step, values) if step is not None else 0.0
        exact = _exact(p, mode, _output_node(p, label))
        numbers = compare(actual, expected, mode, floor, exact)
        result.outputs[label] = asdict(numbers)
        if (
            not numbers.ok
            and var_name is not None
            and _tie_only(plan, values, p.run.values, var_name, mode, rerun, expected, floor, exact)
        ):
            result.outputs[label]["excused"] = "the order of equal values in a sort"
            continue
        if numbers.kind == "integer" and var_name is not None:
            flip = rounding_flip(plan, values, p.run.values, var_name, mode)
            if flip is not None:
                how = "fp16" if mode == FLOAT16 else "float32"
                result.outputs[label]["excused"] = f"{how} rounding flips {flip}"
                continue
        if (
            numbers.kind == "values"
            and var_name is not None
            and quantum_flip(plan, values, p.run.values, var_name, mode, numbers, actual, expected)
        ):
            result.outputs[label]["excused"] = "a requantize rounds a near-tie the other way"
            continue
        if not numbers.ok:
            found.append(_divergence(p, plan, values, mode, label, var_name, numbers, explain))
    if not found:
        found += _integer_intermediate(p, plan, values, mode, explain)
    return found


def _tie_only(plan, values, eager, var_name, mode, rerun, expected, floor, exact) -> bool:
    """Whether an output's departure is the order of equal values in a sort alone: its
    first departure is such an order (``localize.tie_order``), and the program run again
    with eager's indices there computes the output right (an error elsewhere still shows)."""
    tied = tie_order(plan, values, eager, var_name, mode)
    if tied is None or tied[2] is None:
        return False
    _, var, indices = tied
    try:
        again = rerun({var: as_numpy(indices)})
    except Exception:  # the run with eager's indices failed: nothing excused
        return False
    return var_name in again and compare(again[var_name], expected, mode, floor, exact).ok


def _exact(p: Partition, mode: str, node: str | None) -> tuple[Any, Any] | None:
    """The float64 reference of ``node``'s value, in the pass that judges against it."""
    if mode != SEMANTIC or p.reference is None:
        return None
    return p.reference.of(node)


def _integer_intermediate(p, plan, values, mode, explain) -> list[Divergence]:
    """Every output agrees, but an integer the partition computes on the way does not
    (:mod:`coreml_lint.verifier.intermediates`): a divergence at that node. A float
    intermediate alone never is: the outputs are the verdict."""
    from coreml_lint.verifier.intermediates import first_integer_departure

    skip = uninitialised(p.lowered.original_module.graph_module)
    culprit = first_integer_departure(plan, values, p.run.values, mode, skip)
    if culprit is None:
        return []
    op, var, node, numbers = culprit
    check = SEMANTIC if mode == SEMANTIC_HALF else mode
    label = f"integer intermediate {node}"
    div = _div(p, check, numbers.kind or "integer", label, numbers.describe())
    div.numbers, div.mil_op, div.mil_var, div.node = asdict(numbers), op.op_type, var, node
    return [_described(p, div, explain)]


def _divergence(p, plan, values, mode, label, var_name, numbers: Numbers, explain) -> Divergence:
    check = SEMANTIC if mode == SEMANTIC_HALF else mode
    div = _div(p, check, numbers.kind or "values", label, numbers.describe())
    div.numbers = asdict(numbers)
    graph = p.lowered.original_module.graph_module
    culprit = None
    if var_name is not None:
        skip = uninitialised(graph)
        reference = p.reference if mode == SEMANTIC else None
        culprit = first_departure(plan, values, p.run.values, var_name, mode, skip, reference)
    if culprit is not None:
        op, div.mil_var, div.node, _ = culprit
        div.mil_op = op.op_type
    elif var_name is not None:
        _at_output(p, plan, div, var_name, label)
    return _described(p, div, explain)


def _at_output(p: Partition, plan: Plan, div: Divergence, var_name: str, label: str) -> None:
    """Attribute ``div`` to the output itself: the MIL op that produces it, its edge node."""
    div.mil_var = var_name
    producer = next(
        (op for op in plan.function.operations if var_name in [v.name for v in op.outputs]),
        None,
    )
    div.mil_op = producer.op_type if producer is not None else None
    div.node = _output_node(p, label)


def _described(p: Partition, div: Divergence, explain) -> Divergence:
    """The node's op and model source line, and the lint rule that explains it."""
    graph = p.lowered.original_module.graph_module
    div.target, div.source, div.code = describe_node(graph, div.node)
    if explain is not None and div.node is not None:
        div.rule = explain(div.node)
    return div


def _output_node(p: Partition, label: str) -> str | None:
    """The edge node behind an "output <i> (...)" or "state <target>" label."""
    specs = p.lowered.original_module.graph_signature.output_specs
    match = re.match(r"output (\d+)", label)
    if match:
        names = _output_names(p.lowered.original_module)
        index = int(match.group(1))
        return names[index] if index < len(names) else None
    if label.startswith("state "):
        target = label[len("state ") :]
        return next((s.arg.name for s in specs if s.target == target), None)
    return None


def _locate(p: Partition, div: Divergence, explain: Callable[[str], str | None] | None) -> None:
    """Point an interface divergence at its node and source line (and a rule, if any)."""
    div.node = _output_node(p, div.output)
    _described(p, div, explain)


def verify_partition(
    p: Partition, float32_program: Any, explain: Callable[[str], str | None] | None = None
) -> tuple[PartitionResult, list[Divergence]]:
    """Both passes and the interface check of one partition."""
    function = p.mlmodel._mil_program.functions["main"]
    result = PartitionResult(index=p.index, name=p.name)
    result.inputs = list(function.inputs)
    result.outputs = [v.name for v in function.outputs]
    result.states = list(_state_targets(function, p.run).values())
    divergences = check_interface(p, function)
    for divergence in divergences:
        _locate(p, divergence, explain)
    result.interface.status = DIVERGE if divergences else AGREE
    result.interface.message = "; ".join(f"{d.output}: {d.message}" for d in divergences)
    if float32_program is not None:
        result.semantic, found = run_pass(p, float32_program, SEMANTIC, explain)
        divergences += found
    result.float16, found = run_pass(p, p.mlmodel._mil_program, FLOAT16, explain)
    divergences += found
    return result, divergences
