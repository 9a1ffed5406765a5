"""The rules: one module per rule, discovered by name (``cmlNNN_*.py`` for Core ML, the
default target; ``caiNNN_*.py`` for Core AI, ``--target coreai``).

A rule module holds the rule's detection, documentation, examples, source fix and lowering
answer (see ``rulekit/rule.py``); adding a rule is adding one module, nothing else needs
editing (the README's rule tables are generated from this registry).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from coreml_lint.rulekit.rule import TARGETS, Rule


@cache
def all_rules(target: str = "coreml") -> tuple[type[Rule], ...]:
    """Every rule class of one target (Core ML by default), ordered by code."""
    rules: list[type[Rule]] = []
    for module_info in pkgutil.iter_modules(__path__):
        if not module_info.name.startswith(TARGETS[target]):
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
    """The rule of that code or name, of any target (a name is looked up in Core ML's
    rules first)."""
    for target in TARGETS:
        for rule in all_rules(target):
            if rule.code == code.upper() or rule.name == code:
                return rule
    return None


def every_code() -> list[str]:
    """The codes of every target's rules (what a selector may name)."""
    return [rule.code for target in TARGETS for rule in all_rules(target)]
