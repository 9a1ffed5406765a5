"""Inputs for verification: the user's own tensors, else the program's own example inputs
(saved in the ``.pt2`` by ``torch.export.save``), else seeded random tensors shaped like the
program's user inputs.

The example inputs come first because value-range pitfalls only show on realistic values:
an image normalised to [0, 255], token ids, a padding mask. Random inputs are the fallback
for a program saved without them.

Float inputs are standard normal with two small-magnitude entries (+-1e-3), where an op
that is only approximately a division or a logarithm shows. Integer inputs stay within the
range every index consumer accepts (embedding table rows, ``index_select``/``gather``/
``index``/``index_put`` bounds, scatter targets, ``one_hot`` classes), found by following
the input through shape-only ops and into delegates; they include 0 (the usual padding
row) and the largest valid index. Integers with no index consumer take small values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

SMALL_INT_RANGE = 16
# ops that only move or reshape values: an index flowing through them is still an index
PASS_THROUGH = {
    "view",
    "view_copy",
    "_unsafe_view",
    "reshape",
    "unsqueeze",
    "unsqueeze_copy",
    "squeeze",
    "squeeze_copy",
    "permute",
    "permute_copy",
    "expand",
    "expand_copy",
    "clone",
    "_to_copy",
    "_to_dim_order_copy",
    "_clone_dim_order",
    "slice",
    "slice_copy",
    "select",
    "select_copy",
    "cat",
    "stack",
    "flatten",
    "contiguous",
    "alias",
    "alias_copy",
    "detach",
    "repeat",
    "t",
    "t_copy",
    "transpose",
    "transpose_copy",
    "narrow",
    "split",
    "split_with_sizes",
    "split_with_sizes_copy",
    "split_copy",
    "unbind",
    "unbind_copy",
    "getitem",
    "to",
}


def load_inputs(path: str | Path) -> tuple[Any, ...]:
    """User inputs saved with ``torch.save(tuple_of_tensors, path)`` (never unpickles code)."""
    try:
        loaded = torch.load(path, weights_only=True)
    except Exception as exc:  # not a file torch.save wrote, or it holds more than tensors
        raise ValueError(
            f"{path}: not a torch.save'd tuple of tensors (torch.load: {type(exc).__name__})"
        ) from None
    if isinstance(loaded, torch.Tensor):
        return (loaded,)
    if not isinstance(loaded, (tuple, list)):
        raise ValueError(f"{path}: expected a tuple of tensors, got {type(loaded).__name__}")
    return tuple(loaded)


def check_given_inputs(ep: ExportedProgram, given: list[Any]) -> None:
    """Raise ``ValueError`` naming the first given input that cannot feed its placeholder
    (another dtype, rank, or a static size that differs)."""
    nodes = user_input_nodes(ep)
    if len(given) != len(nodes):
        raise ValueError(f"the program takes {len(nodes)} user inputs, {len(given)} were given")
    for position, (value, node) in enumerate(zip(given, nodes, strict=True)):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"input {position} ({node.name}) must be a tensor")
        shape = list(val.shape)
        static = all(
            not isinstance(d, int) or d == got for d, got in zip(shape, value.shape, strict=False)
        )
        if value.dtype != val.dtype or value.dim() != len(shape) or not static:
            want = [d if isinstance(d, int) else "?" for d in shape]
            raise ValueError(
                f"input {position} ({node.name}) is {str(value.dtype)[6:]}{list(value.shape)}; "
                f"the program takes {str(val.dtype)[6:]}{want}"
            )


def user_input_nodes(ep: ExportedProgram) -> list[torch.fx.Node]:
    by_name = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    return [
        by_name[spec.arg.name]
        for spec in ep.graph_signature.input_specs
        if spec.kind.name == "USER_INPUT"
    ]


def random_inputs(ep: ExportedProgram, seed: int = 0, *, use_examples: bool = True) -> list[Any]:
    """One seeded input per user input of ``ep`` (a flat list, in the graph's order). A
    program with symbolic (dynamic) dimensions gets its own example inputs' shapes; an
    integer or bool input is the program's own example when it has one (token ids,
    positions and padding masks valid for the model, which random values may not be)."""
    generator = torch.Generator().manual_seed(seed)
    examples = _example_inputs(ep)
    inputs = []
    for position, node in enumerate(user_input_nodes(ep)):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            inputs.append(val)
            continue
        shape = list(val.shape)
        if not all(isinstance(d, int) for d in shape):
            if examples is not None and position < len(examples):
                shape = list(examples[position].shape)
            else:  # an edge program has no examples: the sizes export saw (the hints)
                shape = [_hint(d) for d in shape]
            if any(d is None for d in shape):
                raise ValueError(f"input {node.name} has a dynamic shape: pass inputs")
        own = use_examples and examples is not None and position < len(examples)
        if not val.dtype.is_floating_point and own:
            inputs.append(examples[position])  # the program's own indices, masks, positions
            continue
        inputs.append(_tensor(val.dtype, [int(d) for d in shape], index_bound(node), generator))
    return inputs


def default_inputs(ep: ExportedProgram, seed: int = 0) -> tuple[list[Any], list[str]]:
    """(inputs, how each was made: "example" or "random") for a program verified without
    the user's inputs: its own example inputs when it saved one per user input, else
    seeded random ones (integer inputs still from the examples when there are any)."""
    examples = _example_inputs(ep)
    nodes = user_input_nodes(ep)
    if (
        examples is not None
        and len(examples) == len(nodes)
        and all(_fits(example, node) for example, node in zip(examples, nodes, strict=True))
    ):
        return [e.clone() for e in examples], ["example"] * len(examples)
    made = random_inputs(ep, seed)
    how = []
    for position, value in enumerate(made):
        own = examples is not None and position < len(examples) and value is examples[position]
        how.append("example" if own else "random")
    return made, how


def _fits(example: Any, node: torch.fx.Node) -> bool:
    """Whether an example tensor can feed the placeholder (same dtype and rank)."""
    val = node.meta.get("val")
    return (
        isinstance(example, torch.Tensor)
        and isinstance(val, torch.Tensor)
        and example.dtype == val.dtype
        and example.dim() == val.dim()
    )


def _hint(dim: Any) -> int | None:
    """The value a symbolic size had at export, when the program still knows it."""
    if isinstance(dim, int):
        return dim
    hint = getattr(getattr(dim, "node", None), "hint", None)
    return int(hint) if hint is not None else None


def _example_inputs(ep: ExportedProgram) -> list[Any] | None:
    examples = getattr(ep, "example_inputs", None)
    if not examples:
        return None
    flat, _ = torch.utils._pytree.tree_flatten(examples)
    return [v for v in flat if isinstance(v, torch.Tensor)]


def _tensor(dtype: torch.dtype, shape: list[int], bound: int | None, gen: Any) -> torch.Tensor:
    if dtype.is_floating_point:
        value = torch.randn(shape, generator=gen)
        flat = value.view(-1)
        if flat.numel() >= 4:
            flat[1], flat[2] = 1e-3, -1e-3
        return value.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    high = bound if bound is not None else SMALL_INT_RANGE
    value = torch.randint(0, max(high, 1), shape, generator=gen)
    flat = value.view(-1)
    if bound is not None and flat.numel() >= 2:
        flat[0], flat[-1] = 0, bound - 1
    return value.to(dtype)


def _base(target: Any) -> str:
    name = target.name() if hasattr(target, "name") and callable(target.name) else None
    if name is None:
        name = getattr(target, "__name__", str(target))
    return name.split("::")[-1].split(".")[0]


def _shape(node: Any, dim: int) -> int | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if isinstance(val, torch.Tensor) and val.dim() > 0:
        return int(val.shape[dim])
    return None


def _bound_at(user: torch.fx.Node, node: torch.fx.Node) -> int | None:
    """The exclusive upper bound ``user`` puts on the values of its argument ``node``."""
    op, args = _base(user.target), user.args
    if op == "embedding" and len(args) > 1 and args[1] is node:
        return _shape(args[0], 0)
    indexed = ("index_select", "gather", "index_copy", "index_add", "index_fill")
    if op in indexed and len(args) > 2 and args[2] is node:
        return _shape(args[0], int(args[1]))
    if op in ("scatter", "scatter_add", "scatter_reduce") and len(args) > 2 and args[2] is node:
        return _shape(args[0], int(args[1]))
    if op in ("index", "index_put", "_unsafe_index", "_unsafe_index_put") and len(args) > 1:
        for position, index in enumerate(args[1]):
            if index is node:
                return _shape(args[0], position)
    if op == "one_hot" and len(args) > 1 and int(args[1]) > 0:
        return int(args[1])
    return None


def index_bound(node: torch.fx.Node, seen: set[int] | None = None) -> int | None:
    """The tightest bound any index consumer downstream of ``node`` puts on its values."""
    seen = seen if seen is not None else set()
    if id(node) in seen:
        return None
    seen.add(id(node))
    bounds = []
    for user in node.users:
        if user.op != "call_function":
            continue
        if "executorch_call_delegate" in str(user.target):
            bounds.append(_delegate_bound(user, node, seen))
            continue
        bounds.append(_bound_at(user, node))
        if _base(user.target) in PASS_THROUGH:
            bounds.append(index_bound(user, seen))
    found = [b for b in bounds if b is not None and b > 0]
    return min(found) if found else None


def _delegate_bound(call: torch.fx.Node, node: torch.fx.Node, seen: set[int]) -> int | None:
    lowered = getattr(call.graph.owning_module, str(call.args[0].target), None)
    original = getattr(lowered, "original_module", None)
    if original is None:
        return None
    placeholders = user_input_nodes(original)
    bounds = [
        index_bound(placeholders[i], seen)
        for i, arg in enumerate(call.args[1:])
        if arg is node and i < len(placeholders)
    ]
    found = [b for b in bounds if b is not None]
    return min(found) if found else None
