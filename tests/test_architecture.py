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
    "coreml_lint.measured": 1,
    "coreml_lint.source": 1,
    "coreml_lint.stack": 1,  # the real stack (torch, executorch, coremltools), imported lazily
    "coreml_lint.coreai_stack": 1,  # the Core AI stack (coreai-torch, coreai-core), lazily
    "coreml_lint.rulekit": 2,
    "coreml_lint.rules": 3,
    "coreml_lint.engine": 4,
    "coreml_lint.fixers": 5,
    "coreml_lint.lowering": 5,
    "coreml_lint.exporting": 5,
    "coreml_lint.reports": 5,
    "coreml_lint.verifier": 5,
    "coreml_lint.sweep": 5,
    "coreml_lint.checking": 5,  # the check run: drives fixers, exporting, sweep, lowering
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


def _module_graph() -> dict[str, set[str]]:
    """Module -> the coreml_lint modules it imports (``from package import module`` counts as
    importing the module)."""
    known = {name for name, _ in _modules()}
    graph: dict[str, set[str]] = {}
    for name, path in _modules():
        edges = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom) and (node.module or "") in known:
                subs = {f"{node.module}.{a.name}" for a in node.names}
                edges.update(subs & known or {node.module})
        edges.discard(name)
        graph[name] = edges
    return graph


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (imports that never run)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    return [n for n in ast.walk(tree) if id(n) not in skipped]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycles_between_modules():
    """A cycle inside a layer is as tangled as one across layers: lazy imports count too
    (type-only ones do not run). A package's ``__init__`` importing its own modules, to
    re-export them, is not a cycle."""
    graph = _module_graph()
    faces = {name for name, path in _modules() if path.name == "__init__.py"}
    for name in faces:
        graph[name] = {e for e in graph[name] if not e.startswith(name + ".")}
    assert not _cycles(graph)


def test_no_import_cycles_between_packages():
    graph: dict[str, set[str]] = {}
    for name, edges in _module_graph().items():
        graph.setdefault(_package(name), set()).update(
            _package(e) for e in edges if _package(e) != _package(name)
        )
    assert not _cycles(graph)


def test_only_the_stack_room_runs_the_real_stack():
    """Stock lowering and MIL capture have one home: no other module calls
    ``to_edge_transform_and_lower`` or wraps ``CoreMLBackend._convert_to_mlmodel``."""
    owners = []
    for module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            called = isinstance(node, ast.Call) and "to_edge_transform_and_lower" in ast.unparse(
                node.func
            )
            wrapped = isinstance(node, ast.Assign) and any(
                ast.unparse(t).endswith("_convert_to_mlmodel") for t in node.targets
            )
            if called or wrapped:
                owners.append(module)
    assert all(m.startswith("coreml_lint.stack") for m in owners), owners


def test_only_the_coreai_room_converts_for_core_ai():
    """Core AI conversion and execution have one home, as the Core ML stack has:
    no other module calls ``TorchConverter``, ``to_coreai`` or ``save_asset``."""
    owners = []
    for module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and re.search(
                r"(TorchConverter|to_coreai|save_asset)$", ast.unparse(node.func)
            ):
                owners.append(module)
    assert owners and all(m.startswith("coreml_lint.coreai_stack") for m in owners), owners


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
