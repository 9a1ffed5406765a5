"""A captured Core ML model reduced to what a test or report reads: the MIL text, the
input/output names with their Core ML dtypes, and its small constants."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DelegateView:
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


def describe_mlmodel(mlmodel: Any, const_limit: int = 4096) -> DelegateView:
    """The view of one captured MlModel (constants of at most ``const_limit`` elements)."""
    spec = mlmodel.get_spec()
    return DelegateView(
        mil=str(mlmodel._mil_program),
        inputs=[(f.name, _feature_dtype(f)) for f in spec.description.input],
        outputs=[(f.name, _feature_dtype(f)) for f in spec.description.output],
        consts=_small_consts(mlmodel._mil_program, const_limit),
    )


def _feature_dtype(feature: Any) -> str:
    import coremltools as ct

    kind = feature.type.WhichOneof("Type")
    if kind == "multiArrayType":
        return ct.proto.FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(
            feature.type.multiArrayType.dataType
        )
    return kind or "?"


def _small_consts(program: Any, limit: int) -> dict[str, Any]:
    consts = {}
    for function in program.functions.values():
        for op in function.operations:
            if op.op_type != "const":
                continue
            value = op.outputs[0].val
            if getattr(value, "size", limit + 1) <= limit:
                consts[op.outputs[0].name] = value
    return consts
