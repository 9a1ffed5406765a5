"""Linting a .pt2 never imports torch, coremltools or executorch (the pre-commit hook's venv
has none of them), never unpickles, and never reads weights."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import _archive

BLOCKER = textwrap.dedent(
    """
    import sys
    import importlib.abc

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"torch", "coremltools", "executorch", "numpy"}:
                raise ImportError(f"blocked heavy import: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import pickle
    pickle.loads = pickle.load = lambda *a, **k: (_ for _ in ()).throw(AssertionError("unpickle"))
    code = run(sys.argv[1:])
    heavy = [m for m in sys.modules if m.split(".")[0] in {"torch", "coremltools", "executorch"}]
    assert not heavy, heavy
    sys.exit(code)
    """
)
# what the blocked script runs: defined first, imported only when run (after the blocker)
COMMAND = "def run(args):\n    from coreml_lint.cli.main import main\n    return main(args)\n"
API = (  # the Python API's check run, printing the codes it found
    "def run(args):\n"
    "    import coreml_lint\n"
    "    found = coreml_lint.check(args)\n"
    "    print(sorted(f.code for f in found.findings))\n"
    "    return found.exit_code()\n"
)


def test_lint_without_heavy_packages(tmp_path):
    program = tmp_path / "program.pt2"
    program.write_bytes(_archive("uint8-input"))
    result = subprocess.run(
        [sys.executable, "-c", COMMAND + BLOCKER, str(program), "--output-format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert '"code": "CML101"' in result.stdout


def test_the_python_apis_check_run_is_as_light(tmp_path):
    program = tmp_path / "program.pt2"
    program.write_bytes(_archive("uint8-input"))
    result = subprocess.run(
        [sys.executable, "-c", API + BLOCKER, str(program)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "'CML101'" in result.stdout


def test_weights_are_never_read(tmp_path):
    """Replace every weight member with garbage: the lint result does not change."""
    import io
    import zipfile

    from coreml_lint.engine.program import lint_pt2

    original = tmp_path / "a.pt2"
    original.write_bytes(_archive("transformer-block"))
    damaged = tmp_path / "b.pt2"
    source = zipfile.ZipFile(io.BytesIO(original.read_bytes()))
    with zipfile.ZipFile(damaged, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if "/data/" in info.filename:
                data = b"\\x00garbage"
            target.writestr(info.filename, data)
    summary = [r.placement.summary() for r in lint_pt2(original)]
    assert [r.placement.summary() for r in lint_pt2(damaged)] == summary
