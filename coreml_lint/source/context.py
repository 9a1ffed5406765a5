"""What a source rule reads: one parsed Python file and Python's own name resolution.

Detection uses the standard ``ast`` module (about 10x faster than libcst here); libcst is
only used by the fixer, on files that have a fixable finding.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from coreml_lint.core.findings import (
    Finding,
    Location,
    Outcome,
    Replacement,
    Severity,
    SourceFix,
)
from coreml_lint.source.scopes import Scopes


def _imports(nodes: list[ast.AST]) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from every import in the file."""
    names: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


# Public aliases torch code uses for the same object.
_CANONICAL = {
    "torch.nn.modules.normalization.RMSNorm": "torch.nn.RMSNorm",
    "torch.nn.modules.activation.GELU": "torch.nn.GELU",
    "torch.nn.modules.activation.MultiheadAttention": "torch.nn.MultiheadAttention",
    "torch.functional": "torch",
}

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Fields that never hold a node worth entering: names and flags, and the shared
# expression-context and operator singletons.
_LEAF_FIELDS = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "name", "asname", "module", "level", "kind"}
    | {"type_comment", "conversion", "is_async", "simple", "tag"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: (), ast.Name: ()}


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f not in _LEAF_FIELDS)
    return fields


@dataclass
class SourceContext:
    path: str
    text: str
    tree: ast.Module
    config: Any = None  # the LintConfig: source rules read the partitioner settings from it
    rule: Any = None
    _qualnames: dict[int, str | None] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)  # per-file caches rules may keep

    @cached_property
    def _index(
        self,
    ) -> tuple[list[ast.Call], dict[ast.AST, ast.AST], list[ast.AST], set[str]]:
        """One walk over the tree for everything rules ask about: calls, parents, imports,
        and every name bound other than by an import (walking once per rule dominated the
        run time on large trees). The walk is the hot loop of source linting, so it is
        written out by hand: ``ast.iter_child_nodes`` costs two generators per node, and
        the shared context and operator singletons (``Load``, ``Add``) are never entered."""
        calls: list[ast.Call] = []
        parents: dict[ast.AST, ast.AST] = {}
        imports: list[ast.AST] = []
        bound: set[str] = set()
        stack: list[ast.AST] = [self.tree]
        pop, push, known_fields = stack.pop, stack.append, _CHILD_FIELDS
        while stack:
            node = pop()
            cls = node.__class__
            if cls is ast.Call:
                calls.append(node)
            elif cls is ast.Name:
                if node.ctx.__class__ is not ast.Load:
                    bound.add(node.id)
            elif cls is ast.arg:
                bound.add(node.arg)
            elif cls in _DEFINITIONS:
                bound.add(node.name)
            elif cls is ast.Import or cls is ast.ImportFrom:
                imports.append(node)
            # children in ast.iter_child_nodes order, so the walk order (and with it the
            # order of ``imports``, where a later import of a name wins) stays the same
            fields = known_fields.get(cls)
            if fields is None:
                fields = _child_fields(cls)
            for name in fields:
                value = getattr(node, name, None)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, ast.AST):
                            parents[item] = node
                            push(item)
                elif isinstance(value, ast.AST):
                    parents[value] = node
                    push(value)
        calls.sort(key=lambda c: (c.lineno, c.col_offset))
        return calls, parents, imports, bound

    @cached_property
    def imports(self) -> dict[str, str]:
        return _imports(self._index[2])

    @cached_property
    def scopes(self) -> Scopes:
        return Scopes(self.tree, self.parents)

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        return self._index[1]

    def classes(self, name: str) -> list[ast.ClassDef]:
        """The classes of this file called ``name``."""
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef) and n.name == name]

    def calls(self) -> list[ast.Call]:
        return self._index[0]

    @property
    def rebound_names(self) -> set[str]:
        """Names the file binds other than by importing them: only these can shadow an
        import or hold a module-level constant, so only these need a scope lookup."""
        return self._index[3]

    def qualname(self, expr: ast.AST) -> str | None:
        """``F.gelu`` -> ``torch.nn.functional.gelu`` when ``F`` was imported as that."""
        key = id(expr)
        try:
            return self._qualnames[key]
        except KeyError:
            name = self._qualnames[key] = self._qualname(expr)
            return name

    def _qualname(self, expr: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id not in self.imports:
            return None
        if expr.id in self.rebound_names and self.scopes.rebinds_import(expr):
            return None
        dotted = ".".join([self.imports[expr.id], *reversed(parts)])
        for prefix, canonical in _CANONICAL.items():
            if dotted == prefix or dotted.startswith(prefix + "."):
                dotted = canonical + dotted[len(prefix) :]
        return dotted

    def constant(self, expr: ast.AST | None) -> Any:
        """The literal value of ``expr``, or of the module-level constant it names; else
        ``None``."""
        if isinstance(expr, ast.Name) and expr.id in self.rebound_names:
            expr = self.scopes.module_constant(expr)
        return expr.value if isinstance(expr, ast.Constant) else None

    def is_torch_dtype(self, expr: ast.AST | None, names: set[str]) -> bool:
        return expr is not None and self.qualname(expr) in {f"torch.{n}" for n in names}

    def column(self, node: ast.AST) -> int:
        """ast counts columns in UTF-8 bytes; editors and libcst count characters."""
        line = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
        if line.isascii():
            return min(node.col_offset, len(line))
        return len(line.encode("utf-8")[: node.col_offset].decode("utf-8", errors="replace"))

    def finding(
        self,
        node: ast.AST,
        message: str,
        *,
        fix: str | None = None,
        edit: SourceFix | None = None,
        severity: Severity | None = None,
        outcome: Outcome | None = None,
        partitioner: dict[str, Any] | None = None,
        rule: Any = None,
    ) -> Finding:
        """A finding of the running rule, or of ``rule`` when a rule reports a consequence
        another code names (the edit still belongs to the running rule)."""
        line = node.lineno
        source_line = self.lines[line - 1].strip() if line <= len(self.lines) else None
        return (rule or self.rule).make_finding(
            message,
            severity=severity,
            outcome=outcome,
            file=self.path,
            location=Location(self.path, line, self.column(node) + 1, source_line),
            fix=fix,
            partitioner=partitioner,
            edit=edit,
        )

    def edit_expression(
        self,
        node: ast.expr,
        replacement: Replacement,
        *,
        safe: bool,
        description: str,
        **data: Any,
    ) -> SourceFix:
        """A rewrite of a name or attribute expression (the codemod's ``leave_Name`` /
        ``leave_Attribute``, told apart by ``node``: an attribute's first name starts where
        it does)."""
        data = {**data, "node": type(node).__name__}
        return self._edit_at(node, replacement, "<expr>", safe, description, data)

    def edit_string(
        self,
        node: ast.Constant,
        replacement: Replacement,
        *,
        safe: bool,
        description: str,
        **data: Any,
    ) -> SourceFix:
        """A rewrite of the string literal at ``node`` (the codemod's ``leave_SimpleString``)."""
        return self._edit_at(node, replacement, "<str>", safe, description, data)

    def _edit_at(
        self,
        node: ast.AST,
        replacement: Replacement,
        callee: str | None,
        safe: bool,
        description: str,
        data: dict,
    ) -> SourceFix:
        return SourceFix(
            rule=self.rule.code,
            replacement=replacement,
            line=node.lineno,
            column=self.column(node),
            callee=callee,
            safe=safe,
            description=description,
            data=tuple(sorted(data.items())),
        )

    def edit(
        self,
        node: ast.Call,
        replacement: Replacement,
        *,
        safe: bool,
        description: str,
        **data: Any,
    ) -> SourceFix:
        """A rewrite of the call at ``node`` by ``replacement`` (a ``@replacement`` function
        of the rule's module, written beside the check that makes the finding); the callee's
        name tells apart calls that start at the same column (``a(b)(c)``)."""
        func = node.func
        callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return self._edit_at(node, replacement, callee, safe, description, data)


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_star_args(call: ast.Call) -> bool:
    for arg in call.args:  # loops, not any(): this runs for most calls of a file
        if isinstance(arg, ast.Starred):
            return True
    return any(kw.arg is None for kw in call.keywords)


def int_literal(expr: ast.AST | None) -> int | None:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = int_literal(expr.operand)
        return -value if value is not None else None
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    return None
