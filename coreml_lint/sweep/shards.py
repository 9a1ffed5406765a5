"""The sweep's measurements kept in the repository, one shard per op, so that a sweep
stopped anywhere (a session ends, a machine restarts) resumes on any machine, and so that
a key format change re-keys what was measured instead of lowering it again.

A shard is ``measurements/<stack>/<op>.jsonl.gz``: one line per measured case, the case
spec beside its result. An op's shard is written when every case generated for it is
measured; a shard is only ever extended (a result already in it is never replaced: a merge
never changes a measured cell). What is measured of ops not finished yet is kept in
``_unfinished.jsonl.gz`` (rewritten each time: its cases move to their op's shard when it
finishes), so a run stopped anywhere loses nothing it measured.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path("measurements")


def stack_folder(versions: dict[str, str], root: Path = ROOT) -> Path:
    """``measurements/torch2.13.0+cpu-executorch1.5.1-coremltools9.0``."""
    name = "-".join(f"{p}{versions.get(p, 'none')}" for p in ("torch", "executorch", "coremltools"))
    return root / re.sub(r"[^\w.+-]", "_", name)


def read(folder: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(case id -> result, case id -> case) of every shard in ``folder``."""
    results: dict[str, dict[str, Any]] = {}
    cases: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.jsonl.gz")) if folder.exists() else []:
        for row in _rows(path):
            results[row["result"]["id"]] = row["result"]
            cases[row["case"]["id"]] = row["case"]
    return results, cases


def unfinished_ops(folder: Path) -> set[str]:
    """The ops of ``_unfinished.jsonl.gz``: measured in part, whatever else is known."""
    path = folder / UNFINISHED
    return {row["case"]["op"] for row in _rows(path)} if path.exists() else set()


def _rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write(
    folder: Path,
    cases: list[dict[str, Any]],
    results: dict[str, dict[str, Any]],
) -> list[str]:
    """Write the shard of every op whose generated cases are all measured (adding to a
    shard what it lacks, never replacing a line); returns the ops written."""
    by_op: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_op.setdefault(case["op"], []).append(case)
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    pending_path = folder / UNFINISHED
    pending = {r["case"]["id"]: r for r in _rows(pending_path)} if pending_path.exists() else {}
    for op, own in sorted(by_op.items()):
        if any(c["id"] not in results for c in own):
            for case in own:
                if case["id"] in results:
                    pending.setdefault(case["id"], {"case": case, "result": results[case["id"]]})
            continue
        path = folder / f"{op}.jsonl.gz"
        kept = {row["case"]["id"]: row for row in _rows(path)} if path.exists() else {}
        added = [{"case": c, "result": results[c["id"]]} for c in own if c["id"] not in kept]
        for case in own:
            pending.pop(case["id"], None)
        if not added:
            continue
        _write(path, [*kept.values(), *added])
        written.append(op)
    _write(pending_path, list(pending.values()))
    return written


UNFINISHED = "_unfinished.jsonl.gz"

# What each run that measured into these shards cost, beside them: the run's own folder
# (its ``costs.jsonl``) stays on the machine it ran on, and a table built on a fresh clone
# must still say what its measurements cost.
LEDGER = "_runs.json"


def ledger(folder: Path) -> dict[str, Any]:
    """``{"runs": {run id: {"cpu_seconds", "wall_seconds", "workers"}}, "left_out": {op:
    why}, "no_legal_call": [op]}``: every run's cost, and what the latest found out of
    scope."""
    path = folder / LEDGER
    return json.loads(path.read_text()) if path.exists() else {"runs": {}}


def record_run(folder: Path, run_id: str, cost: dict[str, Any], scope: dict[str, Any]) -> None:
    """Set one run's cost (its totals so far: recording again replaces, never adds) and
    the scope it found (``left_out``, ``no_legal_call``)."""
    from coreml_lint.core.files import write_atomically

    found = ledger(folder)
    found["runs"][run_id] = cost
    found.update(scope)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(folder / LEDGER, json.dumps(found, indent=1, sort_keys=True) + "\n")


def run_totals(folder: Path) -> dict[str, Any]:
    """The runs' costs summed (``cpu_seconds``, ``wall_seconds``), the most workers one
    used, and the scope the latest recorded."""
    found = ledger(folder)
    runs = found["runs"].values()
    notes = [r["note"] for r in runs if "note" in r]
    return {
        "cpu_seconds": sum(r.get("cpu_seconds", 0.0) for r in runs),
        "wall_seconds": sum(r.get("wall_seconds", 0.0) for r in runs),
        "workers": max((r.get("workers") or 0 for r in runs), default=None) or None,
        "left_out": found.get("left_out", {}),
        "no_legal_call": found.get("no_legal_call", []),
        **(
            {"note": " ".join(notes)} if (notes := [r["note"] for r in runs if "note" in r]) else {}
        ),
    }


def rekey(folder: Path, keys: dict[str, Any]) -> int:
    """Give the shards' results the keys ``keys`` has for them (case id -> keys): a key is
    derived from the case, so a key format change re-keys a shard; its measured outcome
    and message are never touched. Returns how many results changed keys."""
    changed = 0
    for path in sorted(folder.glob("*.jsonl.gz")) if folder.exists() else []:
        rows = _rows(path)
        fresh = [
            r
            for r in rows
            if keys.get(r["result"]["id"], r["result"].get("keys")) != r["result"].get("keys")
        ]
        for row in fresh:
            row["result"] = dict(row["result"], keys=keys[row["result"]["id"]])
        if fresh:
            _write(path, rows)
            changed += len(fresh)
    return changed


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows sorted by case id, gzip without a timestamp (the same bytes on every machine),
    written aside and renamed (never half-written)."""
    rows = sorted(rows, key=lambda row: row["case"]["id"])
    aside = path.with_suffix(".tmp")
    with gzip.GzipFile(aside, "wb", mtime=0) as handle:
        for row in rows:
            handle.write((json.dumps(row, sort_keys=True) + "\n").encode())
    aside.replace(path)
