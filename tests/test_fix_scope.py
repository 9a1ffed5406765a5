"""Where --fix and --diff may write, and how paths are shown: never outside the paths given
and the project root; each file fixed and diffed once; machine-readable paths relative to
the repository root."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from coreml_lint.cli.main import main

MODEL = (
    "import torch\nimport torch.nn.functional as F\n\n\nclass Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return F.max_pool2d(x, 2) * 2\n"
)


def _export(source: Path, archive: Path) -> None:
    """Export the model defined in ``source`` (its stack traces point there) to ``archive``."""
    import torch

    spec = importlib.util.spec_from_file_location(f"scope_{source.parent.name}", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = torch.export.export(module.Model(), (torch.randn(1, 2, 4, 4),))
    torch.export.save(program, archive)


def _project(root: Path) -> Path:
    root.mkdir()
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_fix_leaves_files_outside_the_project_alone(tmp_path, capsys, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = elsewhere / "model.py"
    outside.write_text(MODEL)
    project = _project(tmp_path / "project")
    _export(outside, project / "model.pt2")
    monkeypatch.chdir(project)
    before = outside.read_bytes()
    assert main([str(project), "--fix"]) == 1
    out = capsys.readouterr().out
    assert outside.read_bytes() == before
    assert "CML306" in out and "not fixed: its model source is outside the project" in out


def test_fix_inside_the_project_fixes_each_file_once(tmp_path, capsys, monkeypatch):
    project = _project(tmp_path / "project")
    source = project / "model.py"
    source.write_text(MODEL)
    for name in ("a.pt2", "b.pt2", "c.pt2"):
        _export(source, project / name)
    (project / "model.py").write_text(MODEL)  # the same file, also linted as a source
    monkeypatch.chdir(project)
    assert (
        main([str(project / "a.pt2"), str(project / "b.pt2"), str(project / "c.pt2"), "--diff"])
        == 1
    )
    out = capsys.readouterr().out
    assert out.count("+++ ") == 1, out  # one diff for the one file, not three
    assert source.read_text() == MODEL  # --diff writes nothing
    assert main([".", "--fix"]) == 0
    capsys.readouterr()
    assert "F.max_pool2d(x, 2, stride=2)" in source.read_text()


@pytest.mark.parametrize("fmt", ["github", "sarif", "json", "concise"])
def test_paths_are_relative_to_the_repository(tmp_path, capsys, monkeypatch, fmt):
    project = _project(tmp_path / "project")
    (project / "models").mkdir()
    source = project / "models" / "model.py"
    source.write_text(MODEL)
    _export(source, project / "models" / "model.pt2")
    monkeypatch.chdir(project / "models")  # anywhere inside the repository
    assert main([str(project / "models"), "--output-format", fmt]) == 1
    out = capsys.readouterr().out
    assert str(tmp_path) not in out
    assert "models/model.py" in out
    if fmt == "json":
        data = json.loads(out)
        assert {f["location"]["path"] for f in data["findings"]} == {"models/model.py"}
