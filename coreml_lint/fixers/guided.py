"""Program-guided source fixes: a ``.pt2`` finding placed in the model source with what the
program knows.

The source rules see text; the exported program knows types and values: that a fill is
int64 whatever its value expression, that two names are bool tensors, which buffer a
placeholder is and in which class it was registered, which module built a node. Each rule
that can use that says so in its ``program_fix`` hook (``rulekit/rule.py``); this module
only parses the file once and asks the rules.
"""

from __future__ import annotations

import ast
import warnings
from typing import Any

from coreml_lint.core.findings import Finding, SourceFix
from coreml_lint.rules import rule_by_code
from coreml_lint.source.context import SourceContext

# What a program finding's rule answered: an edit, the reason none can be placed, or None
# (the rule has no guided fix: the rule's own source check at that line decides).
Placement = SourceFix | str | None


def place(findings: list[Finding], text: str, path: str, config: Any) -> list[Placement]:
    """For each program finding pointing into this file, its rule's placed fix."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ["the model source does not parse"] * len(findings)
    source = SourceContext(path, text, tree, config=config)
    placed: list[Placement] = []
    for finding in findings:
        rule = rule_by_code(finding.code)
        if rule is None:
            placed.append(None)
            continue
        source.rule = rule
        try:
            placed.append(rule().program_fix(finding, source))
        except Exception as exc:  # a hook that cannot read this source places nothing
            placed.append(f"the fix could not be placed ({type(exc).__name__}: {exc})")
    return placed
