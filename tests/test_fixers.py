"""Fixers, end to end: a model file that crashes or mislowers with the stock partitioner,
``coreml-lint --fix --unsafe-fixes`` on a copy, and the fixed file, imported and exported,
lowers cleanly, lints clean, and computes what the original computed."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest
import torch

from coreml_lint import lint_program
from coreml_lint.cli.main import main
from coreml_lint.core.findings import Severity
from coreml_lint.rules.cml302_like_dtype_ignored import causal_row0, inverted_mask

MODELS = Path(__file__).parent / "fixtures" / "models"

# model file -> (error codes in the original program, what the stock lowering shows)
EXPECTED = {
    "gelu_tanh": ({"CML305"}, ("silent", r'mode="EXACT"')),
    "rmsnorm_no_eps": ({"CML303"}, ("crash", r"expected \[4\]")),
    "int_fills": ({"CML301"}, ("crash", r"\['int32'\] but got")),
    "bool_reductions": ({"CML105"}, ("crash", r"type domain")),
    "pooling": ({"CML306"}, ("crash", r"expected minimum 3 inputs")),
    "uint8_lut": ({"CML103"}, ("crash", r"uint8")),
    "mha_bool_mask": ({"CML302"}, ("silent", inverted_mask)),
}
TOLERANCE = {"gelu_tanh": 1e-5}  # the written-out tanh formula rounds differently


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _program(path: Path, tag: str):
    module = _load(path, f"{path.stem}_{tag}")
    torch.manual_seed(0)
    model = module.Model().eval()
    inputs = module.example_inputs()
    return model, inputs, torch.export.export(model, inputs)


@pytest.fixture
def fixed_copy(tmp_path, capsys):
    def fix(name: str) -> tuple[Path, Path]:
        original = MODELS / f"{name}.py"
        copy = tmp_path / f"{name}.py"
        shutil.copy(original, copy)
        code = main([str(copy), "--fix", "--unsafe-fixes", "--output-format", "concise"])
        out = capsys.readouterr().out
        assert code == 0, out  # every finding was fixed
        # Fixing twice changes nothing.
        before = copy.read_text()
        assert main([str(copy), "--fix", "--unsafe-fixes"]) == 0
        capsys.readouterr()
        assert copy.read_text() == before
        return original, copy

    return fix


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixed_model_computes_the_same(name, fixed_copy):
    original, fixed = fixed_copy(name)
    model_a, inputs, ep_a = _program(original, "a")
    model_b, _, ep_b = _program(fixed, "b")
    model_b.load_state_dict(model_a.state_dict(), strict=False)
    with torch.no_grad():
        out_a, out_b = model_a(*inputs), model_b(*inputs)
    leaves_a = torch.utils._pytree.tree_leaves(out_a)
    leaves_b = torch.utils._pytree.tree_leaves(out_b)
    for a, b in zip(leaves_a, leaves_b, strict=True):
        assert torch.allclose(a.float(), b.float(), atol=TOLERANCE.get(name, 0.0)), name
    errors = {f.code for f in lint_program(ep_a).findings if f.severity is Severity.ERROR}
    assert errors == EXPECTED[name][0]
    assert not [f for f in lint_program(ep_b).findings if f.severity is Severity.ERROR]


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fix_turns_a_failing_lowering_into_a_clean_one(name, fixed_copy):
    from oracle import lower

    original, fixed = fixed_copy(name)
    kind, evidence = EXPECTED[name][1]
    shows = evidence if callable(evidence) else lambda lowered: re.search(evidence, lowered.mil)
    before = lower(_program(original, "a")[2])
    if kind == "crash":
        assert not before.ok and re.search(evidence, before.message), before.message
    else:
        assert before.ok and shows(before), before.mil
    after = lower(_program(fixed, "b")[2])
    assert after.ok, after.message
    assert not shows(after), after.mil
    if name == "mha_bool_mask":
        assert causal_row0(after), "the fixed mask must block the future positions"
