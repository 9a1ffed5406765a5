"""Generated files (fixable calls in random places, layouts and nestings) fixed both ways:
the fast path (``fixers/splice.py``) must write exactly what the whole-file codemod writes,
apply the same fixes in the same order and report the same errors, whichever of the two
ends up doing the work. Seeded, so a failure names a file that can be regenerated."""

from __future__ import annotations

import random

import pytest

from coreml_lint.engine.source import lint_source_context
from coreml_lint.fixers.apply import compute_fix, selected_edits
from coreml_lint.fixers.splice import splice_fixes

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
# Calls a source rule fixes, as (callee, arguments): the arguments are laid out below.
CALLS = [
    ("torch.full", ["(2, 3)", "3001"]),
    ("torch.full", ["(2,)", "7"]),
    ("torch.full", ["(2, 3)", "(3001)"]),
    ("torch.full", ["size", "fill_value=5"]),
    ("torch.full", ["(2,)", "-1 + 4"]),
    ("torch.zeros", ["2", "3", "dtype=torch.long"]),
    ("torch.zeros", ["(4,)", "dtype=torch.int32"]),
    ("x.new_zeros", ["(2, 3)", "dtype=torch.int32"]),
    ("(x > 0).amax", ["dim=1"]),
    ("torch.maximum", ["a > 0", "b > 0"]),
    ("nn.RMSNorm", ["64"]),
    ("F.rms_norm", ["x", "(64,)", "None", "None"]),
    ("F.max_pool2d", ["x", "2"]),
    ("F.max_pool1d", ["x", "3", "None"]),
    ("F.gelu", ["x", "approximate='tanh'"]),
]
CASES = 300


def _call(rng: random.Random, indent: str, depth: int = 0) -> str:
    callee, args = rng.choice(CALLS)
    args = list(args)
    if depth < 2 and rng.random() < 0.15:  # a fixable call inside another one's arguments
        args[0] = _call(rng, indent, depth + 1)
    layout = rng.random()
    if layout < 0.5:
        inside = ", ".join(args)
    elif layout < 0.75:  # one argument per line, maybe a trailing comma and comments
        step = indent + rng.choice(["    ", "        ", "\t", "  "])
        lines = [
            f"{step}{a},{rng.choice(['', '', '  # note é'])}" if i < len(args) - 1 else step + a
            for i, a in enumerate(args)
        ]
        comma = rng.choice(["", ","])
        inside = "\n" + "\n".join(lines) + comma + "\n" + indent
    else:  # broken after the first argument, with a continuation or not
        inside = args[0] + "," + rng.choice(["\n", " \\\n"]) + indent + "  " + ", ".join(args[1:])
        inside = inside.rstrip(", ")
    call = f"{callee}{rng.choice(['', ' '])}({inside})"
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        call = rng.choice(["(", "( ", "(\n" + indent + "  "]) + call + rng.choice([")", " )"])
    return call


def _statement(rng: random.Random, indent: str) -> str:
    call = _call(rng, indent)
    return rng.choice(
        [
            f"y = {call}",
            f"y = f({call})",
            f"y = f(1, {call}, z)",
            f"y = f(k={call})",
            f"y = [{call}, {call}]",
            f"y = {{'a': {call}}}",
            f"y = table[{call}]",
            f"y = -{call}",
            f"y = g(2)({call})",
            f"y = lambda: {call}",
            f"y = ({call},)",
            f"y = [{call} for i in range(3)]",
            f"y = 1 if {call} else {call}",
            f"s = 'é (ü'; y = {call}",
            f"y = {call}  # trailing ( comment",
            f"y = {call}.float()",
            f"y: int = {call}",
            f"print({call}, sep='')",
            f"return {call}",
            f"y = f'{{{call}}}'",
        ]
    )


def _file(seed: int) -> str:
    rng = random.Random(seed)
    out = [HEADER]
    if rng.random() < 0.2:
        out.append("import torch as th\n")
    for _ in range(rng.randint(1, 6)):
        kind = rng.random()
        if kind < 0.3:
            out.append(_statement(rng, "").replace("return ", "y = ") + "\n")
        elif kind < 0.7:
            indent = rng.choice(["    ", "\t"])
            body = [indent + _statement(rng, indent) for _ in range(rng.randint(1, 3))]
            out.append("\n\ndef f(x, a, b):\n" + "\n".join(body) + "\n")
        else:
            inner = "        "
            body = [inner + _statement(rng, inner) for _ in range(rng.randint(1, 3))]
            out.append(
                "\n\nclass M(nn.Module):\n    def forward(self, x):\n        if x:\n"
                + "\n".join("    " + line for line in body)
                + "\n"
            )
    return "".join(out)


@pytest.mark.parametrize("seed", range(CASES))
def test_generated_files_are_fixed_alike_both_ways(seed):
    text = _file(seed)
    try:
        compile(text, "m.py", "exec")
    except SyntaxError:
        pytest.skip("the generator wrote something Python does not accept")
    findings, ctx = lint_source_context(text, "m.py")
    edits = selected_edits(findings, unsafe=True)
    if not edits:
        pytest.skip("nothing to fix")
    whole = compute_fix("m.py", text, edits)
    fast = compute_fix("m.py", text, edits, ctx)
    assert (fast.fixed, fast.applied, fast.error) == (whole.fixed, whole.applied, whole.error)


def test_the_generator_reaches_the_fast_path_often(monkeypatch):
    """Most generated files are fixed in place, and most fixed calls have their kept
    arguments copied from the text: the comparison above is not vacuous."""
    import coreml_lint.fixers.splice as splice

    cuts = []
    original = splice._first_changed_argument

    def recording(*args):
        cuts.append(original(*args))
        return cuts[-1]

    monkeypatch.setattr(splice, "_first_changed_argument", recording)
    spliced = 0
    for seed in range(60):
        text = _file(seed)
        try:
            compile(text, "m.py", "exec")
        except SyntaxError:
            continue
        findings, ctx = lint_source_context(text, "m.py")
        edits = selected_edits(findings, unsafe=True)
        spliced += bool(edits) and ctx is not None and splice_fixes(ctx, edits) is not None
    assert spliced >= 8
    copied = sum(cut is not None for cut in cuts)
    assert copied >= len(cuts) / 3 and copied < len(cuts), (copied, len(cuts))
