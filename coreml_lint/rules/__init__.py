"""The rules: one module per rule, discovered by name (``cmlNNN_*.py``).

A rule module holds the rule's detection, documentation, examples, source fix and lowering
answer (see ``rulekit/rule.py``); adding a rule is adding one module, nothing else needs
editing (the README's rule tables are generated from this registry).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from coreml_lint.rulekit.rule import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, ordered by code."""
    rules: list[type[Rule]] = []
    for module_info in pkgutil.iter_modules(__path__):
        if not module_info.name.startswith("cml"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                rules.append(value)
    codes = [r.code for r in rules]
    duplicates = {c for c in codes if codes.count(c) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate rule codes: {sorted(duplicates)}")
    return tuple(sorted(rules, key=lambda r: r.code))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None
