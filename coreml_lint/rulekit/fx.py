"""``torch.fx`` helpers the rules' lowering hooks share (heavy: imports torch).

Imported only inside hook bodies, never on the linting path. The hooks work on the
functional ``ExportedProgram`` that ``run_decompositions({})`` returns (the graph
``to_edge_transform_and_lower`` starts from) and on its nodes' fake-tensor metadata.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram

aten = torch.ops.aten
FLOATS = frozenset({torch.float16, torch.float32, torch.float64, torch.bfloat16})
EIGHT_BIT = frozenset({torch.uint8, torch.int8})


def val(node: Any) -> Any:
    """A node's fake value (``meta["val"]``), or None for anything else."""
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def finish(ep: ExportedProgram) -> ExportedProgram:
    """Drop what a rewrite left unused and regenerate the module's code."""
    ep.graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep


def op_base(node: torch.fx.Node) -> str:
    """``aten.zeros_like.default`` or ``zeros_like.default`` -> ``zeros_like``."""
    parts = getattr(node.target, "__name__", "").split(".")
    return parts[-2] if len(parts) >= 2 else parts[0]


def tensors_of(node: torch.fx.Node) -> list[torch.Tensor]:
    """The fake tensors a node reads and makes."""
    values = [node.meta.get("val")]
    values += [a.meta.get("val") for a in node.all_input_nodes]
    flat: list[Any] = []
    for value in values:
        flat.extend(value if isinstance(value, (list, tuple)) else [value])
    return [v for v in flat if isinstance(v, torch.Tensor)]


def touches(node: torch.fx.Node, dtypes: frozenset[torch.dtype] | set[torch.dtype]) -> bool:
    """Whether the node reads or makes a tensor of one of ``dtypes``."""
    return any(t.dtype in dtypes for t in tensors_of(node))


