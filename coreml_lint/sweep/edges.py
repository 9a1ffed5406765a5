"""ExecuTorch's edge verifier on the ops the sweep leaves out because ``to_edge`` decomposes
them (``slogdet``, ``inverse``, the ``linalg`` family): a composite op is no delegated op,
but what torch decomposes it into may be neither core ATen nor taken by the partitioner
(``slogdet`` becomes ``_linalg_slogdet``), and then ``to_edge_transform_and_lower`` stops
whatever runs it. Each op's base call is lowered once with the stock partitioner on the
sweep's engine; the ops the verifier refuses are written to
``program/data/edge_refusals.json``, which the light path reads (CML603).

    python -m coreml_lint.sweep edges [--workers 2 | --scheduler HOST:8786]
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from coreml_lint.core.files import write_atomically
from coreml_lint.measured.outcomes import EDGE_REFUSAL as EDGE_REFUSAL_TEXT
from coreml_lint.program.edge_refusals import REFUSALS_PATH
from coreml_lint.program.optable import OpTable
from coreml_lint.sweep.engine import Engine, Task

EDGE_REFUSAL = re.compile(rf"Operator torch\._ops\.aten\.(\S+) {EDGE_REFUSAL_TEXT}")


def candidates(table: OpTable) -> list[str]:
    """Ops ``to_edge`` decomposes that the sweep does not measure: not core ATen, no
    converter of their own (the partitioner would keep those whole), not in place, ``out=``,
    a backward, or left out of the sweep for another reason (random, no tensor)."""
    import torch

    from coreml_lint.sweep.schema import _left_out, in_scope

    measured, left_out = in_scope(table)
    skip = {info.name for info in measured} | set(left_out) | table.core_aten
    found = []
    for name in sorted(table.decomposed_by_default):
        base, _, overload = name.partition(".")
        in_place = base.endswith("_") and not base.endswith("__")
        if name in skip or in_place or overload.endswith("out") or "backward" in base:
            continue
        if table.coreml_has_converter(name):
            continue
        try:
            op = getattr(getattr(torch.ops.aten, base), overload)
        except (AttributeError, RuntimeError):
            continue
        if _left_out(op, name) is None:
            found.append(name)
    return found


def refusals(engine: Engine, names: list[str], say: Any) -> dict[str, Any]:
    """The verdict on each op's base call: refused (with the op the verifier names), lowered,
    or unmeasured (no legal call, or another failure)."""
    verdicts: dict[str, dict[str, Any]] = {}

    def done(value: dict[str, Any]) -> None:
        verdicts[value["op"]] = value

    def failed(name: str) -> Any:
        return lambda why: done({"op": name, "outcome": None, "message": why})

    for name in names:
        engine.submit(Task("edge_verdict", name, 300.0, done, failed(name)))
    say(f"lowering the base call of {len(names)} decomposed ops")
    engine.run()
    refused, passed, unmeasured = {}, [], {}
    for name, verdict in sorted(verdicts.items()):
        found = EDGE_REFUSAL.search(verdict["message"] or "")
        if verdict["outcome"] == "crash" and found:
            refused[name] = f"aten.{found.group(1).rstrip('.,')}"
        elif verdict["outcome"] in ("ok", "wrong", "edge", "crash", "cpu", "unverified"):
            passed.append(name)
        else:
            unmeasured[name] = (verdict["message"] or "")[:120]
    return {
        "generated_with": {
            pkg: metadata.version(pkg) for pkg in ("torch", "executorch", "coremltools")
        },
        "refused": refused,
        "passed_the_verifier": passed,
        "unmeasured": unmeasured,
    }


def write(found: dict[str, Any], path: Path = REFUSALS_PATH) -> None:
    write_atomically(path, json.dumps(found, indent=1, sort_keys=False) + "\n")
