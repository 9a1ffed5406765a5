"""The one wrapper of ``CoreMLBackend._convert_to_mlmodel``: every Core ML model the backend
converts during a lowering, in conversion (= partition) order, and, when a conversion fails,
the edge node the converter was converting.

The MlModel holds the MIL program (``_mil_program``) and the I/O spec; it is built with
``skip_model_load=True``, which is how Core ML programs are inspected on Linux.

coremltools converts a partition node by node (``convert_single_node``) and, when one
raises, only *logs* which (``ERROR - converting 'clamp' op (located at:
'aten_clamp_tensor')``); the exception it re-raises names no node. The location is the
node's name in the partition's edge program, so the failure is recorded here, from the
converter's own node, together with the edge node's provenance (``from_node``: the names
of the nodes it was made from, newest first), which leads back to the ATen node a user's
program holds. A failure outside ``convert_single_node`` (a MIL pass after conversion, the
partitioner, ``to_executorch``) names no node and records nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


@dataclass
class ConversionFailure:
    """The node coremltools failed to convert: its name in the partition's edge program (the
    ``located at:`` name), the converter's op kind, the edge op, the names of the nodes it
    was made from (newest first), and the error."""

    node: str
    kind: str
    target: str
    lineage: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def located(self) -> str:
        """The converter's own words, as it logs them."""
        return f"converting '{self.kind}' op (located at: '{self.node}')"


def lineage(node: Any) -> list[str]:
    """The names of the nodes ``node`` was made from (torch's ``from_node`` provenance),
    newest first: for an edge node, the first is the node of the ATen program lowered."""
    names: list[str] = []
    source = node.meta.get("from_node")
    while source:
        last = source[-1] if isinstance(source, list) else source
        names.append(last.name)
        source = last.from_node
    return names


@contextmanager
def capture_mlmodels(
    into: list[Any], failures: list[ConversionFailure] | None = None
) -> Iterator[None]:
    """Append each MlModel ``CoreMLBackend`` converts inside the block to ``into``, and each
    conversion failure the converter located to ``failures``."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    original = CoreMLBackend._convert_to_mlmodel

    def wrapped(edge_program: Any, compile_specs: Any, skip_model_load: bool = True) -> Any:
        located: list[Any] = []
        try:
            with _locating(located):
                model = original(edge_program, compile_specs, skip_model_load=skip_model_load)
        except Exception as exc:
            if failures is not None and located:
                failures.append(_failure(edge_program, located[0], exc))
            elif failures is not None and (missing := _missing_var(edge_program, exc)):
                failures.append(_failure(edge_program, missing, exc))
            raise
        into.append(model)
        return model

    CoreMLBackend._convert_to_mlmodel = staticmethod(wrapped)
    try:
        yield
    finally:
        CoreMLBackend._convert_to_mlmodel = staticmethod(original)


@contextmanager
def _locating(located: list[Any]) -> Iterator[None]:
    """Record the converter node whose conversion raised (the innermost first). A node that
    converts after a failure means coremltools handled that failure itself: forgotten."""
    from coremltools.converters.mil.frontend.torch import ops

    original = ops.convert_single_node

    def wrapped(context: Any, node: Any) -> None:
        try:
            original(context, node)
        except Exception:
            located.append(node)
            raise
        located.clear()

    ops.convert_single_node = wrapped
    try:
        yield
    finally:
        ops.convert_single_node = original


# A node whose converter made no var of its name, seen when its output is read later
# (``affine_grid_generator``'s converter only keeps its arguments for a fused grid sampler).
MISSING_VAR = re.compile(r"Torch var (\S+) not found in context")


def _missing_var(edge_program: Any, exc: BaseException) -> Any:
    """The edge node whose output var the converter never made, where the error names one
    (the node it is the output of): a converter node stand-in with its name and kind."""
    found = MISSING_VAR.search(str(exc))
    edge = next((n for n in edge_program.graph.nodes if found and n.name == found.group(1)), None)
    if edge is None or edge.op != "call_function":
        return None
    kind = getattr(edge.target, "__name__", str(edge.target)).split(".")[0]
    return SimpleNamespace(name=edge.name, kind=kind)


def _failure(edge_program: Any, node: Any, exc: BaseException) -> ConversionFailure:
    edge = next((n for n in edge_program.graph.nodes if n.name == node.name), None)
    text = str(exc).strip()
    return ConversionFailure(
        node=node.name,
        kind=str(node.kind),
        target=str(getattr(edge, "target", "")) if edge is not None else "",
        lineage=lineage(edge) if edge is not None else [],
        message=f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}",
    )
