"""Codemod fixtures: ``fixtures/source/<name>.py`` fixed with ``--fix --unsafe-fixes`` is
``fixtures/fix/<name>.py``;
formatting and comments survive, fixing twice changes nothing, safe mode leaves unsafe
rewrites alone, and a fix that would not compile is reverted and reported."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from coreml_lint.cli.main import main
from coreml_lint.engine.source import lint_source_file
from coreml_lint.fixers.apply import compute_fix, selected_edits

SOURCES = Path(__file__).parent / "fixtures" / "source"
FIXED = Path(__file__).parent / "fixtures" / "fix"
NAMES = sorted(p.stem for p in FIXED.glob("*.py"))


@pytest.mark.parametrize("name", NAMES)
def test_fix_output_matches_fixture(name, tmp_path, capsys):
    target = tmp_path / f"{name}.py"
    shutil.copy(SOURCES / f"{name}.py", target)
    main([str(target), "--fix", "--unsafe-fixes"])
    capsys.readouterr()
    assert target.read_text() == (FIXED / f"{name}.py").read_text()
    compile(target.read_text(), str(target), "exec")
    main([str(target), "--fix", "--unsafe-fixes"])
    capsys.readouterr()
    assert target.read_text() == (FIXED / f"{name}.py").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_safe_mode_applies_only_safe_fixes(name, tmp_path, capsys):
    target = tmp_path / f"{name}.py"
    shutil.copy(SOURCES / f"{name}.py", target)
    before = lint_source_file(target)
    main([str(target), "--fix"])
    capsys.readouterr()
    after = lint_source_file(target)
    unsafe = [f for f in before if f.edit and not f.edit.safe]
    left = {(f.code, f.location.source_line) for f in after}
    for finding in unsafe:
        assert (finding.code, finding.location.source_line) in left
    assert all(not (f.edit and f.edit.safe) for f in after)


def test_diff_writes_nothing_and_exits_one(tmp_path, capsys):
    target = tmp_path / "m.py"
    shutil.copy(SOURCES / "names.py", target)
    original = target.read_text()
    code = main([str(target), "--diff", "--unsafe-fixes"])
    out, _ = capsys.readouterr()
    assert code == 1 and out.startswith(f"--- {target}") and "+    w = m.any(dim=1)" in out
    assert target.read_text() == original


def test_exit_non_zero_on_fix(tmp_path, capsys):
    target = tmp_path / "m.py"
    target.write_text("import torch\n\ny = torch.full((2,), 3)\n")
    assert main([str(target), "--fix"]) == 0
    target.write_text("import torch\n\ny = torch.full((2,), 3)\n")
    assert main([str(target), "--fix", "--exit-non-zero-on-fix"]) == 1
    capsys.readouterr()
    assert "dtype=torch.int64" in target.read_text()


def test_write_keeps_permissions(tmp_path, capsys):
    target = tmp_path / "m.py"
    target.write_text("import torch\n\ny = torch.full((2,), 3)\n")
    os.chmod(target, 0o640)
    main([str(target), "--fix"])
    capsys.readouterr()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name != "m.py"]  # no temp file left


def test_broken_result_is_reverted(tmp_path, monkeypatch):
    import libcst as cst

    from coreml_lint.rules import cml305_tanh_gelu

    monkeypatch.setattr(  # the rewrite the finding's edit carries
        cml305_tanh_gelu, "_formula_call", lambda fix, call, edits: cst.parse_expression("(yield)")
    )
    target = tmp_path / "m.py"
    text = "import torch.nn.functional as F\n\ny = F.gelu(x, approximate='tanh')\n"
    target.write_text(text)
    findings = lint_source_file(target)
    result = compute_fix(str(target), text, selected_edits(findings, unsafe=True))
    assert result.error and "reverted" in result.error
    assert result.fixed == text


def test_program_finding_fixes_its_model_line(tmp_path, capsys, monkeypatch):
    import importlib.util

    import torch

    monkeypatch.chdir(tmp_path)  # the model's project: a fix writes only inside it
    source = tmp_path / "model.py"
    source.write_text(
        "import torch\nimport torch.nn.functional as F\n\n\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return F.gelu(x, approximate='tanh') * 2\n"
    )
    spec = importlib.util.spec_from_file_location("program_fix_model", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(module.Model(), (torch.randn(2, 3),)), program)
    assert main([str(program), "--fix"]) == 1  # the tanh rewrite is unsafe: not applied
    assert "approximate='tanh'" in source.read_text()
    assert main([str(program), "--fix", "--unsafe-fixes"]) == 0
    capsys.readouterr()
    assert "torch.tanh(0.7978845608028654" in source.read_text()
    source.write_text(source.read_text() + "\n# the line moved\n")
    # The program still points at line 7, which no longer holds the call: nothing is guessed.
    assert main([str(program), "--fix", "--unsafe-fixes"]) == 1
