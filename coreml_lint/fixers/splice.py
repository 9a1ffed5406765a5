"""The fast path of a file's fixes: rewrite just the calls, in the text.

The codemod (``fixers/codemod.py``) parses the whole file with libcst, computes every
node's position, walks the tree and renders it back: about 15x the cost of the parse
alone, for a file whose fixes touch a few calls. Here, each call to fix is cut out of the
text at the span ``ast`` gives it, parsed alone with ``libcst.parse_expression``, handed
to the fix's ``replacement`` and rendered in place. libcst renders every untouched node
exactly as it was parsed, so the file comes out as the codemod writes it, at the cost of
parsing the fixed calls only. Where the replacement kept the call's leading arguments as they
were (the same nodes: ``dtype=`` appended, a value replaced), only the arguments from the
first changed one on are rendered; the text before them is the file's own.

Whatever could make the two differ takes the codemod instead (``splice_fixes`` returns
None): a replacement that needs the module (an import, a helper, the codemod context), a
fix of a name or a string, fixes nested in one another, parentheses around a call that
libcst would hand to the replacement and cannot be told apart from a call's own, calls in
f-strings (whose ``ast`` positions Python 3.11 does not always get right), line breaks
other than ``\\n`` (where ``ast`` and libcst count lines differently), and any error.
"""

from __future__ import annotations

import ast
import keyword
import re
from itertools import accumulate, pairwise
from typing import Any, NamedTuple

from coreml_lint.core.findings import SourceFix
from coreml_lint.source.context import SourceContext

# Characters str.splitlines() (and with it SourceContext.lines) breaks on besides "\n".
_OTHER_LINE_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_BY_NODE = ("<expr>", "<str>")  # fixes of a name, attribute or string: the codemod's


class NeedsModule(Exception):
    """A replacement asked for a change outside its call: the codemod has to make it."""


class CallEdits:
    """What a fix's ``replacement`` gets as ``edits`` on the fast path: the file's name for
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
        spans.append(_Span(starts[call.lineno - 1] + column, end, fix, call))
    if any(later.start < earlier.end for earlier, later in pairwise(spans)):
        return None  # nested fixes: the codemod applies the inner one first
    return _rewrite(text, spans, CallEdits(_torch_alias(ctx.tree)), starts)


class _Span(NamedTuple):
    start: int  # where the call starts in the text
    end: int  # just after its closing parenthesis
    fix: SourceFix
    call: ast.Call


def _rewrite(
    text: str, spans: list[_Span], edits: CallEdits, starts: list[int]
) -> tuple[str, list[SourceFix]] | None:
    import libcst as cst

    from coreml_lint.fixers.codemod import callee_name

    render = cst.Module([]).code_for_node
    pieces, applied, done = [], [], 0
    for span in spans:
        fix = span.fix
        own = _with_own_parentheses(text, span.start, span.end)
        if own is None:
            return None
        start, end, parentheses = own
        try:
            node = cst.parse_expression(text[start:end])
            if not (
                isinstance(node, cst.Call)
                and len(node.lpar) == parentheses
                and callee_name(node.func) == fix.callee
            ):
                return None
            new = fix.apply(node, edits)
            cut = _first_changed_argument(text, span, node, new, starts)
            if cut is None:
                replacement = render(new)
            else:
                tail = render(cst.Call(func=cst.Name("_"), args=new.args[cut[1] :]))[2:-1]
                replacement = text[start : cut[0]] + tail + text[span.end - 1 : end]
        except Exception:  # NeedsModule, or whatever the codemod will report in its words
            return None
        pieces += [text[done:start], replacement]
        applied.append(fix)
        done = end
    pieces.append(text[done:])
    return "".join(pieces), applied


def _first_changed_argument(
    text: str, span: _Span, old: Any, new: Any, starts: list[int]
) -> tuple[int, int] | None:
    """Where in the text the call's first changed argument starts, and its index, when
    everything before it is the same nodes as parsed (so renders as the text it came
    from); None when the whole call must be rendered.

    libcst renders a call as its parentheses, ``func``, the whitespace around ``(`` and
    each argument with its comma in turn, and an argument without an explicit comma gets
    one unless it is the last: so an argument kept from the text must be neither the last
    of the old call nor of the new one. The text position of an argument comes from
    ``ast``, which agrees with libcst where the argument is a keyword, a starred value or
    a value without parentheses (``ast`` counts a tuple's parentheses, libcst may not)."""
    import libcst as cst

    if not isinstance(new, cst.Call) or text[span.end - 1] != ")":
        return None
    same = ("func", "whitespace_after_func", "whitespace_before_args", "lpar", "rpar")
    if any(getattr(new, name) is not getattr(old, name) for name in same[:3]) or any(
        len(getattr(new, name)) != len(getattr(old, name))
        or any(a is not b for a, b in zip(getattr(new, name), getattr(old, name), strict=True))
        for name in same[3:]
    ):
        return None
    kept = 0
    while kept < min(len(old.args) - 1, len(new.args) - 1) and _renders_alike(
        new.args[kept], old.args[kept]
    ):
        kept += 1
    if kept == len(old.args):  # no arguments: the new ones go before the ")"
        return span.end - 1, kept
    items = sorted([*span.call.args, *span.call.keywords], key=lambda a: (a.lineno, a.col_offset))
    if len(items) != len(old.args):
        return None
    item, arg = items[kept], old.args[kept]
    if not isinstance(item, ast.keyword | ast.Starred) and (
        arg.value.lpar or isinstance(item, ast.Tuple | ast.GeneratorExp)
    ):
        return None
    line_start = starts[item.lineno - 1]
    line = text[line_start : starts[item.lineno] - 1]
    return line_start + _characters(line, item.col_offset), kept


def _renders_alike(new: Any, old: Any) -> bool:
    """Whether argument ``new`` is ``old`` or a copy of it whose only change is an equal
    comma (a replacement that lays its arguments out again gives each a comma anew)."""
    import dataclasses

    from coreml_lint.rulekit.cst import same_comma

    if new is old:
        return True
    if type(new) is not type(old):
        return False
    for field in dataclasses.fields(old):
        a, b = getattr(new, field.name), getattr(old, field.name)
        if not (a is b or (isinstance(a, str) and a == b) or same_comma(a, b)):
            return False
    return True


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
