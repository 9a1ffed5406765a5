"""Lint an in-memory ``torch.export.ExportedProgram``.

We serialize it with torch's own ``torch.export.save`` into memory and read it back with
the light reader, so an in-script lint and ``coreml-lint program.pt2`` go through exactly
the same graph code and always agree.
"""

from __future__ import annotations

import copy
import io
from typing import Any

from coreml_lint.core.config import LintConfig
from coreml_lint.engine.program import ProgramReport, lint_graph
from coreml_lint.program.graph import Graph
from coreml_lint.program.pt2 import read_pt2_stream


def graph_of(exported_program: Any, label: str = "<ExportedProgram>") -> Graph:
    import torch

    buffer = io.BytesIO()
    try:
        torch.export.save(exported_program, buffer)
    except NotImplementedError as error:  # an output torch cannot name (see below)
        flat = _with_flat_outputs(exported_program)
        if flat is None:
            raise error from None
        buffer = io.BytesIO()
        torch.export.save(flat, buffer)
    buffer.seek(0)
    (graph,) = read_pt2_stream(buffer, label)
    _keep_leaf_grad(graph, exported_program)
    _note_derived_dims(graph, exported_program)
    return graph


def _with_flat_outputs(exported_program: Any) -> Any:
    """A shallow copy of the program returning its outputs as a plain tuple, or None.

    ``torch.export.save`` (torch 2.13) cannot write a program whose ``forward`` returns one
    of ``torch.return_types`` (``torch.median(x, dim=1)``, ``x.max(1)`` returned as they
    are): the named tuples have no serialization name. The graph, its ops and its outputs
    are the same; only the Python structure they are returned in differs, which no rule
    reads. The copy goes through the program's module call graph (a private attribute; the
    test on a returned ``median`` fails if it moves).
    """
    import dataclasses

    from torch.utils import _pytree

    entries = getattr(exported_program, "_module_call_graph", None)
    if not entries or entries[0].signature is None:
        return None
    signature = entries[0].signature
    tuple_spec = _pytree.tree_structure(tuple(range(signature.out_spec.num_leaves)))
    flat = copy.copy(exported_program)
    top = dataclasses.replace(signature, out_spec=tuple_spec)
    flat._module_call_graph = [dataclasses.replace(entries[0], signature=top), *entries[1:]]
    return flat


def _note_derived_dims(graph: Graph, exported_program: Any) -> None:
    """A saved archive's derived dims (``16*s1``) end up in the shape environment
    ``torch.export.load`` builds, where torch's re-trace fails on them (CML608). A program
    still in memory only has them there if it was itself loaded: say which it is."""
    import sympy
    from torch._export.utils import _get_shape_env_from_gm

    try:
        shape_env = _get_shape_env_from_gm(exported_program.graph_module)
    except Exception:
        return
    if shape_env is None:
        return
    loaded = any(not isinstance(key, sympy.Symbol) for key in shape_env.var_to_range)
    graph.meta["derived_dims_loaded"] = loaded


def _keep_leaf_grad(graph: Graph, exported_program: Any) -> None:
    """What matters to ExecuTorch's in-place buffer write is a *leaf* value that requires
    grad (CML204). A saved archive records ``requires_grad`` but not leaf-ness, and every
    value comes back from ``torch.export.load`` as a leaf; in memory, a strict (dynamo)
    export's buffer values are not leaves and lower fine. So for the program in memory,
    the flag is what the program really holds."""
    import torch

    for node in exported_program.graph.nodes:
        value = node.meta.get("val")
        info = graph.tensors.get(node.name)
        if node.op == "placeholder" and info is not None and isinstance(value, torch.Tensor):
            info.requires_grad = bool(value.requires_grad and value.is_leaf)


def lint_exported_program(
    exported_program: Any, config: LintConfig | None = None, **partitioner: Any
) -> ProgramReport:
    config = config or LintConfig()
    if partitioner:
        config = config.with_partitioner(**partitioner)
    return lint_graph(graph_of(exported_program), config)
