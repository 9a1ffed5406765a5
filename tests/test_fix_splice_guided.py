"""Program-guided fixes (``fixers/guided.py``) go through the same two paths as the source
rules' fixes: placed in each guided model file, they are written alike in place and by the
whole-file codemod, and the fast path does the work for the plain calls."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from coreml_lint.core.findings import SourceFix
from coreml_lint.fixers.apply import compute_fix
from coreml_lint.fixers.guided import place
from coreml_lint.fixers.splice import splice_fixes
from coreml_lint.source.context import SourceContext

MODELS = Path(__file__).parent / "fixtures" / "guided"
# The guided edits that are a plain call rewrite: the fast path must take them itself.
IN_PLACE = {"bool_inputs", "fill_attribute", "rmsnorm_attribute", "uint8_table"}


def _guided_edits(path: Path) -> list[SourceFix]:
    import torch

    from coreml_lint import lint_program

    spec = importlib.util.spec_from_file_location(f"{path.stem}_splice", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = torch.export.export(module.Model().eval(), module.example_inputs())
    findings = [
        f
        for f in lint_program(program).findings
        if f.location is not None and Path(f.location.path).resolve() == path.resolve()
    ]
    placed = place(findings, path.read_text(), str(path), None)
    return [p for p in placed if isinstance(p, SourceFix)]


@pytest.mark.parametrize("name", sorted(p.stem for p in MODELS.glob("*.py")))
def test_guided_fixes_are_written_alike_both_ways(name):
    path = MODELS / f"{name}.py"
    text = path.read_text()
    edits = _guided_edits(path)
    assert edits, "the program placed no fix in its model file"
    ctx = SourceContext(str(path), text, ast.parse(text))
    whole = compute_fix(str(path), text, edits)
    fast = compute_fix(str(path), text, edits, ctx)
    assert whole.error is None and whole.changed
    assert (fast.fixed, fast.applied, fast.error) == (whole.fixed, whole.applied, whole.error)
    if name in IN_PLACE:
        assert splice_fixes(ctx, edits) is not None
