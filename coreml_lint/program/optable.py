"""Static facts about ops, read from the generated ``data/optable.json``.

See ``coreml_lint/stack/optable_gen.py`` for why the table exists and how it is made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("data") / "optable.json"

# coremltools frontend/torch/utils.py ``sanitize_op_kind``: the registry key of an op name.
_DROPPED_PREFIXES = {"aten", "prim"}
_DROPPED_SUFFIXES = {"default", "int", "tensor", "tensor_mode", "scalar", "tensor_scalar"}


def sanitize_op_kind(op_kind: str) -> str:
    """The coremltools registry key for an op name, as its support test computes it."""
    op_kind = op_kind.lower()
    if op_kind.startswith("__") and op_kind.endswith("__"):
        op_kind = op_kind[2:-2]
    for sep in ("::", "."):
        split = op_kind.split(sep)
        start = 1 if split[0] in _DROPPED_PREFIXES and len(split) > 1 else 0
        stop = -1 if split[-1] in _DROPPED_SUFFIXES and len(split) - start > 1 else len(split)
        op_kind = sep.join(split[start:stop])
    return op_kind


@dataclass
class OpTable:
    generated_with: dict[str, str]
    coremltools_registry: frozenset[str]
    portable_kernels: frozenset[str]
    core_aten: frozenset[str]
    cia: frozenset[str]
    cia_preserved: frozenset[str]
    decomposed_by_default: frozenset[str]
    view: frozenset[str]
    view_copy: dict[str, str]
    with_out_variant: frozenset[str]

    def coreml_has_converter(self, name: str) -> bool:
        """coremltools' ``is_torch_fx_node_supported``: a converter exists for this name."""
        return sanitize_op_kind(name) in self.coremltools_registry

    def has_portable_kernel(self, edge_name: str) -> bool:
        """Whether the pip ExecuTorch portable runtime has a kernel for the op (any overload).

        ``edge_name`` is namespaced: ``aten.amax.default``,
        ``dim_order_ops._clone_dim_order.default``.
        """
        namespace, _, rest = edge_name.partition(".")
        return f"{namespace}::{rest.split('.')[0]}" in self._portable_bases

    @cached_property
    def _portable_bases(self) -> frozenset[str]:
        return frozenset(k.split(".")[0] for k in self.portable_kernels)


@cache
def load_optable(path: Path = TABLE_PATH) -> OpTable:
    data = json.loads(path.read_text())
    return OpTable(
        generated_with=dict(data["generated_with"]),
        coremltools_registry=frozenset(data["coremltools_registry"]),
        portable_kernels=frozenset(data["portable_kernels"]),
        core_aten=frozenset(data["core_aten"]),
        cia=frozenset(data["cia"]),
        cia_preserved=frozenset(data["cia_preserved"]),
        decomposed_by_default=frozenset(data["decomposed_by_default"]),
        view=frozenset(data["view"]),
        view_copy=dict(data["view_copy"]),
        with_out_variant=frozenset(data["with_out_variant"]),
    )
