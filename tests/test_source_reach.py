"""The source path against the program path on the model files in tests/fixtures/reach (a
KV-cache decoder, a float16 ViT, a padding-masked encoder, an int8-weight MLP with uint8
inputs; then, written after the source rules as held-out checks, a streaming conv and a
cross-attention reranker): each finding the source rules added for what only an export used
to show (CML101, CML106, CML201, CML310) is one the program path reports in the same file,
and (oracle) the stock lowering of each model fails with the crash one of those new
findings predicts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from coreml_lint.core.config import LintConfig  # noqa: E402
from coreml_lint.engine.exported import lint_exported_program  # noqa: E402
from coreml_lint.engine.source import lint_source_file  # noqa: E402
from coreml_lint.exporting.build import load_attribute  # noqa: E402

REACH = Path(__file__).parent / "fixtures" / "reach"
MODELS = sorted(p.name for p in REACH.glob("*.py"))
NEW_SOURCE_CODES = {"CML101", "CML106", "CML201", "CML310"}
CRASHES = {
    "CML101": r"KeyError: torch\.u?int8",
    "CML106": r"To use fp16 input, please set minimum deployment target to iOS16",
    "CML201": r"State model is supported only >= iOS18",
}


def _programs(name: str) -> dict:
    made = load_attribute((REACH / name).resolve(), "make_programs", REACH.resolve())()
    return {key: torch.export.export(module, args) for key, (module, args) in made.items()}


def _source_codes(name: str) -> set[str]:
    return {f.code for f in lint_source_file(REACH / name, LintConfig())}


@pytest.mark.parametrize("name", MODELS)
def test_new_source_findings_are_what_the_program_shows(name):
    path = (REACH / name).resolve()
    program_codes = {
        f.code
        for ep in _programs(name).values()
        for f in lint_exported_program(ep).findings
        if f.location is not None and Path(f.location.path).resolve() == path
    }
    added = _source_codes(name) & NEW_SOURCE_CODES
    assert added, f"{name}: the source path sees none of {sorted(NEW_SOURCE_CODES)}"
    assert added <= program_codes, f"{name}: source-only {sorted(added - program_codes)}"


@pytest.mark.oracle
@pytest.mark.parametrize("name", MODELS)
def test_the_stock_lowering_fails_as_a_source_finding_says(name, tmp_path):
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.lowering.check import lower_with_stock_partitioner

    added = _source_codes(name) & NEW_SOURCE_CODES
    expected = [CRASHES[c] for c in added if c in CRASHES]
    if not expected:
        pytest.skip(f"{name}: its new source finding is a silent one (the program oracle's)")
    for key, program in _programs(name).items():
        archive = tmp_path / f"{key}.pt2"
        torch.export.save(program, archive)
        outcome = lower_with_stock_partitioner(archive, PartitionerSettings())
        assert not outcome["lowers"], f"{name}: lowers, but the source path predicts a crash"
        assert any(re.search(p, outcome["outcome"]) for p in expected), outcome["outcome"]
