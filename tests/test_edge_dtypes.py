"""CML606 carries ExecuTorch's edge dtype table as a list of op names; it must be the
installed one's (executorch/exir/dialects/edge/edge.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coreml_lint.rules.cml606_edge_dtype_rejected import _COMPLEX_ONES, EDGE_TABLE_OPS


def _table() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    executorch = pytest.importorskip("executorch")
    root = Path(next(iter(executorch.__path__)))  # a namespace package: no __file__
    path = root / "exir" / "dialects" / "edge" / "edge.yaml"
    return yaml.safe_load(path.read_text())


def _name(entry: dict) -> str:
    op = entry["func"].split("::")[1]
    return op if "." in op else f"{op}.default"


def test_the_edge_table_is_executorchs():
    table = _table()
    assert {_name(e) for e in table} == EDGE_TABLE_OPS
    complex_ = {_name(e) for e in table if "Complex" in str(e["type_alias"])}
    assert complex_ == _COMPLEX_ONES
