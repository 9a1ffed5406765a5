"""``--export`` on real exports (torch, no lowering): findings at the model's lines, the
content cache (hit, miss on a changed source, skip for unrelated files), CML002 and noqa."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from coreml_lint.core.config import load_config  # noqa: E402
from coreml_lint.exporting.run import run_exports  # noqa: E402

DECODER = textwrap.dedent(
    """
    import torch
    from torch import nn

    from models.sizes import DIM


    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(DIM, DIM)
            self.register_buffer("k_cache", torch.zeros(1, 4, DIM))

        def forward(self, x, pos):
            k = self.proj(x)
            self.k_cache.index_copy_(1, pos, k)
            return self.k_cache.sum(dim=1)


    def make_programs():
        with torch.no_grad():
            return {"decoder": (Decoder().eval(), (torch.ones(1, 1, DIM), torch.tensor([0])))}
    """
)
BRANCHY = textwrap.dedent(
    """
    import torch


    class Branchy(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x - 1
    """
)


def _project(tmp_path: Path, pyproject: str) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "decoder.py").write_text(DECODER)
    (tmp_path / "models" / "sizes.py").write_text("DIM = 8\n")
    (tmp_path / "models" / "branchy.py").write_text(BRANCHY)
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(pyproject))
    return tmp_path


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose package name is unique to the test: model modules are imported in
    this process, and a name imported by an earlier test would be that test's files."""
    root = _project(
        tmp_path, '[tool.coreml-lint]\nprograms = ["models/decoder.py:make_programs"]\n'
    )
    monkeypatch.syspath_prepend(str(root))
    for name in [n for n in sys.modules if n == "models" or n.startswith("models.")]:
        monkeypatch.delitem(sys.modules, name)
    return root


def test_a_kv_cache_write_is_reported_at_its_model_line_then_the_cache_answers(project):
    config = load_config(project / "pyproject.toml")
    first = run_exports(config)
    assert first.exported == ["models/decoder.py:make_programs"] and not first.hits
    model = project / "models" / "decoder.py"
    state = [f for f in first.findings if f.code == "CML201"]
    assert [(Path(f.location.path), f.location.line) for f in state] == [
        (model, _line(model, "index_copy_"))
    ]
    again = run_exports(config)
    assert again.hits == ["models/decoder.py:make_programs"] and not again.exported
    assert [(f.code, f.location.line) for f in again.findings] == [
        (f.code, f.location.line) for f in first.findings
    ]


def test_a_changed_source_exports_again_and_an_unrelated_file_is_a_no_op(project, monkeypatch):
    config = load_config(project / "pyproject.toml")
    run_exports(config)
    unrelated = project / "models" / "branchy.py"
    skipped = run_exports(config, [unrelated])
    assert skipped.skipped and not skipped.findings and not skipped.hits
    # sizes.py is in no node's stack trace, but the model is built from it.
    sizes = project / "models" / "sizes.py"
    sizes.write_text("DIM = 8  # same value, new bytes\n")
    touched = run_exports(config, [sizes])
    assert touched.exported == ["models/decoder.py:make_programs"]
    # a moved line is another program (its stack traces differ); the older archive goes
    model = project / "models" / "decoder.py"
    model.write_text("# moved down a line\n" + model.read_text())
    assert run_exports(config, [model]).exported == ["models/decoder.py:make_programs"]
    assert len(list((project / ".coreml-lint-cache" / "export").glob("*.pt2"))) == 1


def test_the_ios_of_a_program_table_is_the_one_linted(project):
    (project / "pyproject.toml").write_text(
        "[tool.coreml-lint]\nios = 17\n[[tool.coreml-lint.program]]\n"
        'module = "models/branchy.py:Branchy"\ninputs = ["float32[2, 3]"]\nios = 18\n'
    )
    (project / "models" / "branchy.py").write_text(
        "import torch\n\nclass Branchy(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('c', torch.zeros(2, 3))\n"
        "    def forward(self, x):\n        self.c.add_(x)\n        return self.c * 2\n"
    )
    at_18 = run_exports(load_config(project / "pyproject.toml"))
    assert at_18.exported == ["Branchy"]
    assert not [f for f in at_18.findings if f.code == "CML201"]
    text = (project / "pyproject.toml").read_text().replace("ios = 18", "ios = 16")
    (project / "pyproject.toml").write_text(text)
    at_16 = run_exports(load_config(project / "pyproject.toml"))
    assert at_16.hits == ["Branchy"]  # the target changes the lint, not the export
    assert [f.code for f in at_16.findings if f.code == "CML201"] == ["CML201"]


def test_an_export_failure_is_one_finding_at_the_model_line(project):
    (project / "pyproject.toml").write_text(
        '[tool.coreml-lint]\n[[tool.coreml-lint.program]]\nmodule = "models/branchy.py:Branchy"\n'
        'inputs = ["float32[2, 3]"]\n'
    )
    config = load_config(project / "pyproject.toml")
    done = run_exports(config)
    (failure,) = done.findings
    model = project / "models" / "branchy.py"
    assert failure.code == "CML002"
    assert (Path(failure.location.path), failure.location.line) == (model, _line(model, "if x"))
    assert "torch.export failed" in failure.message and "data-dependent" in failure.message
    assert run_exports(config).hits == ["Branchy"]
    model.write_text(
        model.read_text().replace("if x.sum() > 0:", "if x.sum() > 0:  # noqa: CML002")
    )
    assert run_exports(config).findings == []


def test_programs_are_exported_for_inference(project):
    """Exported with grad, the decoder's cache would get CML204 for how --export exported
    it; the factory here builds the model outside torch.no_grad() on purpose."""
    decoder = project / "models" / "decoder.py"
    decoder.write_text(decoder.read_text().replace("with torch.no_grad():", "if True:"))
    done = run_exports(load_config(project / "pyproject.toml"))
    codes = {f.code for f in done.findings}
    assert "CML201" in codes and "CML204" not in codes


def test_per_file_ignores_apply_to_the_model_file_a_program_finding_points_to(project):
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        + '\n[tool.coreml-lint.per-file-ignores]\n"models/decoder.py" = ["CML2"]\n'
    )
    done = run_exports(load_config(pyproject))
    assert done.findings == [] and done.reports


