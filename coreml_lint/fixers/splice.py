"""The fast path of a file's fixes: rewrite just the calls, in the text.

The codemod (``fixers/codemod.py``) parses the whole file with libcst, computes every
node's position, walks the tree and renders it back: about 15x the cost of the parse
alone, for a file whose fixes touch a few calls. Here, each call to fix is cut out of the
text at the span ``ast`` gives it, parsed alone with ``libcst.parse_expression``, handed
to its rule's ``transform`` and rendered in place. libcst renders every untouched node
exactly as it was parsed, so the file comes out as the codemod writes it, at the cost of
parsing the fixed calls only.

Whatever could make the two differ takes the codemod instead (``splice_fixes`` returns
None): a transform that needs the module (an import, a helper, the codemod context), a
fix of a name or a string, fixes nested in one another, parentheses around a call that
libcst would hand to the transform and cannot be told apart from a call's own, calls in
f-strings (whose ``ast`` positions Python 3.11 does not always get right), line breaks
other than ``\\n`` (where ``ast`` and libcst count lines differently), and any error.
"""

from __future__ import annotations

import ast
import keyword
import re
from itertools import accumulate, pairwise
from typing import Any

from coreml_lint.core.findings import SourceFix
from coreml_lint.rules import rule_by_code
from coreml_lint.source.context import SourceContext

# Characters str.splitlines() (and with it SourceContext.lines) breaks on besides "\n".
_OTHER_LINE_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_BY_NODE = ("<expr>", "<str>")  # fixes of a name, attribute or string: the codemod's


class NeedsModule(Exception):
    """A transform asked for a change outside its call: the codemod has to make it."""


class CallEdits:
    """What a rule's ``transform`` gets as ``edits`` on the fast path: the file's name for
    torch, and nothing that changes the module (those raise NeedsModule)."""

    def __init__(self, torch_alias: str | None) -> None:
        self.torch_alias = torch_alias

    def torch(self) -> str:
        if self.torch_alias is None:
            raise NeedsModule("import torch")
        return self.torch_alias

    def need_import(self, module: str, name: str | None = None) -> None:
        raise NeedsModule(f"import {module}")

    def need_helper(self, name: str, code: str) -> None:
        raise NeedsModule(f"helper {name}")

    def __getattr__(self, name: str) -> Any:  # the codemod's context, fixes, ...
        raise NeedsModule(name)


def splice_fixes(ctx: SourceContext, edits: list[SourceFix]) -> tuple[str, list[SourceFix]] | None:
    """The text of ``ctx`` with ``edits`` applied and the fixes applied in the codemod's
    order, or None when the codemod must do it."""
    text = ctx.text
    fixes = {(f.line, f.column, f.callee): f for f in edits}  # as the codemod keys them
    if _OTHER_LINE_BREAKS.search(text) or any(key[2] in _BY_NODE for key in fixes):
        return None
    starts = [0, *accumulate(len(line) + 1 for line in text.split("\n"))]
    lines = {line for line, _, _ in fixes}
    spans = []
    for call in ctx.calls():  # in the order of their start, like the codemod's leave order
        if call.lineno not in lines:
            continue
        column = ctx.column(call)
        fix = fixes.get((call.lineno, column, _callee(call.func)))
        if fix is None:
            continue
        if _in_fstring(ctx, call) or call.end_lineno is None or call.end_col_offset is None:
            return None
        end_line = ctx.lines[call.end_lineno - 1]
        end = starts[call.end_lineno - 1] + _characters(end_line, call.end_col_offset)
        spans.append((starts[call.lineno - 1] + column, end, fix))
    if any(later[0] < earlier[1] for earlier, later in pairwise(spans)):
        return None  # nested fixes: the codemod applies the inner one first
    return _rewrite(text, spans, CallEdits(_torch_alias(ctx.tree)))


