"""One libcst codemod that applies every selected fix of a file in a single pass.

Each ``SourceFix`` names the call it rewrites by position (and callee, since ``a(b)(c)``
starts two calls at one column) and carries its rewrite (``SourceFix.replacement``, made
where the rule made the finding): this module knows no rule.
Imports go through libcst's ``AddImportsVisitor``; module-level helpers a fix needs (a
small ``nn.Module``) are inserted once, after the imports.
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from coreml_lint.core.findings import SourceFix


def callee_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


class ApplyFixes(VisitorBasedCodemodCommand):
    DESCRIPTION = "Apply coreml-lint fixes."
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, context: CodemodContext, fixes: list[SourceFix]) -> None:
        super().__init__(context)
        self.fixes = {(f.line, f.column, f.callee): f for f in fixes}
        self.applied: list[SourceFix] = []
        self.helpers: dict[str, str] = {}
        self.torch_alias: str | None = None

    def need_import(self, module: str, name: str | None = None) -> None:
        AddImportsVisitor.add_needed_import(self.context, module, name)

    def torch(self) -> str:
        """The name this file uses for the torch module, importing torch if it has none."""
        if self.torch_alias is None:
            self.need_import("torch")
            return "torch"
        return self.torch_alias

    def visit_Module(self, node: cst.Module) -> None:
        self.torch_alias = None
        for stmt in node.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if cst.Module([]).code_for_node(alias.name) == "torch":
                            self.torch_alias = alias.asname.name.value if alias.asname else "torch"

    def need_helper(self, name: str, code: str) -> None:
        self.helpers.setdefault(name, code)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        start = self.get_metadata(PositionProvider, original).start
        fix = self.fixes.get((start.line, start.column, callee_name(original.func)))
        if fix is None:
            return updated
        replacement = fix.apply(updated, self)
        self.applied.append(fix)
        return replacement

    def leave_SimpleString(
        self, original: cst.SimpleString, updated: cst.SimpleString
    ) -> cst.BaseExpression:
        return self._at(original, updated, "<str>")

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self._at(original, updated, "<expr>")

    def leave_Attribute(
        self, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression:
        return self._at(original, updated, "<expr>")

    def _at(self, original: cst.CSTNode, updated: cst.CSTNode, kind: str) -> cst.CSTNode:
        """Apply the non-call fix registered at this node's start, if any."""
        try:
            start = self.get_metadata(PositionProvider, original).start
        except KeyError:
            return updated
        fix = self.fixes.get((start.line, start.column, kind))
        if fix is None or fix in self.applied:
            return updated
        if fix.get("node", type(original).__name__) != type(original).__name__:
            return updated  # `nn` starts where the fix's `nn.RMSNorm` does
        self.applied.append(fix)
        return fix.apply(updated, self)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.helpers:
            return updated
        body = list(updated.body)
        defined = {
            stmt.name.value for stmt in body if isinstance(stmt, (cst.ClassDef, cst.FunctionDef))
        }
        two_blank_lines = [cst.EmptyLine(), cst.EmptyLine()]  # PEP 8, as ruff format writes
        new = [
            cst.parse_statement(code).with_changes(leading_lines=two_blank_lines)
            for name, code in self.helpers.items()
            if name not in defined
        ]
        index = 0
        for i, stmt in enumerate(body):
            if _is_import_or_docstring(stmt):
                index = i + 1
        following = body[index:]
        if new and following:
            following[0] = _after_blank_lines(following[0], 2)
        return updated.with_changes(body=body[:index] + new + following)


def _after_blank_lines(stmt: cst.CSTNode, count: int) -> cst.CSTNode:
    """``stmt`` with at least ``count`` blank lines before it (and before its comments)."""
    lines = list(getattr(stmt, "leading_lines", ()))
    blank = 0
    while blank < len(lines) and lines[blank].comment is None:
        blank += 1
    if blank >= count:
        return stmt
    return stmt.with_changes(leading_lines=[cst.EmptyLine()] * (count - blank) + lines)


def _is_import_or_docstring(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    return all(
        isinstance(s, (cst.Import, cst.ImportFrom))
        or (isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString))
        for s in stmt.body
    )