def test_a_factory_may_export_itself_and_a_table_may_declare_dynamic_shapes(project):
    (project / "models" / "mine.py").write_text(
        "import torch\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n        return self.fc(x).relu()\n\n"
        "def make_programs():\n"
        "    return {'net': torch.export.export(Net().eval(), (torch.ones(2, 4),))}\n"
    )
    (project / "pyproject.toml").write_text(
        '[tool.coreml-lint]\nprograms = ["models/mine.py:make_programs"]\n'
        '[[tool.coreml-lint.program]]\nmodule = "models/mine.py:Net"\n'
        'inputs = ["float32[2, 4]"]\ndynamic-shapes = [{ 0 = [1, 16] }]\n'
    )
    done = run_exports(load_config(project / "pyproject.toml"))
    assert done.exported == ["models/mine.py:make_programs", "Net"]
    assert not [f for f in done.findings if f.code == "CML002"]
    (_, factory), (_, table) = done.reports
    assert all(isinstance(d, int) for t in factory.graph.tensors.values() for d in t.shape)
    assert any(isinstance(d, str) for t in table.graph.tensors.values() for d in t.shape)


def test_a_failed_import_is_built_again_once_the_imported_file_is_fixed(project):
    """A syntax error in a module the model imports names no project frame of that module:
    serving the cached failure would report it after the fix."""
    (project / "models" / "helper.py").write_text("def scale(x)\n    return x * 2\n")
    decoder = project / "models" / "decoder.py"
    decoder.write_text("from models.helper import scale  # noqa: F401\n" + decoder.read_text())
    config = load_config(project / "pyproject.toml")
    assert [f.code for f in run_exports(config).findings] == ["CML002"]
    (project / "models" / "helper.py").write_text("def scale(x):\n    return x * 2\n")
    fixed = run_exports(config, [project / "models" / "helper.py"])
    assert fixed.exported == ["models/decoder.py:make_programs"]
    assert [f.code for f in fixed.findings] == ["CML201"]


