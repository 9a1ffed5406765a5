"""``coreml-lint verify --target coreai``: the whole program converted by coreai-torch, run on
Linux's Core AI runtime and compared with eager (``verifier/coreai.py``). ``verify`` renders
the report in its formats; this module runs it and turns it into findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coreml_lint.cli.check import fail

INSTALL_HINT = 'pip install "coreml-lint[coreai]" "torch==2.13.0" (Python 3.11 or newer)'


def run_coreai(
    program: Path, config: Any, options: dict[str, Any], progress: Any
) -> tuple[Any, Any, list[Any]]:
    """(report, the Core AI lint of the program, the report's findings)."""
    from coreml_lint.core.errors import InputError
    from coreml_lint.coreai_stack import coreai_missing
    from coreml_lint.engine.program import lint_pt2
    from coreml_lint.lowering.files import load_program
    from coreml_lint.verifier.coreai import verify_coreai
    from coreml_lint.verifier.coreai_findings import findings_of, rule_for_node

    missing = coreai_missing()
    if missing:
        fail(f"`coreml-lint verify --target coreai` needs {missing}: {INSTALL_HINT}")
    try:
        (lint,) = lint_pt2(program, config)[:1]
        progress(f"loading {program}")
        exported = load_program(program, options["imports"])
    except InputError as exc:
        fail(str(exc))
    report = verify_coreai(
        exported,
        inputs=options["inputs_path"],
        progress=progress,
        explain=rule_for_node(lint.findings),
    )
    return report, lint, findings_of(report, str(program), lint.findings)
