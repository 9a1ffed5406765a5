"""Program-guided source fixes, end to end: a model file whose pitfall is spelled through
names, attributes and buffers (so no source rule can see it), its exported ``.pt2``, and
``coreml-lint its.pt2 --fix --unsafe-fixes`` run in the model's project. The fixed file,
imported and exported again, lints clean, computes what the original computed, and (the
oracle) lowers with the stock partitioner."""

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
from coreml_lint.engine.source import lint_source_file

MODELS = Path(__file__).parent / "fixtures" / "guided"

# model file -> (the error code its program gets, what the stock lowering shows, the edit)
EXPECTED = {
    "fill_attribute": (
        "CML301",
        ("silent", r"3000\.0"),
        "torch.full((1, ids.shape[1]), self.base, dtype=torch.int64)",
    ),
    "bool_inputs": ("CML105", ("crash", r"type domain"), "torch.logical_or(valid, keep)"),
    "uint8_table": (
        "CML103",
        ("crash", r"uint8"),
        'self.register_buffer("table", table.to(torch.int32))',
    ),
    "gelu_config": (
        "CML305",
        ("silent", r'mode="EXACT"'),
        "self.act = ExportableGELU(approximate=Config.hidden_act)",
    ),
    "rmsnorm_attribute": (
        "CML303",
        ("crash", r"expected \[4\]"),
        "norm_layer(dim, eps=torch.finfo(torch.float32).eps)",
    ),
}

# The source rule sees these too (CML303: a parameter defaulting to nn.RMSNorm, since issue
# 25); the program's finding points at the forward line, so the guided fix is what runs.
SOURCE_SEES = {"rmsnorm_attribute"}


def _program(path: Path, tag: str):
    spec = importlib.util.spec_from_file_location(f"{path.stem}_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model().eval()
    inputs = module.example_inputs()
    return model, inputs, torch.export.export(model, inputs)


@pytest.fixture
def guided(tmp_path, capsys, monkeypatch):
    """Copy the model into a project, export it, fix it through its program only."""

    def fix(name: str) -> tuple[Path, Path]:
        original = MODELS / f"{name}.py"
        copy = tmp_path / f"{name}.py"
        shutil.copy(original, copy)
        if name not in SOURCE_SEES:
            assert not [f for f in lint_source_file(copy) if f.code == EXPECTED[name][0]]
        program = tmp_path / f"{name}.pt2"
        torch.export.save(_program(copy, "export")[2], program)
        monkeypatch.chdir(tmp_path)
        code = main([str(program), "--fix", "--unsafe-fixes", "--output-format", "concise"])
        out = capsys.readouterr().out
        assert code == 0, out  # the program's finding was fixed in the source
        assert EXPECTED[name][2] in copy.read_text()
        before = copy.read_text()
        main([str(program), "--fix", "--unsafe-fixes"])  # fixing twice changes nothing
        capsys.readouterr()
        assert copy.read_text() == before
        return original, copy

    return fix


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_guided_fix_keeps_what_the_model_computes(name, guided):
    original, fixed = guided(name)
    model_a, inputs, ep_a = _program(original, "a")
    model_b, _, ep_b = _program(fixed, "b")
    model_b.load_state_dict(model_a.state_dict(), strict=False)
    with torch.no_grad():
        leaves_a = torch.utils._pytree.tree_leaves(model_a(*inputs))
        leaves_b = torch.utils._pytree.tree_leaves(model_b(*inputs))
    for a, b in zip(leaves_a, leaves_b, strict=True):  # the GELU formula rounds apart
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-6, atol=1e-6, msg=name)
    errors = {f.code for f in lint_program(ep_a).findings if f.severity is Severity.ERROR}
    assert EXPECTED[name][0] in errors
    assert not [f for f in lint_program(ep_b).findings if f.severity is Severity.ERROR]


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_guided_fix_turns_a_failing_lowering_into_a_clean_one(name, guided):
    from oracle import lower

    original, fixed = guided(name)
    kind, evidence = EXPECTED[name][1]
    before = lower(_program(original, "a")[2])
    if kind == "crash":
        assert not before.ok and re.search(evidence, before.message), before.message
    else:
        assert before.ok and re.search(evidence, before.mil), before.mil
    after = lower(_program(fixed, "b")[2])
    assert after.ok, after.message
    assert not re.search(evidence, after.mil)


def _fix_leaves_alone(text: str, tmp_path: Path, capsys, monkeypatch) -> str:
    """Write ``text`` as a model, export it, run ``--fix --unsafe-fixes`` on its program:
    the finding stays (exit 1), the file is unchanged; the run's output."""
    source = tmp_path / "model.py"
    source.write_text(text)
    program = tmp_path / "model.pt2"
    torch.export.save(_program(source, tmp_path.name)[2], program)
    monkeypatch.chdir(tmp_path)
    assert main([str(program), "--fix", "--unsafe-fixes"]) == 1
    assert source.read_text() == text
    return capsys.readouterr().out


