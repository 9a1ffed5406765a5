"""Files nobody checked: every bad file gets its own one-line diagnostic, the run goes on
with the other files, the exit code says an error happened, and no file is half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coreml_lint.cli.main import main

GOOD = "import torch\n\ny = torch.full((2,), 3)\n"


def test_unreadable_file_does_not_stop_the_run(tmp_path, capsys):
    (tmp_path / "latin1.py").write_bytes(b"import torch\nx = '\xe9'\n")
    (tmp_path / "good.py").write_text(GOOD)
    code = main([str(tmp_path), "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "good.py:3" in out and "CML301" in out
    assert err.count("\n") == 1 and "not UTF-8" in err and "latin1.py" in err


@pytest.mark.parametrize(
    "name, data",
    [
        ("syntax.py", b"import torch\ndef f(:\n    torch.full((1,), 2)\n"),
        ("nul.py", b"import torch\x00\ntorch.full((1,), 2)\n"),
    ],
)
def test_file_that_does_not_parse_is_a_finding(tmp_path, capsys, name, data):
    """As in ruff: exit 1 (findings), not 2; every other file is still linted."""
    (tmp_path / name).write_bytes(data)
    (tmp_path / "good.py").write_text(GOOD)
    code = main([str(tmp_path), "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert code == 1 and not err
    assert "good.py:3" in out and "CML301" in out
    assert f"{name}:" in out and "CML001" in out


def test_bom_crlf_and_tabs_survive_a_fix(tmp_path, capsys):
    path = tmp_path / "m.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\n\r\nif True:\r\n\ty = torch.full((2,), 3)\r\n")
    assert main([str(path), "--fix"]) == 0
    capsys.readouterr()
    assert path.read_bytes() == (
        b"\xef\xbb\xbfimport torch\r\n\r\nif True:\r\n"
        b"\ty = torch.full((2,), 3, dtype=torch.int64)\r\n"
    )


def test_symlinks_and_huge_files(tmp_path, capsys):
    target = tmp_path / "real.py"
    target.write_text(GOOD)
    (tmp_path / "link.py").symlink_to(target)
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)  # not followed
    huge = tmp_path / "huge.py"
    huge.write_bytes(b"import torch\n" + b"x = 1\n" * (3 * 1024 * 1024))
    code = main([str(tmp_path), "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert code == 2 and "huge.py: larger than" in err
    assert out.count("CML301") == 2  # the file and the link to it


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable files")
def test_unreadable_file(tmp_path, capsys):
    path = tmp_path / "secret.py"
    path.write_text(GOOD)
    path.chmod(0)
    assert main([str(path)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_interrupted_fix_stops_at_once_and_leaves_every_file_old_or_new(tmp_path):
    """SIGINT in the middle of a large --fix run: exit 130 at once, each file whole.

    The interrupt is sent once the run has visibly started writing, not after a fixed
    sleep, and "at once" is measured in files written after it, not in seconds, so the
    test means the same on a fast machine and on a loaded one."""
    folder = tmp_path / "models"
    folder.mkdir()
    original = GOOD + "".join(
        f"\ndef f{i}(x):\n    return torch.zeros(3, dtype=torch.long) + x\n" for i in range(300)
    )
    for i in range(400):
        (folder / f"m{i}.py").write_text(original)
    exe = Path(sys.executable).with_name("coreml-lint")
    process = subprocess.Popen(
        [str(exe), str(folder), "--fix", "--output-format", "concise"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        if any(path.read_text() != original for path in folder.glob("m*.py")):
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)  # at once: no file read between the poll and this
    fixed_when_sent = sum(path.read_text() != original for path in folder.glob("m*.py"))
    _, err = process.communicate(timeout=600)  # a guard against a hang, not a speed bound
    # A run that ended before the signal reached it exits 0 (a loaded machine can take long
    # enough between the last poll and the signal): then it must have fixed every file.
    interrupted = process.returncode != 0
    states = {"old": 0, "new": 0}
    for path in folder.iterdir():
        assert path.suffix == ".py", f"left a temporary file: {path.name}"
        text = path.read_text()
        compile(text, str(path), "exec")
        states["old" if text == original else "new"] += 1
        if text != original:
            assert "torch.full((3,), 0, dtype=torch.long)" in text
    assert sum(states.values()) == 400
    if not interrupted:  # the whole run finished before the interrupt could be sent
        assert states["new"] == 400, err
        return
    assert process.returncode == 130, err
    assert b"interrupted" in err
    # Stopping at once is work not done: after the interrupt, at most the chunks the workers
    # held (8 files each, a worker per core) are finished, never the rest of the queue.
    in_flight = 2 * 8 * min(os.cpu_count() or 1, 8)
    assert states["new"] - fixed_when_sent <= in_flight, (fixed_when_sent, states)


def test_cleanup_after_an_interrupt_leaves_other_running_runs_temporary_files(tmp_path):
    from coreml_lint.core.config import LintConfig
    from coreml_lint.core.files import TEMP_SUFFIX
    from coreml_lint.fixers.session import FixSession, _remove_temporary_files

    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    session = FixSession(LintConfig())
    ours = tmp_path / f".m.py.{session.tag}.abc{TEMP_SUFFIX}"
    running = tmp_path / f".m.py.run1.abc{TEMP_SUFFIX}"  # pid 1 runs: another run's write
    dead = tmp_path / f".m.py.run{finished.stdout.strip()}.abc{TEMP_SUFFIX}"  # a killed run's
    for stray in (ours, running, dead):
        stray.write_text("partial")
    _remove_temporary_files({tmp_path}, session.tag)
    assert not ours.exists() and running.exists() and not dead.exists()


def test_a_file_changed_while_it_is_fixed_is_not_overwritten(tmp_path, monkeypatch):
    """Somebody (an editor, another run) writes the file after it was read: the fix,
    computed from the old text, is not written over their change."""
    import coreml_lint.fixers.session as session_module
    from coreml_lint.core.config import LintConfig

    path = tmp_path / "m.py"
    path.write_text(GOOD)
    theirs = GOOD + "z = 1\n"
    real = session_module.compute_fix

    def compute_then_edit(*args, **kwargs):
        result = real(*args, **kwargs)
        path.write_text(theirs)
        return result

    monkeypatch.setattr(session_module, "compute_fix", compute_then_edit)
    outcome = session_module.FixSession(LintConfig()).fix_file(path)
    assert outcome.error and "changed while it was being fixed" in outcome.error
    assert path.read_text() == theirs
    assert outcome.result is None  # not counted as fixed
