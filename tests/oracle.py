"""Lower a model with the *stock* ``CoreMLPartitioner`` and record what really happens.

This is the ground truth every rule is tested against: the exception lowering raises, or,
when it succeeds, the MIL program coremltools produced for each delegate (inspected on
Linux with ``skip_model_load=True``), the delegate's Core ML input/output names and
dtypes, and the ops left outside the delegates.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import coremltools as ct
import torch
from executorch.backends.apple.coreml.compiler import CoreMLBackend
from executorch.backends.apple.coreml.partition import CoreMLPartitioner
from executorch.exir import to_edge_transform_and_lower

IOS = {15: ct.target.iOS15, 16: ct.target.iOS16, 17: ct.target.iOS17, 18: ct.target.iOS18}


@dataclass
class Delegate:
    mil: str
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    consts: dict[str, Any] = field(default_factory=dict)  # small MIL constants by name

    @property
    def returns_an_input(self) -> bool:
        names = {name for name, _ in self.inputs}
        return any(name in names for name, _ in self.outputs)

    @property
    def duplicate_outputs(self) -> bool:
        return len({name for name, _ in self.outputs}) < len(self.outputs)


def _small_consts(program: Any, limit: int = 4096) -> dict[str, Any]:
    consts = {}
    for function in program.functions.values():
        for op in function.operations:
            if op.op_type != "const":
                continue
            value = op.outputs[0].val
            if getattr(value, "size", limit + 1) <= limit:
                consts[op.outputs[0].name] = value
    return consts


@dataclass
class Lowered:
    error: BaseException | None = None
    stage: str = ""
    delegates: list[Delegate] = field(default_factory=list)
    cpu_ops: list[str] = field(default_factory=list)  # after to_executorch (out variants)
    edge_cpu_ops: list[str] = field(default_factory=list)  # edge ops outside every delegate
    delegate_calls: int = 0
    program: Any = None  # the ExecutorchProgramManager when to_executorch succeeded

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}" if self.error else ""

    @property
    def mil(self) -> str:
        return "\n".join(d.mil for d in self.delegates)


def _feature_dtype(feature: Any) -> str:
    kind = feature.type.WhichOneof("Type")
    if kind == "multiArrayType":
        return ct.proto.FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(
            feature.type.multiArrayType.dataType
        )
    return kind or "?"


@contextmanager
def _capture(into: list[Delegate]):
    original = CoreMLBackend._convert_to_mlmodel

    def wrapped(edge_program, compile_specs, skip_model_load=True):
        mlmodel = original(edge_program, compile_specs, skip_model_load=True)
        spec = mlmodel.get_spec()
        into.append(
            Delegate(
                mil=str(mlmodel._mil_program),
                inputs=[(f.name, _feature_dtype(f)) for f in spec.description.input],
                outputs=[(f.name, _feature_dtype(f)) for f in spec.description.output],
                consts=_small_consts(mlmodel._mil_program),
            )
        )
        return mlmodel

    CoreMLBackend._convert_to_mlmodel = staticmethod(wrapped)
    try:
        yield
    finally:
        CoreMLBackend._convert_to_mlmodel = staticmethod(original)


def partitioner(
    ios: int | None = None,
    skip: list[str] | None = None,
    take_over_mutable_buffer: bool = True,
    take_over_constant_data: bool = True,
    lower_full_graph: bool = False,
) -> CoreMLPartitioner:
    specs = (
        CoreMLBackend.generate_compile_specs(minimum_deployment_target=IOS[ios]) if ios else None
    )
    return CoreMLPartitioner(
        skip_ops_for_coreml_delegation=skip,
        compile_specs=specs,
        take_over_mutable_buffer=take_over_mutable_buffer,
        take_over_constant_data=take_over_constant_data,
        lower_full_graph=lower_full_graph,
    )


def lower(ep: torch.export.ExportedProgram, **settings: Any) -> Lowered:
    """``to_edge_transform_and_lower`` + ``to_executorch`` with the stock partitioner."""
    result = Lowered()
    logging.disable(logging.WARNING)
    try:
        with _capture(result.delegates):
            try:
                edge = to_edge_transform_and_lower(ep, partitioner=[partitioner(**settings)])
            except Exception as exc:
                result.error, result.stage = exc, "lower"
                return result
            for node in edge.exported_program().graph.nodes:
                if node.op != "call_function" or "getitem" in str(node.target):
                    continue
                if "executorch_call_delegate" in str(node.target):
                    result.delegate_calls += 1
                else:
                    result.edge_cpu_ops.append(getattr(node.target, "__name__", str(node.target)))
            try:
                program = edge.to_executorch()
            except Exception as exc:
                result.error, result.stage = exc, "to_executorch"
                return result
        result.program = program
        result.cpu_ops = [
            str(node.target)
            for node in program.exported_program().graph.nodes
            if node.op == "call_function"
            and "executorch_call_delegate" not in str(node.target)
            and "getitem" not in str(node.target)
        ]
        return result
    finally:
        logging.disable(logging.NOTSET)


def run_with_portable_runtime(lowered: Lowered, inputs: tuple[Any, ...]) -> None:
    """Load and run a delegate-free program with the pip portable runtime (raises on failure)."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    module = _load_for_executorch_from_buffer(lowered.program.buffer)
    module.forward(inputs)