def test_check_advice_lowers_the_exported_program_from_the_cache(project, monkeypatch):
    """--check-advice with --export lowers the cached .pt2, not a file named by the label."""
    from click.testing import CliRunner

    from coreml_lint.cli.check import check_command
    from coreml_lint.lowering import check as lowering_check

    lowered = []

    def lower(path, settings):
        lowered.append(Path(path))
        return {"outcome": "lowers to a .pte", "lowers": True}

    monkeypatch.setattr(lowering_check, "lower_with_stock_partitioner", lower)
    monkeypatch.chdir(project)
    result = CliRunner().invoke(check_command, ["--export", "--check-advice"])
    assert "checked with the stock lowering: lowers to a .pte" in result.output
    (archive,) = lowered
    assert archive.is_file() and archive.parent.name == "export" and archive.suffix == ".pt2"


def test_a_rule_that_raises_on_an_exported_program_is_an_internal_error(project, monkeypatch):
    """Its findings are missing: the run must not pass (exit 2), as for a .pt2 given."""
    from click.testing import CliRunner

    from coreml_lint.cli.check import check_command
    from coreml_lint.rules.cml201_state_below_ios18 import StateBelowIOS18

    def broken(self, ctx):
        raise KeyError("x")

    monkeypatch.setattr(StateBelowIOS18, "check", broken)
    monkeypatch.chdir(project)
    result = CliRunner().invoke(check_command, ["--export"])
    assert result.exit_code == 2
    assert "internal error in CML201" in result.output


def test_a_program_declared_at_ios_18_answers_the_source_rule_on_its_lines(project, monkeypatch):
    """The hook lints the staged model source at the project's ios and the program at its
    own: on a line the program ran, the program's silence is the answer (no CML201)."""
    from click.testing import CliRunner

    from coreml_lint.cli.check import check_command

    (project / "pyproject.toml").write_text(
        "[tool.coreml-lint]\nios = 17\n[[tool.coreml-lint.program]]\n"
        'module = "models/branchy.py:Branchy"\ninputs = ["float32[2, 3]"]\nios = 18\n'
    )
    model = project / "models" / "branchy.py"
    model.write_text(
        "import torch\n\n\n"
        "class Branchy(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('c', torch.zeros(2, 3))\n"
        "    def forward(self, x):\n        self.c.add_(x)  # declared\n        return self.c\n\n\n"
        "class Other(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('c', torch.zeros(2, 3))\n"
        "    def forward(self, x):\n        self.c.add_(x)  # not declared\n        return self.c\n"
    )
    monkeypatch.chdir(project)
    result = CliRunner().invoke(
        check_command, ["--export", "--output-format", "concise", str(model)]
    )
    flagged = [line for line in result.output.splitlines() if "CML201" in line]
    assert len(flagged) == 1 and f":{_line(model, '# not declared')}:" in flagged[0], result.output


def test_an_upgraded_library_the_export_imported_exports_again(project, monkeypatch):
    """A model built from a library's code (transformers) changes with its version, and no
    project file says so: the versions of the distributions an export imported are in
    the key."""
    from importlib import metadata

    from coreml_lint.exporting import cache

    config = load_config(project / "pyproject.toml")
    run_exports(config)
    assert run_exports(config).hits
    real = metadata.version
    monkeypatch.setattr(
        cache.metadata, "version", lambda d: "999.0" if d == "sympy" else real(d), raising=True
    )
    assert run_exports(config).exported == ["models/decoder.py:make_programs"]


def test_with_fix_a_source_and_a_program_finding_on_one_line_are_one(project, monkeypatch):
    """The hook with `args: [--fix]`: CML201 at the cache write, once, not twice."""
    from click.testing import CliRunner

    from coreml_lint.cli.check import check_command

    monkeypatch.chdir(project)
    model = project / "models" / "decoder.py"
    result = CliRunner().invoke(
        check_command, ["--export", "--fix", "--output-format", "concise", str(model)]
    )
    flagged = [line for line in result.output.splitlines() if " CML201 " in line]
    assert len(flagged) == 1 and f":{_line(model, 'index_copy_')}" in flagged[0], result.output


@pytest.mark.parametrize("index", ['{"format": 2, "entries": []}', "[]", "{", '{"format": 2}'])
def test_a_damaged_cache_index_means_export_again(project, index):
    (project / ".coreml-lint-cache" / "export").mkdir(parents=True)
    (project / ".coreml-lint-cache" / "export" / "index.json").write_text(index)
    done = run_exports(load_config(project / "pyproject.toml"))
    assert done.exported == ["models/decoder.py:make_programs"]
