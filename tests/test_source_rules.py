"""Source rules on fixture files: a line ending in ``# expect: CODE`` must be flagged with
that code, and no other line may be flagged (the negatives sit beside the positives)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coreml_lint.lint.config import LintConfig
from coreml_lint.lint.errors import InputError
from coreml_lint.source.engine import lint_source, lint_source_file

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


@pytest.mark.parametrize(
    "data, message",
    [
        (b"import torch\ndef f(:\n  torch.full((1,), 2)\n", "syntax error"),
        (b"import torch\nx = '\xff\xfe'\ntorch.full((1,), 2)\n", "not UTF-8"),
    ],
)
def test_unreadable_sources_raise_one_line(tmp_path, data, message):
    path = tmp_path / "bad.py"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        lint_source_file(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bom_and_crlf_are_handled(tmp_path):
    path = tmp_path / "crlf.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\ny = torch.full((2,), 3)\r\n")
    (finding,) = lint_source_file(path)
    assert finding.location.line == 2
