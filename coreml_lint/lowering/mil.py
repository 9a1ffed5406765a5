"""The Core ML models a lowering converted, checked for known wrong-value signatures.

Each rule that knows a signature of its silent failure in MIL says so in its
``mil_problem`` hook; this module only asks the rules (the models are captured
by ``coreml_lint.stack.capture_mlmodels``).
"""

from __future__ import annotations

from typing import Any

from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules


def mil_problems(models: list[Any], original: Any) -> list[str]:
    """Every rule's wrong-value signature found in the delegates, ``delegate i: CODE: ...``."""
    checks = [rule() for rule in all_rules() if rule.mil_problem is not Rule.mil_problem]
    problems = []
    for i, model in enumerate(models):
        for rule in checks:
            problem = rule.mil_problem(model, original)
            if problem is not None:
                problems.append(f"delegate {i}: {rule.code}: {problem}")
    return problems
