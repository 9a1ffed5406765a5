"""What a command that needs the heavy install (torch, executorch, coremltools) says in the
light one: one line naming what is missing and how to install it, as the README does, and
exit 2, never a missing package reported as the result of a lowering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _archive

from coreml_lint.core.version import HEAVY_INSTALL, HEAVY_INSTALL_COMMAND

README = Path(__file__).resolve().parents[1] / "README.md"
# The light install, in a process of the heavy one: these imports fail as there.
LIGHT = "import sys\nfor m in ('torch', 'executorch', 'coremltools'): sys.modules[m] = None\n"


def _light_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    code = f"{LIGHT}from coreml_lint.cli.main import main\nsys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)


def test_the_install_hint_is_the_readme_install_command():
    """The hint names what the README's Install section says (a clone, torch pinned), not a
    release that no index holds."""
    install = README.read_text(encoding="utf-8").split("## Install\n", 1)[1].split("\n## ")[0]
    assert HEAVY_INSTALL_COMMAND in install
    assert HEAVY_INSTALL_COMMAND in HEAVY_INSTALL and "torch==" in HEAVY_INSTALL


@pytest.mark.parametrize(
    "args",
    [
        ("{pt2}", "--check-advice"),
        ("lower", "{pt2}", "-o", "{out}"),
        ("verify", "{pt2}"),
    ],
    ids=["check-advice", "lower", "verify"],
)
def test_heavy_commands_in_the_light_install_say_what_to_install(tmp_path, args):
    pt2 = tmp_path / "program.pt2"
    pt2.write_bytes(_archive("state-default-target"))
    filled = [a.format(pt2=pt2, out=tmp_path / "x.pte") for a in args]
    done = _light_cli(tmp_path, *filled)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""  # nothing linted or lowered first
    (line,) = done.stderr.strip().splitlines()
    assert "torch, executorch, coremltools not installed" in line
    assert line.endswith(HEAVY_INSTALL)
    assert not list(tmp_path.glob("*.pte"))


@pytest.mark.oracle
def test_check_advice_prints_only_its_own_lines(tmp_path):
    """The lowering --check-advice runs imports coremltools, torchao, scikit-learn checks and
    tqdm bars that all write to stderr; the command prints only its own lines, as lower and
    verify do (--verbose lets the libraries speak)."""
    pt2 = tmp_path / "program.pt2"
    pt2.write_bytes(_archive("state-default-target"))
    args = [str(pt2), "--check-advice"]
    code = f"import sys\nfrom coreml_lint.cli.main import main\nsys.exit(main({args!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr  # the finding is still a finding
    assert "checked with the stock lowering: lowers to a .pte" in done.stdout
    assert done.stderr == ""
