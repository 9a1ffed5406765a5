"""The check run is the Python API's as much as the command's: ``coreml_lint.check`` runs
what ``coreml-lint check`` runs (same findings, same fixes, same exit code), prints nothing
of its own, and says what it says through the ``say`` it is given."""

from __future__ import annotations

from pathlib import Path

import coreml_lint
from coreml_lint.checking.run import NO_FILES
from coreml_lint.cli.main import main

# CML301: torch.full without a dtype; its source fix adds the dtype eager infers
SOURCE = "import torch\n\nx = torch.full((2, 3), 3001)\n"


def _model(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "model.py"
    path.write_text(SOURCE)
    return path


def test_the_api_finds_what_the_command_finds_and_prints_nothing(tmp_path, capsys):
    model = _model(tmp_path / "m")
    run = coreml_lint.check(model)
    assert [(f.code, f.location.line) for f in run.findings] == [("CML301", 3)]
    assert run.exit_code() == 1 and not run.errors
    assert capsys.readouterr() == ("", "")
    assert main([str(model), "--isolated", "--output-format", "concise"]) == 1
    assert "CML301" in capsys.readouterr().out


def test_the_api_fixes_as_the_command_fixes(tmp_path, capsys):
    by_api, by_cli = _model(tmp_path / "api"), _model(tmp_path / "cli")
    run = coreml_lint.check([by_api], fix=True, unsafe=True)
    code = main([str(by_cli), "--isolated", "--fix", "--unsafe-fixes"])
    capsys.readouterr()
    assert by_api.read_text() == by_cli.read_text() != SOURCE
    assert [len(r.applied) for r in run.fix_results] == [1] and not run.findings
    assert run.exit_code() == code == 0
    assert run.exit_code(exit_non_zero_on_fix=True) == 1


def test_what_the_run_says_goes_to_the_say_it_is_given(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    said: list[str] = []
    run = coreml_lint.check(tmp_path / "empty", say=said.append)
    assert said == [NO_FILES] and capsys.readouterr() == ("", "")
    assert run.exit_code() == 0
    coreml_lint.check(tmp_path / "empty")  # by default, standard error, as the command
    assert capsys.readouterr() == ("", NO_FILES + "\n")


def test_a_program_returning_a_torch_named_tuple_is_linted_in_memory():
    """``torch.export.save`` cannot write a ``forward`` returning ``torch.median(x, dim=1)``
    as it is (its named tuple has no serialization name): ``lint_program`` still reads the
    program, and finds that ``median.dim`` has no Core ATen kernel to lower to."""
    torch = __import__("pytest").importorskip("torch")

    class Median(torch.nn.Module):
        def forward(self, x):
            return torch.median(x, dim=1)

    program = torch.export.export(Median(), (torch.randn(3, 4),))
    report = coreml_lint.lint_program(program)
    assert {(f.code, f.op) for f in report.findings} >= {("CML603", "aten.median.dim")}
    assert len(report.graph.outputs) == 2
