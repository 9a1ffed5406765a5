"""Core AI as the sweep's second target: the same generated cases, keyed by the same
``KeyMaker`` (as Core AI runs a program: ``measured/coreai_table.py``), each group of
single-op programs converted with coreai-torch and **run** on Linux's Core AI runtime
against eager (no interpreter: the runtime executes the program).

A generated case is measured on Core AI as its iOS18 copy with ``target`` 27 (Core AI's
compatibility version; ``coreai_cases``), so its id is its own and its results live in
their own folder and shards (``measurements/<torch>-coreai-torch<v>-coreai-core<v>/``).
Core AI has no precision setting: a float32 case computes in float32 and a float16 case
(the dtype axis's) in float16, each judged with that dtype's tolerance.

Outcomes per case, as the Core ML sweep's: ``crash`` (conversion, compile or run failed:
the stage and the error's first line), ``wrong`` (other values than eager on typical
inputs), ``edge`` (right on typical values, wrong on NaN, infinities or values at the
limits of float16), ``ok``. A group answers only when every case in it is ``ok``; anything
else is measured case by case (``split``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from coreml_lint.measured.case import result_of
from coreml_lint.measured.coreai_table import COREAI_PACKAGES, COREAI_TARGET
from coreml_lint.measured.key import MeasuredKey, measured_key
from coreml_lint.measured.stack import versions_of
from coreml_lint.sweep.build import build
from coreml_lint.sweep.measure import SPLIT, case_nodes, context_seen, first_line

PLACED = "coreai"
SOURCE_TARGET = 18  # the generated copy a Core AI case is made from


def coreai_versions() -> dict[str, str]:
    return versions_of(COREAI_PACKAGES, missing="none")


def coreai_stack_folder(root: Path = Path("measurements")) -> Path:
    """``measurements/torch2.13.0+cpu-coreai-torch0.4.3-coreai-core1.0.0b3``."""
    name = "-".join(f"{p}{v}" for p, v in coreai_versions().items())
    return root / re.sub(r"[^\w.+-]", "_", name)


def coreai_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each generated case once, as Core AI measures it: its iOS18 copy at target 27."""
    from coreml_lint.sweep.values import case_id

    made = []
    for case in cases:
        if case["target"] != SOURCE_TARGET:
            continue
        copy = dict(case, target=COREAI_TARGET)
        copy["id"] = case_id(copy)
        made.append(copy)
    return made


def measure_coreai(cases: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
    """Per-case results, or ``SPLIT`` when a group saw anything but agreement."""
    import torch

    single = len(cases) == 1
    with torch.no_grad():
        built = build(cases)
        try:
            ep = torch.export.export(built.module, tuple(built.inputs), strict=False)
        except Exception as exc:
            return [result_of(c, "export", first_line(exc)) for c in cases] if single else SPLIT
        keys = coreai_keys(ep, cases)
        outcome, message = _run_and_judge(ep, built)
    if outcome != "ok" and not single:
        return SPLIT
    return [result_of(c, outcome, message, keys[i]) for i, c in enumerate(cases)]


def _run_and_judge(ep: Any, built: Any) -> tuple[str, str]:
    """Convert once, run the typical then the extreme inputs, and judge each against
    eager run the same way (buffers, if any, carry from the first call to the second on
    both sides)."""
    from coreml_lint.coreai_stack import run_program
    from coreml_lint.verifier.coreai import crash_summary

    calls = [list(built.inputs), list(built.extreme)]
    run = run_program(ep, calls, narrow_int64=True)
    if not run.ok:
        return "crash", f"{run.stage}: {crash_summary(run.message)}"[:300]
    eager = _eager(ep, calls)
    for call, outcome in ((0, "wrong"), (1, "edge")):
        found = _first_divergence(run.calls[call], eager[call])
        if found:
            return outcome, found[:300]
    return "ok", ""


def _eager(ep: Any, calls: list[list[Any]]) -> list[list[Any]]:
    import copy

    import torch

    module = copy.deepcopy(ep).module()
    outputs = []
    with torch.no_grad():
        for inputs in calls:
            out = module(*[v.clone() if hasattr(v, "clone") else v for v in inputs])
            outputs.append(torch.utils._pytree.tree_leaves(out))
    return outputs


def _first_divergence(actual: list[Any], expected: list[Any]) -> str:
    import torch

    from coreml_lint.verifier.compare import FLOAT16, SEMANTIC, SEMANTIC_HALF, compare

    if len(actual) != len(expected):
        return f"interface outputs: Core AI returned {len(actual)}, eager {len(expected)}"
    for i, (got, want) in enumerate(zip(actual, expected, strict=True)):
        dtype = getattr(want, "dtype", None)
        # float16 as verify judges a .half() model; bfloat16 keeps 8 bits of mantissa (an
        # ulp is 8 float16 ulps): float16-pass tolerance, or one rounding is "wrong"
        mode = {torch.float16: SEMANTIC_HALF, torch.bfloat16: FLOAT16}.get(dtype, SEMANTIC)
        numbers = compare(got, want, mode)
        if not numbers.ok:
            text = numbers.describe().replace(", Core ML ", ", Core AI ")
            return f"{mode} {numbers.kind} (output {i}): {text}"
    return ""


def coreai_keys(ep: Any, cases: list[dict[str, Any]]) -> list[list[MeasuredKey]]:
    """Per case, the key of each of its op's nodes as the Core AI linter sees them: the
    canonical graph of the exported program, keyed as one whole program."""
    from coreml_lint.engine.exported import graph_of
    from coreml_lint.measured.coreai_table import coreai_key_maker
    from coreml_lint.program.canonical import canonicalize

    graph = canonicalize(graph_of(ep))
    maker = coreai_key_maker(graph)
    users = graph.users()
    found: list[list[MeasuredKey]] = [[] for _ in cases]
    for index, node in case_nodes(ep, graph):
        context = context_seen(cases[index], node, users)
        found[index].append(measured_key(maker.key(node), context, PLACED))
    return found