def _rewrite(
    text: str, spans: list[tuple[int, int, SourceFix]], edits: CallEdits
) -> tuple[str, list[SourceFix]] | None:
    import libcst as cst

    from coreml_lint.fixers.codemod import callee_name

    render = cst.Module([]).code_for_node
    rules: dict[str, Any] = {}
    pieces, applied, done = [], [], 0
    for start, end, fix in spans:
        span = _with_own_parentheses(text, start, end)
        if span is None:
            return None
        start, end, parentheses = span
        try:
            node = cst.parse_expression(text[start:end])
            if not (
                isinstance(node, cst.Call)
                and len(node.lpar) == parentheses
                and callee_name(node.func) == fix.callee
            ):
                return None
            if fix.rule not in rules:
                rules[fix.rule] = rule_by_code(fix.rule)
            replacement = render(rules[fix.rule]().transform(fix, node, edits))
        except Exception:  # NeedsModule, or whatever the codemod will report in its words
            return None
        pieces += [text[done:start], replacement]
        applied.append(fix)
        done = end
    pieces.append(text[done:])
    return "".join(pieces), applied


def _with_own_parentheses(text: str, start: int, end: int) -> tuple[int, int, int] | None:
    """The span libcst gives the call at ``text[start:end]``: with the parentheses around
    it that belong to it (``x = (torch.full(...))``), not a call's (``f(torch.full(...))``),
    and how many there are; None when that cannot be told from the text."""
    parentheses = 0
    while True:
        after = _skip_forward(text, end)
        if not text.startswith(")", after):
            return start, end, parentheses
        before = _skip_back(text, start)
        if before is None:
            return None
        if before < 1 or text[before - 1] != "(":
            return start, end, parentheses  # an element of a list of arguments or items
        opener = _skip_back(text, before - 1)
        if opener is None:
            return None
        previous = text[opener - 1] if opener > 0 else " "
        if previous in ")]}":
            return start, end, parentheses  # a call's parentheses: f(x)(<call>)
        if previous.isidentifier() or previous.isdigit() or previous in "'\"":
            word = re.search(r"\w+$", text[:opener])
            if (
                word is None
                or keyword.iskeyword(word.group())
                or keyword.issoftkeyword(word.group())
            ):
                return None  # return (<call>), match (<call>): rare, and the codemod knows
            return start, end, parentheses  # f(<call>)
        start, end, parentheses = before - 1, after + 1, parentheses + 1


def _skip_forward(text: str, at: int) -> int:
    """The position of the next token after ``at`` (spaces, continuations, comments)."""
    while at < len(text):
        char = text[at]
        if char in " \t\n\\":
            at += 1
        elif char == "#":
            newline = text.find("\n", at)
            at = len(text) if newline < 0 else newline
        else:
            break
    return at


def _skip_back(text: str, at: int) -> int | None:
    """The position just after the token before ``at``, or None when a comment may sit in
    between (a ``#`` on a line crossed: comments cannot be told from strings backwards)."""
    while at > 0 and text[at - 1] in " \t\n\\":
        at -= 1
        if text[at] == "\n":
            line_start = text.rfind("\n", 0, at) + 1
            if "#" in text[line_start:at]:
                return None
    return at


def _characters(line: str, byte_offset: int) -> int:
    """``ast`` counts columns in UTF-8 bytes; text offsets count characters."""
    if line.isascii():
        return byte_offset
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def _callee(func: ast.expr) -> str | None:
    """The name the codemod keys a call by (its ``callee_name``), from the ``ast`` side."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _in_fstring(ctx: SourceContext, node: ast.AST) -> bool:
    parent = ctx.parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.JoinedStr):
            return True
        parent = ctx.parents.get(parent)
    return False


def _torch_alias(tree: ast.Module) -> str | None:
    """The codemod's ``torch_alias``: the last top-level ``import torch [as name]``."""
    alias = None
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for name in statement.names:
                if name.name == "torch":
                    alias = name.asname or "torch"
    return alias
