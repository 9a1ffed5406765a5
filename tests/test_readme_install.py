"""The README's pre-commit snippet and CI install line work as written, from a fresh clone:
the placeholders are filled with what the repository holds (its URL, a commit SHA), never
with a tag, because the history carries none."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
URL = "<this repository's URL>"
SHA = "<commit SHA>"
MODEL = """import torch
import torch.nn.functional as F


def forward(x):
    return F.max_pool2d(x, 2) + torch.full((1,), 3)
"""

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args), cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=900
    )


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _fresh_clone(tmp_path: Path) -> tuple[Path, str]:
    """A clone of this repository as a user makes one, and the commit it holds."""
    clone = tmp_path / "coreml-lint"
    done = _run("git", "clone", "-q", str(ROOT), str(clone), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sha = _run("git", "rev-parse", "HEAD", cwd=clone).stdout.strip()
    return clone, sha


def _export_tanh_gelu(path: Path) -> None:
    """A program with a tanh GELU (CML305), for the ``.pt2`` hook."""
    torch = pytest.importorskip("torch")

    class Gelu(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x, approximate="tanh")

    torch.export.save(torch.export.export(Gelu(), (torch.randn(2, 4),)), path)


def test_readme_pins_no_tag_the_repository_lacks():
    tags = _run("git", "tag", cwd=ROOT).stdout.split()
    pins = re.findall(r"(?:rev: |@)(v\d+\.\d+\.\d+)", README.read_text(encoding="utf-8"))
    assert not set(pins) - set(tags), f"the README pins tags the repository has not: {pins}"


@pytest.mark.oracle  # builds pre-commit's venv from the clone (network or pip cache): slow tier
def test_precommit_snippet_from_a_fresh_clone(tmp_path):
    clone, sha = _fresh_clone(tmp_path)
    block = re.search(r"```yaml\n(.*?)```", _section("pre-commit"), re.S)
    assert block and URL in block.group(1) and SHA in block.group(1)
    config = block.group(1).replace(URL, str(clone)).replace(SHA, sha)
    project = tmp_path / "user-project"
    project.mkdir()
    for args in (("init", "-q"), ("config", "user.email", "u@x"), ("config", "user.name", "u")):
        _run("git", *args, cwd=project)
    (project / "model.py").write_text(MODEL)
    _export_tanh_gelu(project / "program.pt2")
    (project / ".pre-commit-config.yaml").write_text(config)
    _run("git", "add", "model.py", "program.pt2", ".pre-commit-config.yaml", cwd=project)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PIP_NO_INPUT": "1"}
    pre_commit = str(Path(sys.executable).with_name("pre-commit"))
    result = _run(pre_commit, "run", "--all-files", cwd=project, env=env)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out  # the model has findings
    assert "CML306" in out and "CML301" in out, out  # the model-source hook
    assert "program.pt2" in out and "CML305" in out, out  # the program hook, without torch
    assert "did not match" not in out


@pytest.mark.oracle  # builds the package from the clone: slow tier
def test_ci_install_line_from_a_fresh_clone(tmp_path):
    clone, sha = _fresh_clone(tmp_path)
    line = re.search(r"- run: (pip install .*)", _section("CI auto-fix mode (GitHub Actions)"))
    assert line and URL in line.group(1) and SHA in line.group(1)
    command = line.group(1).replace(URL, f"file://{clone}").replace(SHA, sha)
    spec = re.fullmatch(r'pip install "(.*)"', command)
    assert spec, command
    target = tmp_path / "site"
    # The line as written, into a scratch target; the dependencies are this venv's already.
    done = _run(
        sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
        spec.group(1), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    (tmp_path / "model.py").write_text(MODEL)
    lint = _run(sys.executable, "-m", "coreml_lint", "model.py", cwd=tmp_path, env=env)
    assert lint.returncode == 1 and "CML306" in lint.stdout, lint.stdout + lint.stderr
    imported = _run(
        sys.executable,
        "-c",
        "import coreml_lint; print(coreml_lint.__file__)",
        cwd=tmp_path,
        env=env,
    )
    assert imported.stdout.startswith(str(target)), imported.stdout
