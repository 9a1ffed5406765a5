"""Reading a ``.pt2`` for ``coreml-lint lower`` and writing the ``.pte`` it makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coreml_lint.core.errors import InputError
from coreml_lint.core.files import write_atomically


def load_program(path: Path) -> Any:
    """``torch.export.load``, after the light reader has vetted the archive."""
    import torch

    from coreml_lint.program.pt2 import read_pt2

    read_pt2(path)  # one clear line for a corrupt or foreign archive, before torch sees it
    # Custom-op libraries that exported programs commonly reference; torch.export.load needs
    # them registered before it can deserialize their nodes.
    import torch.ao.quantization.fx._decomposed

    try:
        return torch.export.load(path)
    except Exception as exc:
        raise InputError(f"{path}: torch.export.load failed: {type(exc).__name__}: {exc}") from None


def write_pte(path: Path, data: bytes) -> None:
    """Write the program in one rename: a failed run leaves no partial .pte."""
    write_atomically(path, data, keep_mode=False)
