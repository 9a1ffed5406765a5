"""Lower a model with the *stock* ``CoreMLPartitioner`` and record what really happens.

This is the ground truth every rule is tested against: the exception lowering raises, or,
when it succeeds, the MIL program coremltools produced for each delegate (inspected on
Linux with ``skip_model_load=True``), the delegate's Core ML input/output names and
dtypes, and the ops left outside the delegates. The lowering itself is
``coreml_lint.stack``'s, the one place that runs the real stack; this module only adapts
its answer to what the tests read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.stack import (
    DelegateView,
    Lowering,
    capture_mlmodels,
    describe_mlmodel,
    lower_stock,
)

Delegate = DelegateView


@dataclass
class Lowered(Lowering):
    """The stock lowering's answer, with a readable view of each Core ML delegate."""

    delegates: list[Delegate] = field(default_factory=list)

    @property
    def mil(self) -> str:
        return "\n".join(d.mil for d in self.delegates)


@contextmanager
def _capture(into: list[Delegate]) -> Iterator[None]:
    """Append a view of every Core ML model converted inside the block to ``into``."""
    models: list[Any] = []
    try:
        with capture_mlmodels(models):
            yield
    finally:
        into.extend(describe_mlmodel(m) for m in models)


def settings(
    ios: int | None = None,
    skip: list[str] | None = None,
    take_over_mutable_buffer: bool = True,
    take_over_constant_data: bool = True,
    lower_full_graph: bool = False,
) -> PartitionerSettings:
    """A case's settings (its ``ios``/``skip`` shorthand) as ``PartitionerSettings``."""
    return PartitionerSettings().changed(
        minimum_deployment_target=ios or 15,
        skip_ops_for_coreml_delegation=list(skip or ()),
        take_over_mutable_buffer=take_over_mutable_buffer,
        take_over_constant_data=take_over_constant_data,
        lower_full_graph=lower_full_graph,
    )


def lower(ep: Any, **case_settings: Any) -> Lowered:
    """``to_edge_transform_and_lower`` + ``to_executorch`` with the stock partitioner."""
    lowering = lower_stock(ep, settings(**case_settings))
    views = [describe_mlmodel(m) for m in lowering.mlmodels]
    return Lowered(**{f.name: getattr(lowering, f.name) for f in fields(Lowering)}, delegates=views)


def run_with_portable_runtime(lowered: Lowered, inputs: tuple[Any, ...]) -> None:
    """Load and run a delegate-free program with the pip portable runtime (raises on failure)."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    module = _load_for_executorch_from_buffer(lowered.program.buffer)
    module.forward(inputs)
