"""Fix modes: apply, show as a diff, or leave; write atomically; never keep a broken file."""

from __future__ import annotations

import ast
import difflib
import warnings
from dataclasses import dataclass, field

from coreml_lint.core.findings import Finding, SourceFix
from coreml_lint.source.context import SourceContext


@dataclass
class FixResult:
    path: str
    original: str
    fixed: str
    applied: list[SourceFix] = field(default_factory=list)
    error: str | None = None
    # The fixed text parsed (the check that it compiles): linting it again reuses it.
    tree: ast.Module | None = field(default=None, repr=False, compare=False)

    @property
    def changed(self) -> bool:
        return self.fixed != self.original

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.fixed.splitlines(keepends=True),
                fromfile=self.path,
                tofile=self.path,
            )
        )


def selected_edits(findings: list[Finding], unsafe: bool) -> list[SourceFix]:
    return [f.edit for f in findings if f.edit is not None and (f.edit.safe or unsafe)]


def compute_fix(
    path: str, text: str, edits: list[SourceFix], ctx: SourceContext | None = None
) -> FixResult:
    """The file's text with ``edits`` applied; unchanged, with an error, if the result
    would not parse. ``ctx``, the parsed file the edits were found in, lets the calls be
    rewritten in place (``fixers/splice.py``); without it, or when a fix needs more, one
    libcst codemod rewrites the whole file."""
    if not edits:
        return FixResult(path, text, text)
    spliced = None
    if ctx is not None and ctx.text == text:
        from coreml_lint.fixers.splice import splice_fixes

        spliced = splice_fixes(ctx, edits)
    if spliced is not None:
        fixed, applied = spliced
    else:
        try:
            fixed, applied = _codemod(path, text, edits)
        except Exception as exc:  # libcst parser limits, a replacement that does not apply
            return FixResult(
                path, text, text, error=f"{path}: fix not applied: {type(exc).__name__}: {exc}"
            )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes: not ours
            tree = ast.parse(fixed, filename=path)
        compile(tree, path, "exec", dont_inherit=True)  # `yield` outside a function, ...
    except SyntaxError as exc:
        return FixResult(
            path, text, text, error=f"{path}: fix reverted: the result does not parse ({exc.msg})"
        )
    return FixResult(path, text, fixed, applied=applied, tree=tree)


def _codemod(path: str, text: str, edits: list[SourceFix]) -> tuple[str, list[SourceFix]]:
    import libcst as cst
    from libcst.codemod import CodemodContext

    from coreml_lint.fixers.codemod import ApplyFixes

    module = cst.parse_module(text)
    command = ApplyFixes(CodemodContext(filename=path), edits)
    return command.transform_module(module).code, list(command.applied)
