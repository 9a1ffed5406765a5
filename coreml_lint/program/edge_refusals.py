"""Which composite ops ExecuTorch's edge verifier refuses once ``to_edge`` has decomposed
them: ``program/data/edge_refusals.json``, measured by ``python -m coreml_lint.sweep edges``
(each op's base call lowered with the stock partitioner) and read here without torch."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

REFUSALS_PATH = Path(__file__).with_name("data") / "edge_refusals.json"


@cache
def refused_after_decomposition(path: Path = REFUSALS_PATH) -> dict[str, str]:
    """Op (``slogdet.default``) -> the piece the verifier names (``aten._linalg_slogdet.
    default``); empty where the file was never made."""
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text())["refused"])
