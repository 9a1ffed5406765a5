"""Eager checks: does a rewritten program compute what the original computed?

``coreml-lint lower`` keeps a rule's rewrite only when the rewritten program gives the same
outputs as the program it was given, on the program's example inputs (or seeded random
inputs shaped like them), within the rule's tolerance.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.export import ExportedProgram

from coreml_lint.rulekit.fx import FLOATS, aten, val

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


def random_inputs(ep: ExportedProgram, seed: int = 0) -> Inputs | None:
    """Positional and keyword inputs shaped like the program's: its example inputs, else
    random ones arranged by the program's own input spec (a program exported with keyword
    inputs, such as transformers' static-cache wrapper, is called with keywords)."""
    examples = getattr(ep, "example_inputs", None)
    if examples:
        args, kwargs = examples
        return tuple(args), dict(kwargs)
    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            continue
        fake = val(next(n for n in ep.graph.nodes if n.name == spec.arg.name))
        if not isinstance(fake, torch.Tensor) or not all(isinstance(d, int) for d in fake.shape):
            return None
        if fake.dtype in FLOATS:
            inputs.append(torch.randn(fake.shape, generator=generator).to(fake.dtype))
        elif fake.dtype == torch.bool:
            inputs.append(torch.randint(0, 2, fake.shape, generator=generator).bool())
        else:
            inputs.append(torch.randint(0, 4, fake.shape, generator=generator).to(fake.dtype))
    in_spec = ep.call_spec.in_spec if ep.call_spec else None
    if in_spec is None:
        return tuple(inputs), {}
    args, kwargs = torch.utils._pytree.tree_unflatten(inputs, in_spec)
    return tuple(args), dict(kwargs)


@contextmanager
def _mutable_buffers_restored(*programs: ExportedProgram) -> Iterator[None]:
    """``ep.module()`` runs on the program's own buffer tensors, so an eager run would leave
    a KV cache or a counter changed in the caller's program; put every mutated buffer back."""
    saved = []
    for ep in programs:
        for name in set(ep.graph_signature.buffers_to_mutate.values()):
            tensor = ep.state_dict.get(name, ep.constants.get(name))
            if isinstance(tensor, torch.Tensor):
                saved.append((tensor, tensor.clone()))
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, before in saved:
                tensor.copy_(before)


_UNDEFINED_VALUES = {aten.empty_like.default, aten.empty.memory_format, aten.new_empty.default}


def outputs_match(a: ExportedProgram, b: ExportedProgram, inputs: Inputs, tol: float) -> bool:
    """Same outputs in eager, from the same buffer state, which is restored afterwards.

    ``tol`` bounds the difference both absolutely and relatively (``|x - y| <= tol +
    tol * |y|``): near zero it is an absolute bound, and a large output may differ by the
    same fraction of itself, since one float32 unit of a value of 1e8 is already 8. A
    program that reads ``empty*`` memory has undefined values, so for it only shapes and
    dtypes are compared."""
    shapes_only = any(n.target in _UNDEFINED_VALUES for n in a.graph.nodes)
    args, kwargs = inputs
    with torch.no_grad(), _mutable_buffers_restored(a, b):
        left = torch.utils._pytree.tree_leaves(a.module()(*args, **kwargs))
        right = torch.utils._pytree.tree_leaves(b.module()(*args, **kwargs))
    if len(left) != len(right):
        return False
    for x, y in zip(left, right, strict=True):
        if not isinstance(x, torch.Tensor):
            if x != y:
                return False
            continue
        if x.shape != y.shape:
            return False
        if x.dtype != y.dtype and not (x.dtype in FLOATS and y.dtype in FLOATS):
            return False
        if shapes_only:
            continue
        if not torch.allclose(x.double(), y.double(), atol=tol, rtol=tol, equal_nan=True):
            return False
    return True
