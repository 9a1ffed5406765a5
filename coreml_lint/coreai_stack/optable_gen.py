"""Generate ``program/data/coreai_optable.json`` from the installed coreai-torch and torch:
which ATen ops coreai-torch converts, and which ones its decomposition step removes first.

Why a checked-in table: coreai-torch converts a program by looking each node's op up in its
converter registry (``_aten_to_core_resolver``, keyed ``remainder.Scalar``), after
``run_decompositions(coreai_torch.get_decomp_table())``; an ATen op left in the graph
without an entry stops the conversion (``ValueError: The exported program contains
unsupported ATen ops: aten.remainder.Scalar``, ``coreai_torch/_validate.py``). Both are
static facts of the installed releases, so they are recorded once and the light lint path
(CAI603) reads them without importing torch or coreai-torch. ``tests/test_coreai_optable.py``
regenerates the table and fails on drift.

What the table holds, each an ATen op name as a node's target spells it
(``aten.remainder.Scalar``):

- ``converters``: the ops with a converter (the registry's keys);
- ``kept_whole``: the ops ``get_decomp_table()`` takes out of torch's default table so they
  reach the converter whole (``_COMPOSITE_OPS``: ``silu``, ``scaled_dot_product_attention``);
- ``decomposed``: the ops ``run_decompositions(get_decomp_table())`` removes from the
  graph: the table's own ops, and the CompositeImplicit ops torch decomposes whatever the
  table says (``reshape``, ``to.dtype``), except those kept whole;
- ``stripped``: the assertion ops the converter drops before converting.

Run: ``python -m coreml_lint.coreai_stack.optable_gen [--check]``.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

from coreml_lint.core.files import regenerate

# The table is an artifact of this room that the light layer reads: it lives with its reader.
TABLE_PATH = Path(__file__).parents[1] / "program" / "data" / "coreai_optable.json"
# The assertion ops coreai-torch's validator skips and ``preprocess_graph`` erases (both
# spell the set out inside a function, so it is copied here from coreai_torch/_validate.py).
STRIPPED = (
    "aten._assert_async.msg",
    "aten._assert_scalar.default",
    "aten._assert_tensor_metadata.default",
    "aten.sym_constrain_range.default",
    "aten.sym_constrain_range_for_size.default",
)


def build_table() -> dict[str, Any]:
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")  # coreai-torch's torch-version warning
    import coreai_torch
    from coreai_torch._aten_to_core import _aten_to_core_resolver
    from coreai_torch._decomp import _COMPOSITE_OPS

    kept_whole = {str(op) for op in _COMPOSITE_OPS}
    # ATen's ops only: what other imported libraries register (c10d_functional) varies
    table = {str(op) for op in coreai_torch.get_decomp_table() if str(op).startswith("aten.")}
    return {
        "generated_with": {pkg: metadata.version(pkg) for pkg in ("torch", "coreai-torch")},
        # keys without an overload are Python operators (``getitem``), never ATen targets
        "converters": sorted(f"aten.{key}" for key in _aten_to_core_resolver if "." in key),
        "kept_whole": sorted(kept_whole),
        "decomposed": sorted((table | _always_decomposed()) - kept_whole),
        "stripped": list(STRIPPED),
    }


def _always_decomposed() -> set[str]:
    """The CompositeImplicit ATen ops ``run_decompositions`` decomposes whatever its table
    holds: those torch cannot preserve (it preserves a functional one only when the table
    leaves it out)."""
    import torch
    from torch._export.utils import _check_valid_to_preserve, _is_cia_op

    found = set()
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        base, _, overload = full[len("aten::") :].partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, base), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        try:
            preserved = _check_valid_to_preserve(op)
        except Exception:  # pragma: no cover - torch internals vary by op
            preserved = False
        if _is_cia_op(op) and not preserved:
            found.add(str(op))
    return found


def render(table: dict[str, Any]) -> str:
    import json

    return json.dumps(table, indent=0) + "\n"


def main(argv: list[str] | None = None) -> int:
    return regenerate(argv, __doc__ or "", TABLE_PATH, lambda: render(build_table()))


if __name__ == "__main__":
    raise SystemExit(main())
