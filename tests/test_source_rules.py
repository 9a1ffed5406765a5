"""Source rules on fixture files: a line ending in ``# expect: CODE`` must be flagged with
that code, and no other line may be flagged (the negatives sit beside the positives)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coreml_lint.core.config import LintConfig
from coreml_lint.core.errors import InputError
from coreml_lint.engine.source import lint_source, lint_source_file

SOURCES = Path(__file__).parent / "fixtures" / "source"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>[A-Z0-9, ]+)$")


def _expected(path: Path) -> set[tuple[int, str]]:
    expected = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            expected.update((number, c.strip()) for c in match.group("codes").split(","))
    return expected


@pytest.mark.parametrize("name", sorted(p.name for p in SOURCES.glob("*.py")))
def test_fixture_findings(name):
    path = SOURCES / name
    found = {(f.location.line, f.code) for f in lint_source_file(path)}
    assert found == _expected(path)


def test_findings_carry_exact_line_and_column():
    (finding,) = lint_source("import torch\nx = 1; y = torch.full((2,), 3)\n", "m.py")
    assert (finding.location.line, finding.location.column) == (2, 12)
    assert finding.location.source_line == "x = 1; y = torch.full((2,), 3)"


def test_partitioner_settings_apply_to_source_rules():
    text = (
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        '        self.register_buffer("b", torch.tensor([1, 2], dtype=torch.uint8))\n'
    )
    assert lint_source(text, "m.py")
    ios17 = LintConfig().with_partitioner(minimum_deployment_target=17)
    assert not lint_source(text, "m.py", ios17)


def test_files_without_torch_are_not_parsed():
    assert lint_source("this is not python but mentions full(", "notes.py") == []


def test_undecodable_source_raises_one_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_bytes(b"import torch\nx = '\xff\xfe'\ntorch.full((1,), 2)\n")
    with pytest.raises(InputError) as info:
        lint_source_file(path)
    assert "not UTF-8" in str(info.value) and "\n" not in str(info.value)


def test_syntax_error_is_a_finding_at_its_line(tmp_path):
    """As in ruff: a file that does not parse is one finding; the run goes on."""
    path = tmp_path / "bad.py"
    path.write_bytes(b"import torch\ndef f(:\n  torch.full((1,), 2)\n")
    (finding,) = lint_source_file(path)
    assert (finding.code, finding.severity.value, finding.location.line) == ("CML001", "error", 2)
    assert finding.message.startswith("syntax error") and "not linted" in finding.message


def test_a_model_file_without_any_rule_pattern_is_still_parsed(tmp_path):
    """A syntax error is a finding whatever the file holds, once it is model code (it
    mentions torch); the triggers only choose which rules walk a file that parses."""
    path = tmp_path / "plain.py"
    path.write_bytes(b"import torch\ndef f(:\n  pass\n")
    (finding,) = lint_source_file(path)
    assert (finding.code, finding.location.line) == ("CML001", 2)


def test_newer_python_syntax_is_told_apart(tmp_path):
    """PEP 695 generics parse with libcst's grammar but not with this interpreter's ast."""
    import sys

    path = tmp_path / "new.py"
    path.write_text("import torch\n\ndef f[T](x: T) -> T:\n    return torch.full((1,), 2)\n")
    findings = lint_source_file(path)
    if sys.version_info >= (3, 12):
        assert [f.code for f in findings] == ["CML301"]
        return
    (finding,) = findings
    assert finding.code == "CML001" and finding.severity.value == "warning"
    assert "newer than Python 3." in finding.message


def test_bom_and_crlf_are_handled(tmp_path):
    path = tmp_path / "crlf.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\ny = torch.full((2,), 3)\r\n")
    (finding,) = lint_source_file(path)
    assert finding.location.line == 2
