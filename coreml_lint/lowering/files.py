"""Reading a ``.pt2`` for ``coreml-lint lower`` and writing the ``.pte`` it makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coreml_lint.core.errors import InputError
from coreml_lint.core.files import write_atomically

# Where custom ops that exported programs commonly reference are registered: torch.export.load
# needs them registered before it can deserialize their nodes.
KNOWN_REGISTRATIONS = {
    "quantized_decomposed": "torch.ao.quantization.fx._decomposed",
    "torchao": "torchao",
    "transformers::grouped_mm_fallback": "transformers.integrations.moe",
}
# Libraries whose ops a program of ours may carry and that executorch itself installs: their
# registrations are imported as needed (what `lower` gets anyway by importing executorch).
AUTO_IMPORTED = ("quantized_decomposed", "torchao")
STANDARD_NAMESPACES = {"aten", "prim", "prims", "higher_order", "dim_order_ops", "_operator"}


def load_program(path: Path, imports: tuple[str, ...] = ()) -> Any:
    """``torch.export.load``, after the light reader has vetted the archive, the modules in
    ``imports`` are imported, and every custom op the program uses is checked to be
    registered (a missing one is named, with the import that registers it when known)."""
    import torch

    _vet(path, imports)
    try:
        return torch.export.load(path)
    except Exception as exc:
        raise InputError(f"{path}: torch.export.load failed: {type(exc).__name__}: {exc}") from None


def _vet(path: Path, imports: tuple[str, ...]) -> None:
    import contextlib
    import importlib

    from coreml_lint.program.pt2 import read_pt2

    graphs = read_pt2(path)  # one clear line for a corrupt or foreign archive, before torch
    used = {op.split("::")[0] for g in graphs for op in _custom_ops(g)}
    for namespace in ("quantized_decomposed", *(n for n in AUTO_IMPORTED if n in used)):
        with contextlib.suppress(ImportError):  # not installed: the missing op is named below
            importlib.import_module(KNOWN_REGISTRATIONS[namespace])
    for module in imports:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise InputError(f"--import {module}: {type(exc).__name__}: {exc}") from None
    missing = sorted({op for g in graphs for op in _custom_ops(g) if not _registered(op)})
    if missing:
        raise InputError(f"{path}: {_missing_ops_message(missing)}")


def load_methods(paths: list[Path], imports: tuple[str, ...] = ()) -> dict[str, Any]:
    """``{method: ExportedProgram}`` of several archives (or one holding several programs),
    named as ``coreml-lint --methods`` names them (``program/methods.py``)."""
    from coreml_lint.program.methods import method_names, read_methods
    from coreml_lint.program.pt2 import read_pt2

    read_methods(paths)  # vets every archive and the names, before torch
    programs: dict[str, Any] = {}
    for path in paths:
        graphs = read_pt2(path)
        if len(graphs) == 1:
            programs[path.stem] = load_program(path, imports)
            continue
        loaded = _load_archive_programs(path, imports)
        for graph, name in zip(graphs, method_names(path, graphs), strict=True):
            programs[name] = loaded[graph.method]
    return programs


def _load_archive_programs(path: Path, imports: tuple[str, ...]) -> dict[str, Any]:
    """Every program of an archive written by ``package_pt2`` with a dict of programs."""
    from torch.export.pt2_archive._package import load_pt2

    _vet(path, imports)
    try:
        return dict(load_pt2(path).exported_programs)
    except Exception as exc:
        raise InputError(f"{path}: cannot load its programs: {type(exc).__name__}: {exc}") from None


def _custom_ops(graph: Any) -> set[str]:
    """``namespace::op.overload`` of every node whose op is not one of torch's own."""
    ops = set()
    for node in graph.nodes:
        namespace, _, rest = node.target.partition(".")
        if rest and namespace not in STANDARD_NAMESPACES:
            ops.add(f"{namespace}::{rest}")
    return ops


def _registered(op: str) -> bool:
    import torch

    namespace, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        return overload in ("", "default") or hasattr(packet, overload)
    except (AttributeError, RuntimeError):
        return False


def _missing_ops_message(ops: list[str]) -> str:
    hints = []
    for op in ops:
        base = op.split(".")[0]
        module = KNOWN_REGISTRATIONS.get(base) or KNOWN_REGISTRATIONS.get(base.split("::")[0])
        hints.append(
            f"{op} (registered by `--import {module}`)"
            if module
            else f"{op} (pass `--import MODULE` with the module that registers it, often "
            f"part of the package `{base.split('::')[0]}`)"
        )
    return "the program uses custom ops no imported module registers: " + "; ".join(hints)


def write_pte(path: Path, data: bytes) -> None:
    """Write the program in one rename: a failed run leaves no partial .pte."""
    write_atomically(path, data, keep_mode=False)
