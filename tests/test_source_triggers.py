"""Sharper source triggers decide which rules run on a file: they may match a file where a
rule finds nothing, never miss one where it finds something."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coreml_lint.core.config import LintConfig
from coreml_lint.engine.source import lint_source
from coreml_lint.rules import all_rules
from coreml_lint.source.context import SourceContext
from coreml_lint.source.triggers import CalleeNames

MAX = CalleeNames("amax", "amin", "max", "min", "maximum", "minimum")


@pytest.mark.parametrize(
    "text",
    [
        "m = (x > 0).amax(dim=1)",
        "m = torch.maximum(a > 0, b > 0)",
        "m = (x > 0) . max()",
        "m = ((x > 0).\n    max())",
        "m = ((x > 0).  # why\n    # more\n    min())",
        "m = (x > 0).\\\nmax()",
        "from torch import max\nm = max(x > 0)",
        "from torch import max as tmax",
        "import os; from torch import min",
        "from torch import (\n    sum,  # not this (one)\n    amax,\n)",
        "from torch import \\\n    maximum",
        "import torch.max as m",
    ],
)
def test_callee_forms_match(text):
    assert MAX.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "n = max(a, b) + min(c, d)",
        "# the maximum of x.maximal\nlimit = 'max'",
        "x.max_pool(y); x.amaxed()",
        "from torch import (\n    sum,  # max\n)\nprint(max(1, 2))",
        "from torch import maxi",
    ],
)
def test_other_uses_do_not_match(text):
    assert not MAX.search(text)


def test_a_file_that_does_not_parse_is_reported_as_before():
    """Only the rules run depend on the sharper triggers: a broken file that mentions a
    rule's names is still parsed, and reported."""
    (finding,) = lint_source("import torch\nlimit = max(1,\n", "m.py")
    assert finding.code == "CML001"


def _rules_with_trigger_objects():
    return [r for r in all_rules() if any(not isinstance(t, str) for t in r.source_triggers)]


def _files() -> list[Path]:
    import torch

    root = Path(torch.__file__).parent
    return sorted((root / "nn").rglob("*.py")) + sorted((root / "distributions").rglob("*.py"))


def test_triggers_hold_on_real_code():
    """Run each rule on every file of two torch packages whatever its triggers say: where it
    finds something, its triggers match."""
    rules = _rules_with_trigger_objects()
    assert rules
    checked = 0
    for path in _files():
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        ctx = SourceContext(str(path), text, tree, config=LintConfig())
        for rule in rules:
            ctx.rule = rule
            if list(rule().check_source(ctx)):
                checked += 1
                assert any(t.search(text) for t in rule.source_triggers), (rule.code, path)
    assert checked  # the two packages do hold findings of these rules
