"""Eager references: run the lowered program with every delegate replaced by its
partition's own eager module, and record what each partition received and computed.

One ``torch.fx.Interpreter`` pass over the lowered edge program's graph: CPU nodes run as
ExecuTorch would run them (their eager kernels), and at each ``executorch_call_delegate``
the partition's ``original_module`` (an ExportedProgram of the partition's edge graph)
runs node by node, so every intermediate of the partition is kept for localisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram


@dataclass
class PartitionRun:
    """What one delegate call received and what its eager module computed."""

    inputs: list[Any]  # the delegate call's arguments (the partition's user inputs)
    outputs: list[Any]  # user outputs, in the order of the partition's output specs
    mutations: dict[str, Any] = field(default_factory=dict)  # buffer target -> new value
    buffers: dict[str, Any] = field(default_factory=dict)  # buffer target -> value before
    values: dict[str, Any] = field(default_factory=dict)  # node name -> value


def lifted_arguments(ep: ExportedProgram, user_inputs: list[Any]) -> tuple[list[Any], dict]:
    """The flat arguments of ``ep.graph_module``: parameters, buffers and constants from the
    program, user inputs in order. Buffers are cloned, so nothing the run mutates leaks into
    the caller's program. Also returns buffer target -> value given."""
    args: list[Any] = []
    buffers: dict[str, Any] = {}
    users = iter(user_inputs)
    for spec in ep.graph_signature.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            args.append(next(users))
            continue
        value = ep.state_dict.get(spec.target) if spec.target in ep.state_dict else None
        if value is None:
            value = ep.constants.get(spec.target)
        if kind == "BUFFER" and isinstance(value, torch.Tensor):
            value = value.clone()
            buffers[spec.target] = value.clone()
        args.append(value)
    return args, buffers


class _Runner(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, keep: bool, runs: dict[str, Any] | None):
        super().__init__(gm)
        self.keep = keep
        self.values: dict[str, Any] = {}
        self.runs = runs
        self._delegate_names: dict[int, str] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        if self.runs is not None and n.op == "get_attr":
            self._delegate_names[id(getattr(self.module, str(n.target)))] = str(n.target)
        out = super().run_node(n)
        if self.keep:
            self.values[n.name] = out
        return out

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if self.runs is not None and "executorch_call_delegate" in str(target):
            lowered, *inputs = args
            # copies: the program's own later nodes may write into these tensors
            inputs = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
            run = run_partition(lowered.original_module, list(inputs))
            self.runs[self._delegate_names.get(id(lowered), str(len(self.runs)))] = run
            return tuple(run.outputs)
        return super().call_function(target, args, kwargs)


def run_partition(ep: ExportedProgram, user_inputs: list[Any]) -> PartitionRun:
    """Run a partition's eager module node by node, keeping every intermediate."""
    args, buffers = lifted_arguments(ep, user_inputs)
    runner = _Runner(ep.graph_module, keep=True, runs=None)
    with torch.no_grad():
        flat = runner.run(*args)
    flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
    run = PartitionRun(inputs=user_inputs, outputs=[], buffers=buffers, values=runner.values)
    for spec, value in zip(ep.graph_signature.output_specs, flat, strict=False):
        if spec.kind.name == "BUFFER_MUTATION":
            run.mutations[spec.target] = value
        elif spec.kind.name == "USER_OUTPUT":
            run.outputs.append(value)
    return run


def run_lowered(ep: ExportedProgram, user_inputs: list[Any]) -> dict[str, PartitionRun]:
    """Run the lowered program in eager; returns each delegate's run by its attribute name
    (``lowered_module_0``, ...)."""
    runs: dict[str, PartitionRun] = {}
    args, _ = lifted_arguments(ep, user_inputs)
    with torch.no_grad():
        _Runner(ep.graph_module, keep=False, runs=runs).run(*args)
    return runs
