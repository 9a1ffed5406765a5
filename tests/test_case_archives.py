"""The program cases' exports are made once per test session: per model builder (the cases
of one model at several targets share it), and shared by the session's xdist workers (the
PT2E-quantized models take over a minute each to quantize)."""

from __future__ import annotations

import uuid

import conftest
import pytest

torch = pytest.importorskip("torch")


def test_a_builder_is_exported_once_per_session():
    calls = []

    def make():
        calls.append(1)
        return torch.nn.Linear(2, 2), (torch.randn(1, 2),)

    key = f"test-{uuid.uuid4().hex}"
    first = conftest._archive_of(make, key)
    assert conftest._archive_of(make, key) == first and len(calls) == 1
    # Another worker of the session (no in-process cache) reads the shared export.
    assert conftest._archive_of.__wrapped__(make, key) == first and len(calls) == 1


def test_the_cases_of_one_model_at_several_targets_share_its_export():
    cases = conftest._cases()
    by_builder = {}
    for case in cases.values():
        by_builder.setdefault(case.make, []).append(case.id)
    shared = [ids for ids in by_builder.values() if len(ids) > 1]
    assert shared  # CML107's per-target cases, at least
    ids = shared[0]
    assert len({conftest._archive(i) for i in ids}) == 1
