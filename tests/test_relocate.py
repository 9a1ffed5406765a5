"""A ``.pt2`` made on another machine (a CI artifact) names its model files by paths that
do not exist here (issue 32, item 13): ``--fix`` finds the project's file whose path is a
tail of the frame's, says which it chose, and never guesses between several."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from coreml_lint.core.findings import Finding, Location, Outcome, Severity
from coreml_lint.fixers.relocate import match, relocate

VIT = Path(__file__).parent / "fixtures" / "guided" / "layout_vit_blocks.py"


def _files(*names: str) -> list[Path]:
    return [Path(n) for n in names]


def test_the_one_project_file_the_frame_path_ends_with_is_chosen():
    chosen, why = match("/ci/work/proj/models/vit.py", _files("models/vit.py", "vit_old.py"), set())
    assert chosen == Path("models/vit.py")
    assert "the one file that path ends with" in why


def test_a_file_with_the_same_name_elsewhere_is_not_a_match():
    chosen, why = match("/ci/work/proj/models/vit.py", _files("other/vit.py"), set())
    assert chosen is None
    assert "no file of the project ends that path" in why


def test_windows_frame_paths_match_too():
    chosen, _ = match(r"C:\ci\proj\models\vit.py", _files("models/vit.py"), set())
    assert chosen == Path("models/vit.py")


def test_the_module_path_decides_between_several_tails():
    files = _files("vit.py", "models/vit.py")
    chosen, why = match("/ci/proj/models/vit.py", files, {"models.vit"})
    assert chosen == Path("models/vit.py")
    assert "module models.vit" in why
    chosen, _ = match("/ci/proj/models/vit.py", files, {"vit"})
    assert chosen == Path("vit.py")


def test_several_tails_without_a_module_to_decide_are_said_not_guessed():
    chosen, why = match("/ci/proj/models/vit.py", _files("vit.py", "models/vit.py"), set())
    assert chosen is None
    assert "2 project files end that path (models/vit.py, vit.py)" in why


def _finding(path: str, modules=None) -> Finding:
    return Finding(
        code="CML305",
        name="tanh-gelu",
        severity=Severity.ERROR,
        outcome=Outcome.SILENT,
        message="m",
        file="ci.pt2",
        location=Location(path, 3),
        extra={"modules": modules} if modules else {},
    )


def test_relocate_points_findings_at_the_local_file_and_says_so(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "vit.py").write_text("x = 1\n")
    (tmp_path / ".venv" / "models").mkdir(parents=True)  # an environment: never a match
    (tmp_path / ".venv" / "models" / "vit.py").write_text("x = 1\n")
    here = _finding(str(tmp_path / "models" / "vit.py"))
    moved, again = _finding("/ci/p/models/vit.py"), _finding("/ci/p/models/vit.py")
    notes = relocate([here, moved, again], tmp_path)
    assert moved.location.path == again.location.path == str(tmp_path / "models" / "vit.py")
    assert here.location.path == str(tmp_path / "models" / "vit.py")
    assert notes == [
        "note: ci.pt2 names /ci/p/models/vit.py, not a file here: the project's "
        "models/vit.py (the one file that path ends with)"
    ]


def test_relocate_leaves_an_ambiguous_finding_with_the_reason(tmp_path):
    for folder in (tmp_path, tmp_path / "models"):
        folder.mkdir(exist_ok=True)
        (folder / "vit.py").write_text("x = 1\n")
    finding = _finding("/ci/p/models/vit.py", [["", "torch.nn.Module"]])
    assert relocate([finding], tmp_path) == []
    assert finding.location.path == "/ci/p/models/vit.py"
    assert "2 project files end that path" in finding.extra["not_fixed"]


def _export(source: Path, target: Path, name: str):
    import torch

    spec = importlib.util.spec_from_file_location(name, source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model().eval()
    inputs = module.example_inputs()
    program = torch.export.export(model, inputs)
    torch.export.save(program, target)
    return program


@pytest.fixture
def ci_artifact(tmp_path, monkeypatch):
    """The model exported in a "CI checkout" that is then removed; the project here holds
    the same file at ``models/vit.py``. Returns the project's file and the .pt2."""
    pytest.importorskip("torch")
    ci = tmp_path / "ci" / "work" / "proj" / "models"
    ci.mkdir(parents=True)
    shutil.copy(VIT, ci / "vit.py")
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / ".git").mkdir()
    shutil.copy(VIT, project / "models" / "vit.py")
    program = project / "vit.pt2"
    _export(ci / "vit.py", program, "models.vit")
    shutil.rmtree(tmp_path / "ci")  # the CI machine's paths do not exist here
    monkeypatch.chdir(project)
    return project / "models" / "vit.py", program


def test_a_ci_artifact_is_fixed_in_the_project_file_its_frames_end_with(ci_artifact, capsys):
    from coreml_lint import lint_program
    from coreml_lint.cli.main import main

    source, program = ci_artifact
    assert main([str(program), "--fix", "--unsafe-fixes", "--output-format", "concise"]) == 0
    captured = capsys.readouterr()
    assert "/ci/work/proj/models/vit.py, not a file here: the project's models/vit.py" in (
        captured.err
    )
    assert "TanhGELU()" in source.read_text()
    again = _export(source, source.with_name("again.pt2"), "models.vit_fixed")
    assert not [f for f in lint_program(again).findings if f.severity is Severity.ERROR]


@pytest.mark.oracle
def test_a_ci_artifact_fixed_here_lowers_as_eager_computes(ci_artifact, capsys):
    from oracle import lower

    from coreml_lint.cli.main import main

    source, program = ci_artifact
    before = _export(source, source.with_name("before.pt2"), "models.vit_before")
    assert re.search(r'mode="EXACT"', lower(before).mil)  # the stock lowering's tanh GELU
    assert main([str(program), "--fix", "--unsafe-fixes"]) == 0
    capsys.readouterr()
    after = lower(_export(source, source.with_name("after.pt2"), "models.vit_after"))
    assert after.ok, after.message
    assert not re.search(r'mode="EXACT"', after.mil)