def test_a_fix_that_cannot_be_placed_says_why(tmp_path, capsys, monkeypatch):
    """The buffer's values are used as 8-bit integers (added to each other): storing it as
    int32 would change what the model computes, so nothing is guessed."""
    text = (MODELS / "uint8_table.py").read_text()
    text = text.replace(
        "self.table[idx].float() * 0.5", "(self.table[idx] + self.table[idx]).float()"
    )
    out = _fix_leaves_alone(text, tmp_path, capsys, monkeypatch)
    assert "not fixed: 'table' is used as uint8 values" in out


def test_a_norm_line_that_also_builds_another_class_is_left_alone(tmp_path, capsys, monkeypatch):
    """``self.norm = norm_layer(dim)`` builds an RMSNorm in one block and a LayerNorm in the
    other: eps for the RMSNorm would change the LayerNorm's (1e-5 -> 1.2e-7)."""
    text = (
        (MODELS / "rmsnorm_attribute.py")
        .read_text()
        .replace(
            "self.block = Block(16)",
            "self.block = Block(16)\n        self.first = Block(16, nn.LayerNorm)",
        )
        .replace("return self.block(x)", "return self.block(self.first(x))")
    )
    out = _fix_leaves_alone(text, tmp_path, capsys, monkeypatch)
    assert "`self.norm` of Block is also built as LayerNorm in this program" in out


def test_diff_names_why_a_program_finding_is_not_fixed(tmp_path, capsys, monkeypatch):
    """``--diff`` writes nothing and prints diffs; a finding it cannot fix still says why."""
    source = tmp_path / "model.py"
    model = (MODELS / "bool_inputs.py").read_text()
    model = model.replace("torch.maximum(valid, keep)", "helper(valid, keep)")
    source.write_text(model + "\n\ndef helper(a, b):\n    return torch.maximum(a, b)\n")
    program = tmp_path / "model.pt2"
    torch.export.save(_program(source, "diff")[2], program)
    monkeypatch.chdir(tmp_path)
    before = source.read_text()
    assert main([str(program), "--diff", "--unsafe-fixes"]) == 1
    captured = capsys.readouterr()
    assert source.read_text() == before
    assert "CML105 not fixed: line" in captured.err
    assert "inside a function called there is not followed" in captured.err


def test_no_partitioner_advice_after_every_error_was_fixed(tmp_path, capsys, monkeypatch):
    """The advice is for the program as exported; once --fix fixed its errors in the source
    the next export is another program, so the advice would be stale."""
    source = tmp_path / "model.py"
    shutil.copy(MODELS / "bool_inputs.py", source)
    program = tmp_path / "model.pt2"
    torch.export.save(_program(source, "advice")[2], program)
    monkeypatch.chdir(tmp_path)
    assert main([str(program)]) == 1
    assert "partitioner settings that" in capsys.readouterr().out
    assert main([str(program), "--fix"]) == 0
    out = capsys.readouterr().out
    assert "Fixed " in out
    assert "partitioner settings that" not in out
    assert "export again and lint it to check" in out  # the .pt2 still holds the pitfall
    assert "All checks passed" not in out


@pytest.mark.parametrize("name", ["fill_attribute", "bool_inputs", "gelu_config"])
def test_a_stale_program_is_told_as_stale_by_every_fixer(name, tmp_path, capsys, monkeypatch):
    """The source changed after export (a line added above the finding's): the finding's
    line is other code now. Every rule's fix says that, with where the exported code went,
    not that the line does not hold its pattern (CML301 said "holds 0 torch.full calls")."""
    source = tmp_path / "model.py"
    shutil.copy(MODELS / f"{name}.py", source)
    program = tmp_path / "model.pt2"
    torch.export.save(_program(source, f"stale_{name}")[2], program)
    monkeypatch.chdir(tmp_path)
    source.write_text("# a comment added after the export\n" + source.read_text())
    before = source.read_text()
    assert main([str(program), "--fix", "--unsafe-fixes"]) == 1
    out = capsys.readouterr().out
    reasons = re.findall(r"= not fixed: (.*)", out)
    assert reasons
    for reason in reasons:
        assert re.fullmatch(
            r"line (\d+) is now `.*`, not `.*` as when the program was exported \(that code "
            r"is at line (\d+) now\): the source changed after export; export again and lint "
            r"the new program",
            reason,
        ), reason
        moved_from, moved_to = map(int, re.search(r"line (\d+) .* line (\d+)", reason).groups())
        assert moved_to == moved_from + 1
    assert source.read_text() == before  # nothing guessed
