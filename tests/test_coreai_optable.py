"""Core AI's op table (``program/data/coreai_optable.json``: which ATen ops coreai-torch
converts, which its decompositions remove), read from coreai-torch itself, and CAI603, which
reads it torch-free. The table must be what the installed coreai-torch says (drift), and
CAI603 must flag exactly the ops coreai-torch's own check rejects, on every program case of
the Core AI rules and on clean models: no op the decompositions remove is flagged."""

from __future__ import annotations

import re

import pytest

from coreml_lint.program.coreai_optable import load_coreai_optable


def test_the_table_answers_torch_free():
    table = load_coreai_optable()
    assert table.generated_with["coreai-torch"] == "0.4.3"
    assert table.without_converter("aten.remainder.Scalar")  # measured: conversion fails
    assert not table.without_converter("aten.fmod.Scalar")  # converted
    assert not table.without_converter("aten.isfinite.default")  # decomposed first
    assert not table.without_converter("aten.reshape.default")  # always decomposed
    assert not table.without_converter("aten._assert_scalar.default")  # stripped
    assert not table.without_converter("aten.silu.default")  # kept whole, then converted


def _needs_coreai_torch():
    pytest.importorskip("torch")
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")


def test_the_table_is_what_the_installed_coreai_torch_says():
    _needs_coreai_torch()
    import json

    from coreml_lint.coreai_stack.optable_gen import TABLE_PATH, build_table, render

    built, shipped = build_table(), json.loads(TABLE_PATH.read_text())
    drift = {
        key: (
            sorted(set(built[key]) - set(shipped[key])),
            sorted(set(shipped[key]) - set(built[key])),
        )
        for key in built
        if built[key] != shipped[key]
    }
    assert not drift, f"stale (python -m coreml_lint.coreai_stack.optable_gen): {drift}"
    assert TABLE_PATH.read_text() == render(built)


def _rejected(ep) -> set[str]:
    """The ATen ops coreai-torch's own check before converting rejects, after its
    decompositions (what ``TorchConverter.add_exported_program`` raises)."""
    import coreai_torch
    from coreai_torch._validate import validate_exported_program

    try:
        validate_exported_program(ep.run_decompositions(coreai_torch.get_decomp_table()), {})
    except ValueError as exc:
        found = re.search(r"unsupported ATen ops: (.*?)\. Use", str(exc))
        assert found, exc
        return set(found.group(1).split(", "))
    return set()


def _programs():
    """Every program case of the Core AI rules, and the clean models of the Core ML tests
    (a transformer block, a CNN, the ones spanning rules)."""
    from coreml_lint.rulekit.examples import cases_of
    from coreml_lint.rules import all_rules

    cases = [c for rule in all_rules("coreai") for c in cases_of(rule.__module__)]
    return cases + [c for c in cases_of("cases") if not c.expect]


@pytest.mark.oracle
def test_cai603_flags_exactly_what_coreai_torch_rejects():
    _needs_coreai_torch()
    import cases  # noqa: F401  (declares the clean models)
    import torch

    from coreml_lint.core.config import LintConfig
    from coreml_lint.engine.exported import lint_exported_program

    checked = 0
    for case in _programs():
        torch.manual_seed(0)
        model, inputs = case.make()
        ep = torch.export.export(model.eval(), inputs)
        findings = lint_exported_program(ep, LintConfig(target="coreai")).findings
        flagged = {g.op for f in findings if f.code == "CAI603" for g in (f, *f.merged)}
        assert flagged == _rejected(ep), case.id
        checked += 1
    assert checked > 40
