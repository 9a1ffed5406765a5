"""Generate ``data/optable.json`` from the installed torch, executorch and coremltools.

Why a checked-in table: the stock ``CoreMLPartitioner`` decides placement by op *name* (coremltools'
converter registry plus executorch's refusal list,
docs/background.md#the-support-test-reads-op-names), and ``to_edge_transform_and_lower`` decides
decomposition from torch's op metadata. Both are static facts of the installed releases, so we
record them once and the light linting path predicts placement without importing any of the three
packages (importing coremltools alone takes ~10 s). ``tests/test_optable.py`` regenerates the table
and fails on drift.

Run: ``python -m coreml_lint.stack.optable_gen [--check]``.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

from coreml_lint.core.files import regenerate

# The table is an artifact of this room that the light layer reads: it lives with its reader.
TABLE_PATH = Path(__file__).parents[1] / "program" / "data" / "optable.json"


def _short(op: Any) -> str:
    """``torch.ops.aten.add.Tensor`` -> ``add.Tensor`` (the ATen-stage ``__name__``)."""
    return op.__name__


def _has_out_variant(op: Any) -> bool | None:
    """Whether ExecuTorch's emitter finds this overload's out variant (``to_out_variant``,
    which matches schemas: ``where.self_out`` is ``where.self``'s, not ``where.default``'s),
    so a node of it kept whole on the CPU gets a kernel; None where the lookup itself fails
    (an in-place overload, or ``pow``'s, which trip assertions in its schema index)."""
    from executorch.exir.operator.convert import to_out_variant

    try:
        to_out_variant(op)
    except RuntimeError as error:
        if "Missing out variant" in str(error):
            return False
        return None
    except Exception:
        return None
    return True


def build_table() -> dict[str, Any]:
    import logging

    logging.disable(logging.WARNING)
    import coremltools.converters.mil.frontend.torch.ops  # noqa: F401  (fills the registry)
    import executorch.backends.apple.coreml.compiler.torch_ops  # noqa: F401  (executorch aliases)
    import torch
    from coremltools.converters.mil.frontend.torch.torch_op_registry import (
        _TORCH_OPS_REGISTRY,
    )
    from executorch.exir.program._program import _default_decomposition_table
    from executorch.extension.pybindings import portable_lib
    from torch._export.utils import _check_valid_to_preserve, _is_cia_op

    registry = sorted(_TORCH_OPS_REGISTRY.name_to_func_mapping)
    decomposed = {_short(op) for op in _default_decomposition_table() if hasattr(op, "__name__")}

    core: set[str] = set()
    cia: set[str] = set()
    cia_preserved: set[str] = set()
    view: set[str] = set()
    with_out_variant: set[str] = set()
    view_copy: dict[str, str] = {}

    names = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")]
    for full in sorted(set(names)):
        base, _, overload = full[len("aten::") :].partition(".")
        packet = getattr(torch.ops.aten, base, None)
        if packet is None:
            continue
        overload = overload or "default"
        try:
            op = getattr(packet, overload)
        except (AttributeError, RuntimeError):
            continue
        name = _short(op)
        if torch.Tag.core in op.tags:
            core.add(name)
        if _is_cia_op(op):
            cia.add(name)
            try:
                if _check_valid_to_preserve(op):
                    cia_preserved.add(name)
            except Exception:  # pragma: no cover - torch internals vary by op
                pass
        args = op._schema.arguments
        if args and args[0].alias_info is not None and not args[0].alias_info.is_write:
            view.add(name)
            copy_packet = getattr(torch.ops.aten, base + "_copy", None)
            if copy_packet is not None and overload in copy_packet.overloads():
                view_copy[name] = f"{base}_copy.{overload}"
        found = _has_out_variant(op)
        if found is None:  # ExecuTorch could not tell: an out overload of the name at all
            found = any(o == "out" or o.endswith("_out") for o in packet.overloads())
        if overload == "out" or overload.endswith("_out") or found:
            with_out_variant.add(name)

    return {
        "generated_with": {
            pkg: metadata.version(pkg) for pkg in ("torch", "executorch", "coremltools")
        },
        "coremltools_registry": registry,
        "portable_kernels": sorted(portable_lib._get_operator_names()),
        "core_aten": sorted(core),
        "cia": sorted(cia),
        "cia_preserved": sorted(cia_preserved),
        "decomposed_by_default": sorted(decomposed),
        "view": sorted(view),
        "view_copy": dict(sorted(view_copy.items())),
        "with_out_variant": sorted(with_out_variant),
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=0, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return regenerate(argv, __doc__ or "", TABLE_PATH, lambda: render(build_table()))


if __name__ == "__main__":
    raise SystemExit(main())
