from __future__ import annotations

import io
import logging
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("TQDM_DISABLE", "1")
logging.getLogger("coremltools").setLevel(logging.ERROR)

from cases import BY_ID  # noqa: E402

from coreml_lint.program.placement import PartitionerSettings  # noqa: E402


@cache
def _archive(case_id: str) -> bytes:
    import torch

    model, inputs = BY_ID[case_id].make()
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(model, inputs), buffer)
    return buffer.getvalue()


def exported(case_id: str) -> Any:
    """A case's exported program: exported once per process and loaded afresh for each use,
    because lowering mutates the program it is given."""
    import torch

    return torch.export.load(io.BytesIO(_archive(case_id)))


def settings_of(case_id: str) -> PartitionerSettings:
    s = BY_ID[case_id].settings
    return PartitionerSettings(
        minimum_deployment_target=s.get("ios") or 15,
        skip_ops_for_coreml_delegation=tuple(s.get("skip") or ()),
        take_over_mutable_buffer=s.get("take_over_mutable_buffer", True),
        take_over_constant_data=s.get("take_over_constant_data", True),
        lower_full_graph=s.get("lower_full_graph", False),
    )


@pytest.fixture
def export_case():
    return exported


@pytest.fixture
def case_settings():
    return settings_of
