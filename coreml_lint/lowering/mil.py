"""The Core ML models the backend converts, captured and checked for wrong-value signatures.

Each rule that knows a signature of its silent failure in MIL says so in its
``mil_problem`` hook; this module only collects the models and asks the rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from coreml_lint.rulekit.rule import Rule
from coreml_lint.rules import all_rules


@contextmanager
def capture_models(into: list[Any]) -> Iterator[None]:
    """Record each Core ML model ExecuTorch's backend converts (MIL and I/O spec)."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    original = CoreMLBackend._convert_to_mlmodel

    def wrapped(edge_program: Any, compile_specs: Any, skip_model_load: bool = True) -> Any:
        model = original(edge_program, compile_specs, skip_model_load=skip_model_load)
        into.append(model)
        return model

    CoreMLBackend._convert_to_mlmodel = staticmethod(wrapped)
    try:
        yield
    finally:
        CoreMLBackend._convert_to_mlmodel = staticmethod(original)


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
