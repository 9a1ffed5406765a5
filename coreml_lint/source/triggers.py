"""Sharper source triggers: whether a file can call one of some names at all.

The source engine parses a file only when one of a rule's triggers occurs in its text, and
parsing is most of the cost of linting. A plain substring is too weak for short names:
``"max"`` is in nearly every file (``max(a, b)``, "maximum" in a docstring), while a rule
about ``torch.max`` / ``x.max()`` can only fire where ``max`` is the attribute of some
expression, or is imported by name. :class:`CalleeNames` tests exactly that, over the raw
text: it may say yes for a file that has no such call (the rule then finds nothing), but
never no for one that has, so what a run finds does not change.
"""

from __future__ import annotations

import re

# Everything Python allows between ``.`` and an attribute name: spaces, line
# continuations and, inside brackets, newlines and comments (a comment runs to its line's
# end, which keeps the pattern free of ambiguous splits).
_GAP = r"(?:\s|\\|#[^\n]*\n)*"
# An import's parenthesised name list: up to the first ")" outside a comment.
_PARENTHESISED = re.compile(r"(?:[^)#]+|#[^\n]*)*")
_COMMENT = re.compile(r"#[^\n]*")  # in an import statement, "#" always starts a comment


class CalleeNames:
    """A trigger that matches files where one of ``names`` can be the callee of a call that
    a qualified name resolves: ``<expr>.name`` (with any gap Python allows after the dot),
    or ``name`` in an import statement (``from torch import max as tmax``).

    An engine trigger is a substring, or an object with ``search(text)`` and
    ``substrings``: the engine still parses every file that contains one of the substrings
    (a file that does not parse is reported whatever the rules would find), but runs the
    rule only where ``search`` matches."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.substrings = names  # a file without any of these is never a match
        choice = "|".join(sorted(names, key=len, reverse=True))
        self._attribute = re.compile(rf"\.{_GAP}(?:{choice})\b")
        self._word = re.compile(rf"\b(?:{choice})\b")

    def __repr__(self) -> str:
        return f"CalleeNames{self.names!r}"

    def search(self, text: str) -> bool:
        if not any(name in text for name in self.names):
            return False
        if self._attribute.search(text):
            return True
        at = text.find("import")
        while at >= 0:
            at += len("import")
            names = _import_names(text, at)
            if any(name in names for name in self.names) and self._word.search(
                _COMMENT.sub("", names)
            ):
                return True
            at = text.find("import", at)
        return False


def _import_names(text: str, start: int) -> str:
    """The text of the import statement whose ``import`` keyword ends at ``start``: up to
    the closing parenthesis of a parenthesised list, else to the end of the logical line.
    (Taken a little too long at worst, which only makes the trigger match more.)"""
    first = start
    while first < len(text) and text[first] in " \t\f\\\r\n":
        first += 1
    if text.startswith("(", first):
        match = _PARENTHESISED.match(text, first + 1)
        return text[first : match.end() if match else len(text)]
    end = start
    while True:
        newline = text.find("\n", end)
        if newline < 0:
            return text[start:]
        if text[newline - 1 : newline] != "\\" and text[newline - 2 : newline] != "\\\r":
            return text[start:newline]
        end = newline + 1
