"""The demo changes nothing outside the clone: ``scripts/demo.sh`` sets up ``.venv`` and
never installs a system package; the browser the HTML report's tests use comes only with
``scripts/setup.sh --browser``, which says what it installs first.

The scripts run for real, in a copy of ``scripts/`` whose ``python3`` and browser installer
are stubs that log what they were asked (no venv is built, nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOGGER = '#!/usr/bin/env bash\necho "{name} $*" >> "$STUB_LOG"\n'
# python3 -m venv .venv makes a .venv whose python and coreml-lint only log (the lint says
# "findings", exit 1, as the demo expects).
PYTHON3 = """#!/usr/bin/env bash
echo "python3 $*" >> "$STUB_LOG"
mkdir -p .venv/bin
printf '#!/usr/bin/env bash\\necho "venv-python $*" >> "$STUB_LOG"\\n' > .venv/bin/python
lint='#!/usr/bin/env bash\\necho "coreml-lint $*" >> "$STUB_LOG"\\nexit 1\\n'
printf "$lint" > .venv/bin/coreml-lint
chmod +x .venv/bin/python .venv/bin/coreml-lint
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    for name in ("demo.sh", "setup.sh"):
        shutil.copy(ROOT / "scripts" / name, clone / "scripts" / name)
    (clone / "scripts" / "setup_browser.sh").write_text(LOGGER.format(name="setup_browser"))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "python3").write_text(PYTHON3)
    for name in ("sudo", "apt-get"):
        (stubs / name).write_text(LOGGER.format(name=name))
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "log")}
    return clone, env


def _log(tmp_path: Path) -> list[str]:
    log = tmp_path / "log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_demo_installs_no_system_package(tmp_path):
    clone, env = _clone(tmp_path)
    done = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    log = _log(tmp_path)
    assert any(line.startswith("coreml-lint ") for line in log)  # the demo ran to its lint
    assert not [line for line in log if line.split()[0] in ("setup_browser", "sudo", "apt-get")]


def test_the_browser_comes_with_setup_browser_flag_only(tmp_path):
    clone, env = _clone(tmp_path)
    done = subprocess.run(
        ["bash", "scripts/setup.sh", "--browser"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "setup_browser " in _log(tmp_path)


def test_the_browser_installer_says_what_it_installs_before_it_does(tmp_path):
    text = (ROOT / "scripts" / "setup_browser.sh").read_text()
    announced = text.index('echo "installing the system packages chromium')
    assert announced < text.index("apt-get update")
