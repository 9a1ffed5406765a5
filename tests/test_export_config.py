"""``[tool.coreml-lint]`` program declarations and the torch-free edges of ``--export``:
bad declarations, no declarations and a missing torch are one line and exit 2; the hook
and the gitignore entry exist."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from coreml_lint.checking.export import changed_files
from coreml_lint.core.config import load_config
from coreml_lint.core.errors import InputError
from coreml_lint.core.version import HEAVY_INSTALL

REPO = Path(__file__).parents[1]


def _config(tmp_path: Path, body: str):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(textwrap.dedent(body))
    return load_config(pyproject)


def test_factories_and_tables_are_read_relative_to_the_pyproject(tmp_path):
    config = _config(
        tmp_path,
        """
        [tool.coreml-lint]
        programs = ["models/export.py:make_programs"]

        [[tool.coreml-lint.program]]
        module = "models/lm.py:TinyLM"
        inputs = ["int64[1, 8]", "int64[1]"]
        dynamic-shapes = [{ 1 = [1, 64] }, {}]
        ios = 18
        """,
    )
    factory, table = config.programs
    assert (factory.kind, factory.path, factory.attr) == (
        "programs",
        (tmp_path / "models/export.py").resolve(),
        "make_programs",
    )
    assert table.kind == "module" and table.label == "TinyLM" and table.ios == 18
    assert [(i.dtype, i.shape) for i in table.inputs] == [("int64", (1, 8)), ("int64", (1,))]
    assert table.dynamic_shapes == (((1, 1, 64),), ())
    assert factory.root == table.root == tmp_path


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('programs = "models/export.py:make"', "programs must be a list of strings"),
        ('programs = ["models/export:make"]', "is not 'path/to/file.py:name'"),
        ('[[tool.coreml-lint.program]]\nmodule = "m.py:M"\ninputs = ["float33[1]"]', "dtype"),
        (
            '[[tool.coreml-lint.program]]\nmodule = "m.py:M"\ninputs = ["float32[1]"]\nios = 14',
            "ios",
        ),
        ('[[tool.coreml-lint.program]]\nmodule = "m.py:M"\ninputs = []\nshape = 1', "unknown key"),
        (
            '[[tool.coreml-lint.program]]\nmodule = "m.py:M"\ninputs = ["float32[2]"]\n'
            "dynamic-shapes = [{ 0 = [4, 1] }]",
            "dynamic-shapes",
        ),
        (
            'programs = ["a.py:M"]\n[[tool.coreml-lint.program]]\nmodule = "b.py:M"\n'
            "inputs = []\nname = 'a.py:M'",
            "more than one declared program",
        ),
    ],
)
def test_a_bad_declaration_is_one_line(tmp_path, body, says):
    with pytest.raises(InputError, match=says) as caught:
        _config(tmp_path, "[tool.coreml-lint]\n" + body + "\n")
    assert "\n" not in str(caught.value)


def test_changed_files_are_the_python_files_given_and_a_folder_means_all(tmp_path):
    assert changed_files(()) is None
    assert changed_files((str(tmp_path),)) is None
    assert changed_files(("a.py", "notes.md")) == [Path("a.py")]


def _cli(cwd: Path, *args: str, prelude: str = "") -> subprocess.CompletedProcess:
    main = f"from coreml_lint.cli.main import main\nsys.exit(main({list(args)!r}))"
    code = f"{prelude}\nimport sys\n{main}"
    # No timeout of its own: on a busy machine a start-up can be slow, and pytest-timeout
    # ends a real hang.
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)


def test_export_without_declarations_is_a_usage_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.coreml-lint]\nios = 17\n")
    done = _cli(tmp_path, "--export")
    assert done.returncode == 2
    assert "no programs declared" in done.stderr and "Traceback" not in done.stderr


def test_export_without_torch_names_the_extra_to_install(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.coreml-lint]\nprograms = ["models/export.py:make_programs"]\n'
    )
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "export.py").write_text("import torch\n")
    # sys.modules["torch"] = None makes `import torch` raise ImportError, as in a light venv.
    done = _cli(tmp_path, "--export", prelude="import sys; sys.modules['torch'] = None")
    assert done.returncode == 2, done.stderr
    assert HEAVY_INSTALL in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_check_without_paths_or_export_is_a_usage_error(tmp_path):
    done = _cli(tmp_path, "check")
    assert done.returncode == 2 and "--export" in done.stderr


def test_the_export_hook_and_the_gitignore_entry_exist():
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    block = hooks[hooks.index("- id: coreml-lint-export") :]
    assert "entry: coreml-lint check --export" in block and "types: [python]" in block
    assert ".coreml-lint-cache/" in (REPO / ".gitignore").read_text().splitlines()


def test_a_folder_walk_skips_the_export_cache(tmp_path):
    from coreml_lint.checking.paths import collect_paths

    (tmp_path / ".coreml-lint-cache" / "export").mkdir(parents=True)
    (tmp_path / ".coreml-lint-cache" / "export" / "a.pt2").write_bytes(b"")
    (tmp_path / "m.py").write_text("import torch\n")
    files, _ = collect_paths((str(tmp_path),))
    assert files == [tmp_path / "m.py"]


def test_a_source_finding_and_a_program_finding_on_one_line_are_one(tmp_path):
    from coreml_lint.checking.export import merged
    from coreml_lint.core.findings import Finding, Location, Outcome, Severity, SourceFix

    def finding(code: str, line: int, edit: SourceFix | None = None) -> Finding:
        where = Location(str(tmp_path / "m.py"), line)
        return Finding(
            code, "n", Severity.ERROR, Outcome.CRASH, "m", "f", location=where, edit=edit
        )

    edit = SourceFix("CML303", "add-eps", 3, 0, "RMSNorm", True, "eps")
    source = [finding("CML303", 3, edit), finding("CML201", 5)]
    program = [finding("CML303", 3), finding("CML201", 9)]
    kept = merged(source, program)
    assert [(f.code, f.location.line) for f in kept] == [
        ("CML201", 5),
        ("CML303", 3),
        ("CML201", 9),
    ]
    assert kept[1] is program[0] and kept[1].edit is edit


def test_a_declared_file_that_does_not_exist_is_a_usage_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.coreml-lint]\nprograms = ["models/gone.py:make_programs"]\n'
    )
    done = _cli(tmp_path, "--export")
    assert done.returncode == 2 and "models/gone.py:make_programs: no such file" in done.stderr