def cast(ep: ExportedProgram, value: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """A new ``_to_copy`` of ``value`` to ``dtype`` (inserted at the graph's cursor)."""
    node = ep.graph.call_function(aten._to_copy.default, (value,), {"dtype": dtype})
    node.meta = {**value.meta, "val": val(value).to(dtype)}
    return node


def is_fp16(value: Any) -> bool:
    return getattr(val(value), "dtype", None) == torch.float16


def in_float32(ep: ExportedProgram, node: torch.fx.Node) -> torch.fx.Node:
    """Compute ``node`` on float32 copies of its float16 inputs, and make ``node`` itself the
    cast back to float16, so its name, users and any output spec stay as they were."""
    with ep.graph.inserting_before(node):
        args = tuple(cast(ep, a, torch.float32) if is_fp16(a) else a for a in node.args)
        wide = ep.graph.call_function(node.target, args, dict(node.kwargs))
    wide.meta = {**node.meta, "val": val(node).float()}
    node.target, node.args, node.kwargs = aten._to_copy.default, (wide,), {"dtype": torch.float16}
    return wide


def float16_in_float32(ep: ExportedProgram, targets: Any) -> list[str]:
    """Run every float16 node whose op is one of ``targets`` in float32 and cast it back
    (:func:`in_float32`): the answer to a converter that pairs an fp32 constant with an fp16
    tensor, and the node stays on Core ML. Returns what was done, one line per node."""
    done = []
    for node in list(ep.graph.nodes):
        if node.target not in targets or getattr(val(node), "dtype", None) != torch.float16:
            continue
        kind = op_base(node)
        in_float32(ep, node)
        done.append(f"{node.name}: float16 {kind} run in float32 and cast back")
    return done


def decompose(
    ep: ExportedProgram, nodes: list[torch.fx.Node], table: dict[Any, Any], what: str
) -> tuple[ExportedProgram, list[str]]:
    """Run ``table``'s decompositions over the program when ``nodes`` (the ones they are
    for) exist, reporting ``what`` was done to each of them."""
    if not nodes:
        return ep, []
    return ep.run_decompositions(table), [f"{n.name}: {what}" for n in nodes]


def mutable_buffer_readers(node: torch.fx.Node, program: Any) -> list[torch.fx.Node] | None:
    """For a buffer placeholder the program writes back: every node that reads it or a
    value written into it. None for a parameter, a constant or a buffer nobody writes."""
    signature = program.graph_signature
    target = signature.inputs_to_buffers.get(node.name)
    written = {name for name, buffer in signature.buffers_to_mutate.items() if buffer == target}
    if target is None or not written:
        return None
    return list(node.users) + [
        user for n in program.graph.nodes if n.name in written for user in n.users
    ]


def stop_requiring_grad(ep: ExportedProgram) -> list[str]:
    """Clear ``requires_grad`` on the program's placeholders (their recorded values) and on
    its parameters, as a ``torch.no_grad()`` export would have left them: a buffer that
    ExecuTorch writes with ``copy_`` must not require grad. Returns the names changed."""
    changed = []
    for node in ep.graph.nodes:
        fake = val(node)
        if node.op == "placeholder" and isinstance(fake, torch.Tensor) and fake.requires_grad:
            node.meta["val"] = fake.detach()
            changed.append(node.name)
    for tensor in ep.state_dict.values():
        if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
            tensor.requires_grad_(False)
    return changed


def reaches(node: torch.fx.Node, found: Any, depth: int = 16) -> bool:
    """Whether a node ``found(user)`` accepts is among ``node``'s users, transitively
    (breadth-first, ``depth`` steps)."""
    frontier, seen = [node], {node}
    for _ in range(depth):
        following = []
        for current in frontier:
            for user in current.users:
                if user in seen:
                    continue
                if found(user):
                    return True
                seen.add(user)
                following.append(user)
        if not following:
            return False
        frontier = following
    return False


def is_cast(node: Any) -> bool:
    """A dtype cast, as the ATen graph (``_to_copy``) or the edge graph
    (``_to_dim_order_copy``) spells it."""
    return isinstance(node, torch.fx.Node) and op_base(node) in ("_to_copy", "_to_dim_order_copy")


def delegate_owned(program: Any, settings: Any) -> set[str]:
    """The placeholders a Core ML delegate can take in as its own data rather than as
    inputs: what the stock partitioner's ``tag_constant_data`` tags (parameters, buffers
    never written, lifted constants), with ``take_over_constant_data`` only. A written
    buffer and a user input are always inputs."""
    if not settings.take_over_constant_data:
        return set()
    signature = program.graph_signature
    written = set(signature.buffers_to_mutate.values())
    owned = set(signature.inputs_to_parameters) | set(signature.inputs_to_lifted_tensor_constants)
    return owned | {name for name, fqn in signature.inputs_to_buffers.items() if fqn not in written}


def edge_cast(program: Any, value: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """A new edge-dialect cast (``_to_dim_order_copy``, as ``to_edge`` writes ``x.float()``)
    of ``value`` to ``dtype``, keeping its layout, right after it (after the last
    placeholder for a placeholder); untagged, so on the CPU unless a partition takes it."""
    from executorch.exir.dialects._ops import ops as exir_ops

    fake = val(value)
    graph = program.graph
    anchor = value
    if value.op == "placeholder":
        anchor = [n for n in graph.nodes if n.op == "placeholder"][-1]
    with graph.inserting_after(anchor):
        node = graph.call_function(
            exir_ops.edge.dim_order_ops._to_dim_order_copy.default,
            (value,),
            {"dtype": dtype, "dim_order": list(fake.dim_order())},
        )
    # where it comes from in the model, not which node it was made from (``from_node``):
    # an answer that moves ``value`` to the CPU by its provenance must not move this too
    node.meta = {k: value.meta[k] for k in ("stack_trace", "nn_module_stack") if k in value.meta}
    node.meta["val"] = fake.to(dtype)
    return node


def fake_mode(ep: ExportedProgram) -> Any:
    """The fake-tensor mode of the program's recorded values (to compute a new node's)."""
    for node in ep.graph.nodes:
        fake = val(node)
        if isinstance(fake, torch.Tensor) and hasattr(fake, "fake_mode"):
            return fake.fake_mode
    raise ValueError("the program has no fake tensor values")


def emit(ep: ExportedProgram, mode: Any, target: Any, args: tuple, kwargs: Any = None) -> Any:
    """Insert ``target(*args, **kwargs)`` at the graph's cursor, with its fake value."""
    kwargs = kwargs or {}
    node = ep.graph.call_function(target, args, kwargs)
    fake_args = torch.utils._pytree.tree_map(
        lambda a: val(a) if isinstance(a, torch.fx.Node) else a, (args, kwargs)
    )
    with mode:
        node.meta["val"] = target(*fake_args[0], **fake_args[1])
    return node
