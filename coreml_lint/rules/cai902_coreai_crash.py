"""CAI902 coreai-crash: converting or running the program on Core AI failed.

What it does
    Reported by ``coreml-lint verify --target coreai`` when coreai-torch cannot convert the
    program, or Core AI's runtime cannot run it on the program's inputs. The finding gives
    the error's first line and, when the converter names it (``loc("model.py":12:0)``), the
    model source line.

Why it breaks
    Whatever the error says: a crash is what the Core AI rules exist to predict, and one no
    rule predicted is worth reporting.

Example
    ``(x > 0).amax(-1)``: ``'coreai.reduce_max' op operand #0 must be ... but got
    'tensor<4x8xi1>'``.

Fix
    The fix of the Core AI rule that predicted it (``coreml-lint --target coreai``).
"""

from __future__ import annotations

from coreml_lint.core.findings import Outcome
from coreml_lint.rulekit.rule import COREAI_APPLIES_TO, Rule


class CoreAICrash(Rule):
    code = "CAI902"
    name = "coreai-crash"
    target = "coreai"
    applies_to = COREAI_APPLIES_TO
    outcome = Outcome.CRASH
    summary = "verify --target coreai: conversion or run on Core AI failed"
    cannot_lower = "a crash found by converting; the lint findings say which rule predicted it"
