"""Execute a MIL program (the ``main`` function coremltools produced) with numpy.

``Plan.of(program)`` walks the function once: constants and ``constexpr_*`` ops are
materialised, every other op gets its kernel from the op table, and an op the table does
not know makes the plan *not runnable* with that op's name (never guessed). ``Plan.run``
executes the plan on input values and returns every var's value, so a caller can compare
intermediates and not just outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coreml_lint.verifier.mil.dtypes import mil_dtype, store
from coreml_lint.verifier.mil.registry import KERNELS, TRUSTED, Unsupported


class ExecutionError(Exception):
    """A kernel failed (or disagreed with the program's declared type) at one op."""

    def __init__(self, op: Any, message: str) -> None:
        super().__init__(f"{op.op_type} {op.outputs[0].name if op.outputs else op.name}: {message}")
        self.op_type = op.op_type
        self.var = op.outputs[0].name if op.outputs else op.name


@dataclass
class Step:
    op: Any
    kernel: Any
    inputs: list[tuple[str, Any]]  # (input name, var name or tuple of var names)
    outputs: list[tuple[str, str | None, tuple[Any, ...]]]  # (var name, MIL dtype, shape)


@dataclass
class Plan:
    function: Any
    steps: list[Step] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)  # op types the interpreter lacks
    op_types: set[str] = field(default_factory=set)

    @property
    def runnable(self) -> bool:
        return not self.unknown

    @classmethod
    def of(cls, program: Any, function: str = "main") -> Plan:
        from coreml_lint.verifier.mil import load_kernels

        load_kernels()
        plan = cls(program.functions[function])
        for op in plan.function.operations:
            plan._add(op)
        return plan

    def _add(self, op: Any) -> None:
        from coremltools.converters.mil.mil import Operation

        self.op_types.add(op.op_type)
        if op.op_type == "const":
            var = op.outputs[0]
            self.constants[var.name] = _const_value(var)
            return
        if op.op_type.startswith("constexpr_"):
            self._add_constexpr(op)
            return
        entry = KERNELS.get(op.op_type)
        missing_inference = (
            entry is not None
            and entry.how == TRUSTED
            and type(op).value_inference is Operation.value_inference
        )
        if entry is None or op.blocks or missing_inference:
            if op.op_type not in self.unknown:
                self.unknown.append(op.op_type)
            return
        inputs = []
        for name, var in op.inputs.items():
            if isinstance(var, (list, tuple)):
                inputs.append((name, tuple(v.name for v in var)))
            else:
                inputs.append((name, var.name))
        outputs = [(v.name, mil_dtype(v), static_shape(v)) for v in op.outputs]
        self.steps.append(Step(op, entry.kernel, inputs, outputs))

    def _add_constexpr(self, op: Any) -> None:
        """``constexpr_*`` ops decompress weights; their inputs are all constants."""
        from coreml_lint.verifier.mil.k_misc import materialise_constexpr

        try:
            values = materialise_constexpr(op)
        except NotImplementedError:
            if op.op_type not in self.unknown:
                self.unknown.append(op.op_type)
            return
        for var, value in zip(op.outputs, values, strict=False):
            self.constants[var.name] = store(value, mil_dtype(var))

    def run(
        self,
        inputs: dict[str, Any],
        states: dict[str, np.ndarray] | None = None,
        keep_wide: frozenset[str] = frozenset(),
        overrides: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Values of every var. ``inputs`` maps function input names to numpy arrays (already
        in the input's MIL dtype); ``states`` maps state input names to their initial value
        and is updated in place by ``coreml_update_state``. Vars named in ``keep_wide`` keep
        float32 precision even where the program types them fp16 (see ``fp16_state_vars``).
        A var named in ``overrides`` holds that value instead of what its op computes (the
        run again with eager's indices in place of a sort's, ``localize.tie_order``)."""
        overrides = overrides or {}
        env: dict[str, Any] = dict(self.constants)
        env.update(inputs)
        cells = {name: _StateCell(value) for name, value in (states or {}).items()}
        env.update(cells)
        with np.errstate(all="ignore"):
            for step in self.steps:
                args = {}
                for name, ref in step.inputs:
                    args[name] = tuple(env[r] for r in ref) if isinstance(ref, tuple) else env[ref]
                if step.op.op_type == "cast" and step.outputs[0][0] in keep_wide:
                    env[step.outputs[0][0]] = store(args["x"], "fp32")  # a state's fp16 cast
                    continue
                try:
                    result = step.kernel(step.op, args)
                except (ExecutionError, Unsupported):
                    raise
                except Exception as exc:  # a kernel failure is reported at its op
                    raise ExecutionError(step.op, f"{type(exc).__name__}: {exc}") from exc
                self._store(step, result, env, keep_wide)
                for name, dtype, _ in step.outputs:
                    if name in overrides:
                        env[name] = store(np.asarray(overrides[name]), dtype)
        if states is not None:
            for name, cell in cells.items():
                states[name] = cell.value
        return env

    @staticmethod
    def _store(step: Step, result: Any, env: dict[str, Any], keep_wide: frozenset[str]) -> None:
        results = result if len(step.outputs) > 1 else (result,)
        if len(results) != len(step.outputs):
            raise ExecutionError(step.op, f"kernel returned {len(results)} values")
        for (name, dtype, shape), value in zip(step.outputs, results, strict=True):
            if name in keep_wide and dtype == "fp16":
                dtype = "fp32"
            held = store(value, dtype)
            if shape is not None and np.shape(held) != shape:
                if _squeezed(np.shape(held)) != _squeezed(shape):
                    raise ExecutionError(
                        step.op, f"computed shape {np.shape(held)}, program declares {shape}"
                    )
                held = np.reshape(held, shape)  # only unit dims differ: a 0-d value typed (1,)
            env[name] = held[()] if np.ndim(held) == 0 else held


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


class _StateCell:
    """A Core ML state: ``read_state`` reads it, ``coreml_update_state`` writes it."""

    __slots__ = ("value",)

    def __init__(self, value: np.ndarray) -> None:
        self.value = value


def _const_value(var: Any) -> Any:
    """A constant as kernels expect it: arrays in the interpreter's storage dtype; scalars as
    coremltools holds them (a Python bool stays a bool: numpy's ``keepdims`` wants one)."""
    value = var.val
    if isinstance(value, np.ndarray):
        return store(value, mil_dtype(var))
    if isinstance(value, np.float16):
        return np.float32(value)
    return value


def static_shape(var: Any) -> tuple[int, ...] | None:
    from coremltools.converters.mil.mil import types

    if not types.is_tensor(var.sym_type) and not types.is_scalar(var.sym_type):
        return None
    shape = tuple(var.shape)
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        return None  # a symbolic dimension (enumerated shapes): not checked
    return tuple(int(d) for d in shape)


def fp16_state_vars(function: Any) -> frozenset[str]:
    """Vars that are fp16 only because Core ML states are fp16 (``read_state`` outputs and
    the values written by ``coreml_update_state``). The semantic pass keeps them at float32:
    an fp16 state is Core ML's storage format, judged by the float16 pass and by the state's
    dtype, not a wrong op."""
    names: set[str] = set()
    for op in function.operations:
        if op.op_type == "read_state":
            names.add(op.outputs[0].name)
        elif op.op_type == "coreml_update_state":
            names.add(op.outputs[0].name)
            value = op.inputs["value"]
            names.add(value.name)
    return frozenset(names)
