"""``to_edge_transform_and_lower`` + ``to_executorch``: the one place that runs them.

A crash is a result, not an exception: the stage it happened in and the error are kept, so
the verifier, the sweep, ``--check-advice`` and the oracle tests read one shape of answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.core.stages import stage
from coreml_lint.stack.capture import ConversionFailure, capture_mlmodels
from coreml_lint.stack.partitioner import stock_partitioner

EDGE_STAGE = "to_edge_transform_and_lower"
EXECUTORCH_STAGE = "to_executorch"


@dataclass
class Lowering:
    """What one lowering did: the programs it made, the MlModels it converted (in partition
    order), where it placed the ops, and the failure when there was one."""

    edge: Any = None  # EdgeProgramManager
    program: Any = None  # ExecutorchProgramManager
    mlmodels: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    stage: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    delegate_calls: int = 0  # executorch_call_delegate nodes of the edge program
    # The nodes the converter failed on (``capture.py``): a crash that names its node.
    failures: list[ConversionFailure] = field(default_factory=list)
    edge_cpu_ops: list[str] = field(default_factory=list)  # edge ops outside every delegate

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}" if self.error else ""

    @property
    def cpu_ops(self) -> list[str]:
        """The ops the ExecuTorch program runs outside every delegate (out variants)."""
        if self.program is None:
            return []
        return [
            str(node.target)
            for node in self.program.exported_program().graph.nodes
            if node.op == "call_function"
            and "executorch_call_delegate" not in str(node.target)
            and "getitem" not in str(node.target)
        ]


def lower_stock(
    ep: Any, settings: PartitionerSettings | None = None, *, to_executorch: bool = True
) -> Lowering:
    """Lower ``ep`` with the stock ``CoreMLPartitioner`` and ``settings``."""
    return lower_program(ep, stock_partitioner(settings), to_executorch=to_executorch)


def lower_program(
    ep: Any,
    partitioner: Any,
    *,
    to_executorch: bool = True,
    after_edge: Callable[[Any], None] | None = None,
    transform_passes: list[Any] | None = None,
) -> Lowering:
    """Lower ``ep`` (an ``ExportedProgram``, or ``{method: ExportedProgram}``) with
    ``partitioner``, capturing every MlModel. ``after_edge(edge)`` sees the edge program
    before ``to_executorch`` changes it; ``transform_passes`` run on the edge program
    before partitioning. Lowering consumes ``ep``: pass a fresh copy to lower the same
    program twice."""

    result = Lowering()
    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with capture_mlmodels(result.mlmodels, result.failures):
            with stage(result, EDGE_STAGE, timing="lower"):
                _edge(result, ep, partitioner, transform_passes)
            if not result.ok:
                return result
            _record_placement(result)
            if after_edge is not None:
                after_edge(result.edge)
            if to_executorch:
                with stage(result, EXECUTORCH_STAGE):
                    _executorch(result)
        return result
    finally:
        logging.disable(level)


def _edge(result: Lowering, ep: Any, partitioner: Any, passes: list[Any] | None) -> None:
    from executorch.exir import to_edge_transform_and_lower

    result.edge = to_edge_transform_and_lower(
        ep, partitioner=[partitioner], transform_passes=passes or None
    )


def _executorch(result: Lowering) -> None:
    result.program = result.edge.to_executorch()


def _record_placement(result: Lowering) -> None:
    programs = (
        [result.edge.exported_program(m) for m in result.edge.methods]
        if len(getattr(result.edge, "methods", ())) > 1
        else [result.edge.exported_program()]
    )
    for program in programs:
        for node in program.graph.nodes:
            if node.op != "call_function" or "getitem" in str(node.target):
                continue
            if "executorch_call_delegate" in str(node.target):
                result.delegate_calls += 1
            else:
                result.edge_cpu_ops.append(getattr(node.target, "__name__", str(node.target)))
