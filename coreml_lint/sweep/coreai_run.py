"""``python -m coreml_lint.sweep run --target coreai`` and ``build --target coreai``: the
sweep's cases generated as for Core ML (``generate_all``, the same ``cases.jsonl``), each
measured on Core AI (``coreai.py``) on the same engine and scheduler, the results kept in
their own shards, and the table ``measured/data/coreai_behaviour.json`` built with the same
aggregation as Core ML's (``table.py``), its ``sweep`` section saying exactly which scope
was measured: the ops and axes asked for, the cases of that scope generated, and how many
of them are measured.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coreml_lint.sweep.coreai import coreai_cases, coreai_stack_folder, coreai_versions

KIND = "measure_coreai"
OPS_PER_ROUND = 8


def run_coreai(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.engine import Engine
    from coreml_lint.sweep.run import Store, generate_all, measure_all
    from coreml_lint.sweep.schema import in_scope

    shards = None if args.shards == "none" else Path(args.shards or coreai_stack_folder())
    store = Store(args.out, shards=shards)
    meta = store.meta()
    started = time.monotonic()
    ops, left_out = in_scope(load_optable())
    names = [i.name for i in ops if not args.ops or i.name in args.ops]
    engine = Engine(args.workers, address=args.scheduler, on_cost=store.add_cost)
    try:
        generate_all(engine, store, names, say)
        cases = scoped(store, set(names), args.axes)
        if args.only:
            wanted = set(args.only.read_text().split())
            cases = [c for c in cases if c["id"] in wanted]
        for start in range(0, len(names), OPS_PER_ROUND):
            chunk = set(names[start : start + OPS_PER_ROUND])
            measure_all(engine, store, [c for c in cases if c["op"] in chunk], say, kind=KIND)
        store.write_shards(cases)
    finally:
        engine.close()
        meta["wall_seconds"] = meta.get("wall_seconds", 0.0) + time.monotonic() - started
        meta["cpu_seconds"] = round(store.cpu_seconds(), 1)
        meta["workers"] = engine.size
        meta["left_out"] = left_out
        meta["no_legal_call"] = sorted(r["op"] for r in store.generated() if r.get("why"))
        meta["scope"] = {"ops": sorted(names), "axes": sorted(args.axes or [])}
        store.save_meta(meta)
    return build_coreai(args, say)


def scoped(store: Any, names: set[str], axes: set[str] | None) -> list[dict[str, Any]]:
    """The Core AI copies of the generated cases of ``names`` on ``axes`` (all: None)."""
    generated = [c for row in store.generated() if row["op"] in names for c in row["cases"]]
    return [c for c in coreai_cases(generated) if not axes or c["axis"] in axes]


def build_coreai(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    from coreml_lint.measured.coreai_table import COREAI_TABLE_PATH
    from coreml_lint.measured.table import TABLE_PATH
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.run import Store
    from coreml_lint.sweep.table import build_table, write_table

    folder = coreai_stack_folder()
    store = Store(args.out, shards=folder)
    meta = store.meta()
    scope = meta.get("scope") or {}
    names = set(scope.get("ops") or [row["op"] for row in store.generated()])
    axes = set(scope.get("axes") or []) or None
    kept = [c for c in shards.read(folder)[1].values() if c["op"] in names]
    by_id = {c["id"]: c for c in [*kept, *scoped(store, names, axes)]}
    by_id = {i: c for i, c in by_id.items() if not axes or c["axis"] in axes}
    cases = list(by_id.values())
    results = [r for i, r in store.results().items() if i in by_id]
    if not results:
        say(f"error: {args.out} holds no Core AI results: nothing written")
        return 2
    table = build_table(results, summary(meta, cases, results), by_id)
    table["measured_with"] = coreai_versions()
    path = COREAI_TABLE_PATH if args.table == TABLE_PATH else args.table  # not Core ML's
    write_table(path, table)
    say(f"wrote {path}: {sum(len(r) for r in table['ops'].values())} entries")
    return 0


def summary(meta: dict[str, Any], cases: list[dict], results: list[dict]) -> dict[str, Any]:
    """The table's ``sweep`` section: what was measured, of what scope, how."""
    ops_measured = sorted({r["op"] for r in results})
    return {
        "target": "coreai",
        "measured": time.strftime("%Y-%m-%d"),
        "scope": {
            "ops_asked": len(meta.get("scope", {}).get("ops", [])),
            "axes": meta.get("scope", {}).get("axes", []),
            "ops_with_cases": len({c["op"] for c in cases}),
            "ops_measured": len(ops_measured),
            "ops_without_a_legal_call": meta.get("no_legal_call", []),
        },
        "cases_generated": len(cases),
        "cases": len(results),
        "outcomes": dict(sorted(Counter(r["outcome"] for r in results).items())),
        # a worker the runtime killed (SIGILL, SIGFPE) leaves a crash without keys: counted
        # here, not in the table (no key says which calls)
        "crashes_without_a_key": sum(
            1 for r in results if not r.get("keys") and r["outcome"] == "crash"
        ),
        "results_without_a_key": sum(1 for r in results if not r.get("keys")),
        "wall_seconds": round(meta.get("wall_seconds", 0.0)),
        "cpu_seconds": round(meta.get("cpu_seconds", 0.0)),
        "workers": meta.get("workers"),
        "sampling": (
            "the Core ML sweep's generated cases (one factor at a time around a legal float32 "
            "call found from the schema), each once (its iOS18 copy, as target 27): "
            "converted with coreai-torch, compiled and run on Core AI's Linux runtime (CPU) "
            "against eager, on typical then extreme values, each case in its own dtype "
            "(float16 cases compute in float16: Core AI has no precision setting)"
        ),
        **({"note": meta["note"]} if meta.get("note") else {}),
    }
