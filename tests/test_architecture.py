"""The shape of the code, checked: layers import only downwards, functions stay short, the
lowering step knows no rule, and every error rule has a lowering answer or says why not.
See docs/architecture.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from coreml_lint.core.findings import Severity
from coreml_lint.rules import all_rules

PACKAGE = Path(__file__).parents[1] / "coreml_lint"
# Lower layers never import higher ones; a layer may import its own.
LAYERS = {
    "coreml_lint.core": 0,
    "coreml_lint.program": 1,
    "coreml_lint.source": 1,
    "coreml_lint.rulekit": 2,
    "coreml_lint.rules": 3,
    "coreml_lint.engine": 4,
    "coreml_lint.fixers": 5,
    "coreml_lint.lowering": 5,
    "coreml_lint.exporting": 5,
    "coreml_lint.reports": 5,
    "coreml_lint.verifier": 5,
    "coreml_lint.sweep": 5,
    "coreml_lint.cli": 6,
    "coreml_lint": 7,  # the package face (__init__, __main__)
}
MAX_FUNCTION_LINES = 80


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path))
    return found


def _layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def _imports(path: Path) -> set[str]:
    """Every coreml_lint module a file imports, at module level or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("coreml_lint"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coreml_lint"):
            names.add(node.module)
    return names


@pytest.mark.parametrize("module, path", _modules(), ids=[m for m, _ in _modules()])
def test_imports_go_downwards(module, path):
    mine = _layer(module)
    upwards = sorted(i for i in _imports(path) if _layer(i) > mine)
    assert not upwards, f"{module} (layer {mine}) imports higher layers: {upwards}"


def test_functions_are_short():
    long = []
    for module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name}: {length} lines")
    assert not long, long


def test_lowering_knows_no_rule_code():
    """What lower does for a rule lives in the rule's module (its hooks)."""
    for path in (PACKAGE / "lowering").rglob("*.py"):
        codes = re.findall(r"CML\d{3}", path.read_text())
        assert not codes, f"{path.name} names rules: {codes}"


def test_every_error_rule_has_a_lowering_answer_or_says_why_not():
    for rule in all_rules():
        if rule.severity is not Severity.ERROR:
            continue
        assert rule.lowers() or rule.cannot_lower, f"{rule.code}: no hook and no reason"
        assert not (rule.lowers() and rule.cannot_lower), f"{rule.code}: both"
