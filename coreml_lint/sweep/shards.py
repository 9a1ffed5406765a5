"""The sweep's measurements kept in the repository, one shard per op, so that a sweep
stopped anywhere (a session ends, a machine restarts) resumes on any machine, and so that
a key format change re-keys what was measured instead of lowering it again.

A shard is ``measurements/<stack>/<op>.jsonl.gz``: one line per measured case, the case
spec beside its result. An op's shard is written when every case generated for it is
measured; a shard is only ever extended (a result already in it is never replaced: a merge
never changes a measured cell), except by ``rejudge`` (the judge changed, and the cases it
names were lowered and judged again). What is measured of ops not finished yet is kept in
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


def op_cases(folder: Path, op: str) -> dict[str, dict[str, Any]]:
    """Case id -> case of one op's shard (none yet: empty)."""
    path = folder / f"{op}.jsonl.gz"
    return {row["case"]["id"]: row["case"] for row in _rows(path)} if path.exists() else {}


def unfinished_ops(folder: Path) -> set[str]:
    """The ops of ``_unfinished.jsonl.gz``: measured in part, whatever else is known."""
    path = folder / UNFINISHED
    return {row["case"]["op"] for row in _rows(path)} if path.exists() else set()


# A shard's rows, as last read, by its stamp: a run reads every shard at each round of 8
# ops (what is measured), which decompressing 400-odd files made most of a round's time. A
# shard is only ever replaced whole (a new inode), so the stamp tells a stale copy.
_READ: dict[Path, tuple[tuple[int, int, int], list[dict[str, Any]]]] = {}


def _rows(path: Path) -> list[dict[str, Any]]:
    info = path.stat()
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _READ.get(path)
    if cached is None or cached[0] != stamp:
        with gzip.open(path, "rt") as handle:
            cached = stamp, [json.loads(line) for line in handle if line.strip()]
        _READ[path] = cached
    return [dict(row) for row in cached[1]]  # a caller may give a row a new result


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

# Cases a shard holds that today's generator no longer makes, per op, in two kinds; every
# one stays in its shard, as every measurement does (``run.retire_superseded`` writes it
# when a run has generated and measured the op in full; a case made again leaves it):
# - *superseded*: the generator makes the same call with other operand values (a clamp's
#   bounds given one sign each, so that they never cross): the old measurement is of values
#   no model holds, and the table leaves it out;
# - *earlier*: a call an earlier generator made and today's does not (its pairs chose other
#   values): still that call's measurement, kept in the table and counted apart from what
#   today's generator made (the ``sweep`` section's ``cases_of_earlier_generators``).
RETIRED = "_retired.json"
SUPERSEDED, EARLIER = "superseded", "earlier"


def retired(folder: Path, kind: str = SUPERSEDED) -> set[str]:
    """The ids of every retired case of one kind."""
    path = folder / RETIRED
    if not path.exists():
        return set()
    return {
        i for kinds in json.loads(path.read_text())["ops"].values() for i in kinds.get(kind, ())
    }


def retire(folder: Path, op: str, kinds: dict[str, set[str]]) -> None:
    """Set ``op``'s retired cases (kind -> ids; none: the op leaves the file)."""
    from coreml_lint.core.files import write_atomically

    path = folder / RETIRED
    data = json.loads(path.read_text()) if path.exists() else {"ops": {}}
    data["note"] = (
        "shard cases today's generator no longer makes: superseded (the same call made with "
        "other operand values: left out of the table) or earlier (a call only an earlier "
        "generator made: kept, counted apart)"
    )
    found = {kind: sorted(ids) for kind, ids in sorted(kinds.items()) if ids}
    if found:
        data["ops"][op] = found
    else:
        data["ops"].pop(op, None)
    if data["ops"] or path.exists():
        data["ops"] = dict(sorted(data["ops"].items()))
        write_atomically(path, json.dumps(data, indent=1) + "\n")


# The table of the sweep's first run on this stack (keyed by argument classes, stopped
# early): the rows a table carries for the calls the shards do not measure.
FIRST_RUN = "_first_run.json.gz"

# What each run that measured into these shards cost, beside them, one file per run
# (``_runs/<run id>.json``, so that runs on two machines never edit one file): a run's own
# folder (its ``costs.jsonl``) stays on the machine it ran on, and a table built on a fresh
# clone must still say what its measurements cost.
RUNS = "_runs"


def runs(folder: Path) -> dict[str, dict[str, Any]]:
    """Run id -> ``{"cpu_seconds", "wall_seconds", "workers", "recorded", "left_out",
    "no_legal_call"}`` (and a ``note``): each run's totals and the scope it found. A file
    that does not parse is left out (a run writes its own file atomically)."""
    found = {}
    for path in sorted((folder / RUNS).glob("*.json")) if (folder / RUNS).exists() else []:
        try:
            found[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return found


def record_run(folder: Path, run_id: str, record: dict[str, Any]) -> None:
    """Set one run's totals so far (recording again replaces them, never adds)."""
    from coreml_lint.core.files import write_atomically

    (folder / RUNS).mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    write_atomically(folder / RUNS / f"{run_id}.json", text)


def run_totals(folder: Path) -> dict[str, Any]:
    """The runs' costs summed (``cpu_seconds``, ``wall_seconds``), the most workers one
    used, their notes, and the scope the latest recorded; empty without any run."""
    found = sorted(runs(folder).values(), key=lambda r: r.get("recorded", ""))
    if not found:
        return {}
    notes = [r["note"] for r in found if "note" in r]
    return {
        "cpu_seconds": sum(r.get("cpu_seconds", 0.0) for r in found),
        "wall_seconds": sum(r.get("wall_seconds", 0.0) for r in found),
        "workers": max(r.get("workers") or 0 for r in found) or None,
        "left_out": found[-1].get("left_out", {}),
        "no_legal_call": found[-1].get("no_legal_call", []),
        **({"note": " ".join(notes)} if notes else {}),
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


def rejudge(folder: Path, results: dict[str, dict[str, Any]]) -> int:
    """Put each of ``results`` (case id -> a result measured again with today's judge) in
    place of the shards' result of that case; the one way a measured cell changes, and only
    by ``sweep rejudge``. Returns how many results were replaced."""
    replaced = 0
    for path in sorted(folder.glob("*.jsonl.gz")) if folder.exists() else []:
        rows = _rows(path)
        mine = [row for row in rows if row["result"]["id"] in results]
        for row in mine:
            row["result"] = results[row["result"]["id"]]
        if mine:
            _write(path, rows)
            replaced += len(mine)
    return replaced


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows sorted by case id, gzip without a timestamp (the same bytes on every machine),
    written aside and renamed (never half-written)."""
    rows = sorted(rows, key=lambda row: row["case"]["id"])
    aside = path.with_suffix(".tmp")
    with gzip.GzipFile(aside, "wb", mtime=0) as handle:
        for row in rows:
            handle.write((json.dumps(row, sort_keys=True) + "\n").encode())
    aside.replace(path)
