"""The one registry of output formats (``reports/registry.py``): a format is one module, and
every command offers exactly the formats that can render its report kind."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path

import pytest

from coreml_lint.cli.main import main
from coreml_lint.reports import registry

SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Norm(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.RMSNorm(8)
    """
)


@pytest.fixture
def toy():
    """A format that renders check and migrate reports only, and no --check-advice."""
    module = types.ModuleType("toy_format")
    module.NAME = "toy"
    module.RENDERERS = {
        "check": lambda view: f"toy check: {len(view.findings)} finding(s)",
        "migrate": lambda view: "toy migrate",
    }
    registry.register(module)
    yield module
    registry.unregister("toy")


def _help(capsys: pytest.CaptureFixture[str], command: str) -> str:
    capsys.readouterr()
    assert main([command, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_every_command_offers_a_registered_format_it_can_render(toy, capsys):
    for command, offered in (
        ("check", True),
        ("migrate", True),
        ("verify", False),
        ("lower", False),
    ):
        assert ("toy" in _help(capsys, command)) is offered, command


def test_check_renders_through_the_registered_format(toy, tmp_path: Path, capsys):
    model = tmp_path / "model.py"
    model.write_text(SOURCE)
    capsys.readouterr()
    code = main([str(model), "--output-format", "toy"])
    out = capsys.readouterr().out
    assert code == 1 and out == "toy check: 1 finding(s)\n"


def test_a_command_refuses_a_format_that_cannot_render_its_report(toy, tmp_path, capsys):
    program = tmp_path / "absent.pt2"
    capsys.readouterr()
    assert main(["verify", str(program), "--output-format", "toy"]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--output-format': 'toy' is not one of" in err
    assert (
        main(["lower", str(program), "-o", str(tmp_path / "y.pte"), "--output-format", "toy"]) == 2
    )
    assert "'toy' is not one of" in capsys.readouterr().err


def test_check_advice_refuses_a_format_that_does_not_show_it(toy, tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text(SOURCE)
    capsys.readouterr()
    assert main([str(model), "--check-advice", "--output-format", "toy"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: --check-advice reports in the full, concise, json and html formats, not toy\n"
    )


def test_the_built_in_formats_and_the_kinds_they_render():
    assert registry.names("check") == (
        "full",
        "concise",
        "json",
        "github",
        "sarif",
        "html",
        "model-explorer",
    )
    assert registry.names("verify") == ("full", "concise", "json", "github", "sarif", "html")
    assert registry.names("lower") == ("full", "json", "html")
    assert registry.names("migrate") == ("full", "json", "html")
    assert registry.advice_names() == ("full", "concise", "json", "html")


def test_lower_json_and_another_output_format_is_one_line(tmp_path, capsys):
    capsys.readouterr()
    args = ["lower", str(tmp_path / "a.pt2"), "-o", str(tmp_path / "a.pte")]
    assert main([*args, "--json", "--output-format", "full"]) == 2
    assert capsys.readouterr().err == "error: --json and --output-format full: give one\n"
