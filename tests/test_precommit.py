"""The pre-commit hooks work from another repository, for real: pre-commit builds its own
venv from this checkout (no torch in it), flags a model file and fixes it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = """import torch
import torch.nn.functional as F


def forward(x):
    return F.max_pool2d(x, 2) + torch.full((1,), 3)
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.oracle  # pre-commit builds a venv of its own: the slow tier
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_hooks_flag_and_fix_from_another_repository(tmp_path):
    executable = Path(sys.executable).with_name("pre-commit")
    repo = tmp_path / "user-project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "model.py").write_text(MODEL)
    _git(repo, "add", "model.py")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PIP_NO_INPUT": "1"}

    def pre_commit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(executable), *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    flagged = pre_commit("try-repo", str(ROOT), "coreml-lint", "--all-files")
    assert flagged.returncode == 1, flagged.stdout + flagged.stderr
    assert "CML306" in flagged.stdout and "CML301" in flagged.stdout

    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {sha}\n    hooks:\n"
        "      - id: coreml-lint\n        args: [--fix]\n"
    )
    _git(repo, "add", ".pre-commit-config.yaml")
    fixed = pre_commit("run", "--all-files")
    assert fixed.returncode == 1  # pre-commit fails a run whose hook modified files
    text = (repo / "model.py").read_text()
    assert "F.max_pool2d(x, 2, stride=2)" in text and "dtype=torch.int64" in text
    again = pre_commit("run", "--all-files")
    assert again.returncode == 0, again.stdout
