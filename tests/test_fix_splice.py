"""The fast path of fixing (each fixed call parsed and rendered alone, in place) writes
exactly what the whole-file libcst codemod writes, and applies the same fixes; where it
cannot be sure, it leaves the file to the codemod."""

from __future__ import annotations

from pathlib import Path

import pytest

from coreml_lint.engine.source import lint_source_context
from coreml_lint.fixers.apply import compute_fix, selected_edits
from coreml_lint.fixers.splice import splice_fixes
from coreml_lint.rules import all_rules

SOURCES = Path(__file__).parent / "fixtures" / "source"

# Texts the fast path must rewrite itself, as the codemod does.
SPLICED = {
    "plain": "import torch\nx = torch.full((2,), 1)\n",
    "alias": "import torch as th\nx = th.full((2,), 1)\n",
    "own parentheses kept": "import torch\nx = (torch.full((2,), 1))\n",
    "own parentheses dropped": "import torch\nx = (torch.zeros(2, 3, dtype=torch.long))\n",
    "two levels": "import torch\nx = ((torch.zeros(2, dtype=torch.long)))\n",
    "multi-line parentheses": "import torch\nx = (\n    torch.zeros(2, dtype=torch.int32)\n)\n",
    "keyword value in parentheses": "import torch\nf(a=(torch.zeros(2, dtype=torch.long)))\n",
    "call argument": "import torch\nf(torch.zeros(2, dtype=torch.long))\n",
    "call argument, then more": "import torch\nf(torch.zeros(2, dtype=torch.long), 1)\n",
    "last argument": "import torch\nf(1, torch.zeros(2, dtype=torch.long))\n",
    "call of a call": "import torch\nf(1)(torch.zeros(2, dtype=torch.long))\n",
    "tuple": "import torch\nx = (torch.full((2,), 1),)\n",
    "generator": "import torch\nx = list(torch.full((2,), 1) for i in range(3))\n",
    "parenthesised function": "import torch\nx = (torch.full)((2,), 1)\n",
    "unicode before": (
        "import torch\ns = 'é'; x = torch.full((2,), 'ü' and 1)\ny = torch.full((2,), 1)\n"
    ),
    "unicode inside": (
        "import torch\nx = torch.full((2,), 1)  # é\ny = torch.full(('é' and 2,), 1)\n"
    ),
    "tabs": "import torch\ndef f():\n\tx = torch.full((2,), 1)\n",
    "multi-line call": (
        "import torch\n\n\ndef f(x):\n    y = torch.full(\n        (2, 3),  # shape\n"
        "        7,\n    )\n    return y\n"
    ),
    "continuation": "import torch\nx = torch.full((2,), \\\n    1)\n",
    "many": "import torch\n" + "".join(f"a{i} = torch.full((2,), {i})\n" for i in range(50)),
    "methods": "import torch\nm = (x > 0).amax(dim=1)\nn = torch.maximum(a > 0, b > 0)\n",
    "comment before, no parentheses": "import torch\nf(  # c\n    torch.full((2,), 1), 2)\n",
    "new_zeros": "import torch\ndef f(x):\n    return x.new_zeros((2, 3), dtype=torch.int32)\n",
    "decorator": "import torch\n@torch.full((2,), 1)\ndef f():\n    pass\n",
    "lambda": "import torch\nf = lambda: torch.full((2,), 1)\n",
    "walrus": "import torch\nif (y := torch.full((2,), 1)) is not None:\n    pass\n",
    "default": "import torch\ndef f(a=(torch.full((2,), 1))):\n    pass\n",
    "unary": "import torch\nx = -(torch.zeros(2, dtype=torch.long))\n",
    "start of file": "(torch.zeros(2, dtype=torch.long))\nimport torch\n",
    "rms norm": "import torch\nimport torch.nn as nn\nnorm = nn.RMSNorm(64)\n",
}
# Texts the fast path leaves to the codemod.
CODEMOD = {
    "no torch import": "from torch import full\nx = full((2,), 1)\n",
    "helper": "import torch\nimport torch.nn.functional as F\ny = F.gelu(x, approximate='tanh')\n",
    "nested": (
        "import torch\nx = torch.full((2,), 1) if torch.full((3,), 2) else 0\n"
        "f(torch.full((torch.full((1,), 2).numel(),), 3))\n"
    ),
    "keyword before parentheses": (
        "import torch\ndef f():\n    return (torch.zeros(2, dtype=torch.long))\n"
    ),
    "match subject": (
        "import torch\nmatch (torch.zeros(2, dtype=torch.long)):\n    case _:\n        pass\n"
    ),
    "comment in parentheses": "import torch\nx = (  # c\n    torch.zeros(2, dtype=torch.long)\n)\n",
    "f-string": "import torch\nx = f'{torch.full((2,), 1)}'\n",
    "crlf": "import torch\r\nx = torch.full((2,), 1)\r\n",
    "form feed": "import torch\n\x0c\nx = torch.full((2,), 1)\n",
    "string fix": (
        "from executorch.backends.apple.coreml.partition import CoreMLPartitioner\n"
        "p = CoreMLPartitioner(skip_ops_for_coreml_delegation=['gelu.default'])\n"
    ),
}


def _both(text: str) -> tuple[object, object, object]:
    findings, ctx = lint_source_context(text, "m.py")
    edits = selected_edits(findings, unsafe=True)
    assert edits, "the case has nothing to fix"
    whole = compute_fix("m.py", text, edits)  # no parsed file: the codemod
    fast = compute_fix("m.py", text, edits, ctx)
    return whole, fast, splice_fixes(ctx, edits)


@pytest.mark.parametrize("name", sorted(SPLICED))
def test_fast_path_writes_what_the_codemod_writes(name):
    whole, fast, spliced = _both(SPLICED[name])
    assert spliced is not None, "the fast path gave up"
    assert whole.error is None and fast.error is None
    assert fast.fixed == whole.fixed and fast.fixed != fast.original
    assert fast.applied == whole.applied


@pytest.mark.parametrize("name", sorted(CODEMOD))
def test_unsure_cases_go_to_the_codemod(name):
    whole, fast, spliced = _both(CODEMOD[name])
    assert spliced is None
    assert (fast.fixed, fast.applied, fast.error) == (whole.fixed, whole.applied, whole.error)


def _texts() -> list[str]:
    examples = [e.source() for rule in all_rules() for e in rule.examples if e.flagged]
    return examples + [p.read_text() for p in sorted(SOURCES.glob("*.py"))]


@pytest.mark.parametrize("index", range(len(_texts())))
def test_rule_examples_and_fixtures_agree(index):
    text = _texts()[index]
    findings, ctx = lint_source_context(text, "m.py")
    edits = selected_edits(findings, unsafe=True)
    if not edits:
        return
    whole = compute_fix("m.py", text, edits)
    fast = compute_fix("m.py", text, edits, ctx)
    assert (fast.fixed, fast.applied, fast.error) == (whole.fixed, whole.applied, whole.error)
