"""The sweep's driver: generate every op's cases, measure them in groups on worker
processes, then measure iOS16 and iOS17 where iOS15 and iOS18 disagree. Everything is
appended to JSON-lines files in the output folder as it is known, so an interrupted sweep
resumes where it stopped. The tasks run on Dask distributed (``engine.py``): local worker
processes, or a cluster by address.

Grouping: most cases lower fine, so cases that are alike (same axis, target, first operand
dtype and origin) share one program, and a group that crashes or disagrees anywhere is measured
again case by case. The group size follows the failure rate seen so far in each kind of
case (Dorfman's rule, about ``1/sqrt(p)``): a bfloat16 case is soon measured alone, a
float32 one in a dozen.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coreml_lint.sweep import shards
from coreml_lint.sweep.engine import Engine, Task

GENERATE_TIMEOUT = 600.0
MAX_GROUP = 12
GOOD = {"ok", "cpu", "edge"}
SHARD_EVERY = 100  # results between writes of the finished ops' shards
Say = Callable[[str], None]


class Store:
    """The sweep's folder: ``cases.jsonl`` (per op), ``results.jsonl`` (per case); with
    ``shards``, the measurements kept in the repository (``shards.py``) count as measured,
    and every op measured in full is written there."""

    def __init__(self, folder: Path, shards: Path | None = None) -> None:
        self.folder = folder
        self.shards = shards
        folder.mkdir(parents=True, exist_ok=True)
        self.cases_path = folder / "cases.jsonl"
        self.results_path = folder / "results.jsonl"
        self.meta_path = folder / "meta.json"
        self.costs_path = folder / "costs.jsonl"
        self._generated: tuple[Any, list[dict[str, Any]]] | None = None

    @staticmethod
    def _read(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by an interruption
                continue
        return rows

    def generated(self) -> list[dict[str, Any]]:
        """Per op, the cases its latest generation made (a later row replaces an earlier).
        Read again only when ``cases.jsonl`` changed (it is appended to while generating,
        then read at every round: over 100 MB once every op has been generated thrice)."""
        info = self.cases_path.stat() if self.cases_path.exists() else None
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns) if info else None
        if self._generated is None or self._generated[0] != stamp:
            rows = {row["op"]: row for row in self._read(self.cases_path)}
            self._generated = stamp, list(rows.values())
        return list(self._generated[1])

    def live_results(self) -> dict[str, dict[str, Any]]:
        """Case id -> result of this folder's ``results.jsonl`` alone."""
        return {r["id"]: r for r in self._read(self.results_path)}

    def results(self) -> dict[str, dict[str, Any]]:
        found = self.live_results()
        if self.shards is not None:  # a shard's result is never replaced
            found.update(shards.read(self.shards)[0])
        return found

    def cases(self) -> dict[str, dict[str, Any]]:
        """Case id -> case: every case generated here, and every case a shard holds that
        today's generator still makes (a fresh clone has only the shards; the iOS16/17
        cases a run adds are in them; ``shards.RETIRED`` names the others)."""
        found = {c["id"]: c for row in self.generated() for c in row["cases"]}
        if self.shards is not None:
            gone = shards.retired(self.shards)
            found.update((i, c) for i, c in shards.read(self.shards)[1].items() if i not in gone)
        return found

    def complete_ops(self) -> set[str]:
        """The ops every known case of which is measured: what a table may call complete.
        An op in the unfinished shard is not (a fresh clone knows only its measured cases)."""
        results = self.results()
        ops: dict[str, bool] = {}
        for case_id, case in self.cases().items():
            ops[case["op"]] = ops.get(case["op"], True) and case_id in results
        partial = shards.unfinished_ops(self.shards) if self.shards is not None else set()
        return {op for op, done in ops.items() if done and op not in partial}

    def write_shards(self, cases: list[dict[str, Any]]) -> list[str]:
        """Keep every op whose ``cases`` are all measured in the repository's shards."""
        if self.shards is None:
            return []
        return shards.write(self.shards, cases, self.results())

    def append(self, path: Path, row: dict[str, Any]) -> None:
        with path.open("a") as handle:
            handle.write(json.dumps(row, sort_keys=True) + "\n")

    def add_cost(self, kind: str, seconds: float) -> None:
        """The CPU seconds one task took on its worker (appended as it returns, so a sweep
        killed at any moment still knows what it cost)."""
        self.append(self.costs_path, {"kind": kind, "cpu": round(seconds, 3)})

    def rewrite_results(self, rows: list[dict[str, Any]]) -> None:
        """Replace the results file whole (written aside, then renamed: never half-written)."""
        aside = self.results_path.with_suffix(".tmp")
        aside.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        aside.replace(self.results_path)

    def cpu_seconds(self) -> float:
        return sum(row["cpu"] for row in self._read(self.costs_path))

    def meta(self) -> dict[str, Any]:
        return json.loads(self.meta_path.read_text()) if self.meta_path.exists() else {}

    def save_meta(self, meta: dict[str, Any]) -> None:
        from coreml_lint.core.files import write_atomically

        write_atomically(self.meta_path, json.dumps(meta, indent=1, sort_keys=True) + "\n")


# Measured first to last, so a sweep stopped early has the most telling cases.
AXIS_ORDER = (
    "base",
    "dtype",
    "variant",
    "model",
    "origin",
    "context",
    "pairs",
    "shape",
    "inside",
    "rank",
)


def bucket_of(case: dict[str, Any]) -> tuple[Any, ...]:
    first = case["tensors"][0] if case["tensors"] else {"dtype": "-", "origin": "-"}
    priority = AXIS_ORDER.index(case["axis"]) if case.get("axis") in AXIS_ORDER else 0
    return (priority, case["target"], first["dtype"], first.get("origin", "in"))


@dataclass
class Scheduler:
    """Hands out groups of pending cases, sized by each bucket's failure rate so far."""

    engine: Engine
    store: Store
    say: Say
    pending: dict[tuple[Any, ...], list[dict[str, Any]]] = field(default_factory=dict)
    seen: dict[tuple[Any, ...], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0])
    )
    done: int = 0
    total: int = 0
    cases: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    kind: str = "measure"  # the task handler: "measure" (Core ML), "measure_coreai"

    def add(self, cases: list[dict[str, Any]]) -> None:
        for case in cases:
            self.pending.setdefault(bucket_of(case), []).append(case)
        self.total += len(cases)

    def group_size(self, bucket: tuple[Any, ...]) -> int:
        measured, bad = self.seen[bucket]
        p = (bad + 0.2) / (measured + 4)
        return 1 if p > 0.3 else max(1, min(MAX_GROUP, round(1 / math.sqrt(p))))

    def refill(self) -> bool:
        if not self.pending:
            return False
        first = min(b[0] for b in self.pending)
        bucket = max((b for b in self.pending if b[0] == first), key=lambda b: len(self.pending[b]))
        size = self.group_size(bucket)
        group, self.pending[bucket] = self.pending[bucket][:size], self.pending[bucket][size:]
        if not self.pending[bucket]:
            del self.pending[bucket]
        self.submit(group)
        return True

    def submit(self, group: list[dict[str, Any]], first: bool = False) -> None:
        timeout = 90.0 + 30.0 * len(group)
        self.engine.submit(
            Task(
                self.kind,
                group,
                timeout,
                lambda value, g=group: self._done(g, value),
                lambda why, g=group: self._failed(g, why),
            ),
            first=first,
        )

    def _done(self, group: list[dict[str, Any]], value: Any) -> None:
        if value == "split" or not isinstance(value, list):
            for case in group:
                self.submit([case], first=True)
            return
        for result in value:
            self._record(result, bucket_of(next(c for c in group if c["id"] == result["id"])))

    def _failed(self, group: list[dict[str, Any]], why: str) -> None:
        if len(group) > 1:
            for case in group:
                self.submit([case], first=True)
            return
        case = group[0]
        outcome = "crash" if "died" in why or "timeout" in why else "error"
        self._record(
            {
                "id": case["id"],
                "op": case["op"],
                "target": case["target"],
                "outcome": outcome,
                "message": f"sweep worker: {why}",
                "keys": [],
            },
            bucket_of(case),
        )

    def _record(self, result: dict[str, Any], bucket: tuple[Any, ...]) -> None:
        self.store.append(self.store.results_path, result)
        counts = self.seen[bucket]
        counts[0] += 1
        counts[1] += result["outcome"] not in GOOD
        self.done += 1
        if self.done % SHARD_EVERY == 0 or self.done == self.total:
            written = self.store.write_shards(self.cases)
            if written:
                self.say(f"shards written: {', '.join(written)}")
        if self.done % 200 == 0 or self.done == self.total:
            rate = self.done / max(time.monotonic() - self.started, 1e-9)
            left = (self.total - self.done) / rate if rate else 0
            self.say(f"measured {self.done}/{self.total} ({rate:.1f}/s, ~{left / 60:.0f} min left)")


def generate_all(engine: Engine, store: Store, names: list[str], say: Say) -> None:
    from coreml_lint.sweep.generate import GENERATOR

    done = {row["op"] for row in store.generated() if row.get("generator", 1) == GENERATOR}
    todo = [n for n in names if n not in done]
    say(f"generating cases for {len(todo)} ops ({len(done)} generated by today's generator)")

    def finished(value: Any) -> None:
        store.append(store.cases_path, value)

    def failed(name: str, why: str) -> None:
        store.append(store.cases_path, {"op": name, "cases": [], "why": f"generation: {why}"})

    for name in todo:
        engine.submit(
            Task("generate", name, GENERATE_TIMEOUT, finished, lambda why, n=name: failed(n, why))
        )
    engine.run()


def measure_all(
    engine: Engine, store: Store, cases: list[dict[str, Any]], say: Say, kind: str = "measure"
) -> None:
    done = store.results()
    todo = [c for c in cases if c["id"] not in done]
    say(f"measuring {len(todo)} cases ({len(cases) - len(todo)} already measured)")
    scheduler = Scheduler(engine, store, say, kind=kind)
    scheduler.add(todo)
    scheduler.cases = list(cases)  # an op is finished when all its cases are measured
    engine.run(scheduler.refill)
    store.write_shards(cases)


def retire_superseded(store: Store, current: list[dict[str, Any]]) -> int:
    """Per op of ``current`` (every case today's generator makes for it, with its iOS16/17
    copies, all measured), record the cases its shard holds that are not among them:
    superseded where a current case makes the same call with other operand values (left
    out of the table), earlier otherwise (kept, counted apart). Returns how many are
    superseded."""
    if store.shards is None:
        return 0
    ids: dict[str, set[str]] = defaultdict(set)
    calls: dict[str, set[str]] = defaultdict(set)
    for case in current:
        ids[case["op"]].add(case["id"])
        calls[case["op"]].add(_call(case))
    count = 0
    for op in ids:  # only these ops' shards are read
        kinds: dict[str, set[str]] = {shards.SUPERSEDED: set(), shards.EARLIER: set()}
        for case_id, case in shards.op_cases(store.shards, op).items():
            if case_id not in ids[op]:
                kind = shards.SUPERSEDED if _call(case) in calls[op] else shards.EARLIER
                kinds[kind].add(case_id)
        shards.retire(store.shards, op, kinds)
        count += len(kinds[shards.SUPERSEDED])
    return count


# What a tensor spec says of its values, not of the call (which the key records).
VALUE_FIELDS = ("sign",)


def _call(case: dict[str, Any]) -> str:
    """A case's call, whatever values its operands hold and at whichever target (an
    iOS16/17 copy of a superseded case is superseded too, also where today's iOS15 and
    iOS18 agree and so no copy is made)."""
    body = {k: v for k, v in case.items() if k not in ("id", "axis", "label", "target")}
    body["tensors"] = [
        {k: v for k, v in t.items() if k not in VALUE_FIELDS} for t in case.get("tensors", [])
    ]
    return json.dumps(body, sort_keys=True)


def middle_targets(cases: list[dict[str, Any]], results: dict[str, dict]) -> list[dict]:
    """iOS16 and iOS17 copies of every case whose iOS15 and iOS18 outcomes differ."""
    from coreml_lint.measured.outcomes import normalized
    from coreml_lint.sweep.values import case_id

    by_spec: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for case in cases:
        spec = json.dumps(
            {k: v for k, v in case.items() if k not in ("id", "target")}, sort_keys=True
        )
        by_spec[spec][case["target"]] = case
    extra = []
    for targets in by_spec.values():
        low, high = targets.get(15), targets.get(18)
        if low is None or high is None or low["id"] not in results or high["id"] not in results:
            continue
        a, b = results[low["id"]], results[high["id"]]
        if (a["outcome"], normalized(a["message"])) == (b["outcome"], normalized(b["message"])):
            continue
        for target in (16, 17):
            made = dict(low, target=target)
            made["id"] = case_id(made)
            extra.append(made)
    return extra


REKEY_GROUP = 12


def rekey_all(
    engine: Engine,
    store: Store,
    say: Say,
    ops: set[str] | None = None,
    only: set[str] | None = None,
) -> int:
    """Key every measured result (of ``ops`` and the case ids ``only``, or all) again with
    today's ``KeyMaker`` (a key format changed): each case's program is exported again,
    never lowered, and only its keys change (a measured outcome is never touched). Returns
    how many results changed keys."""
    cases = store.cases()
    results = store.results()
    todo = [
        cases[i]
        for i in results
        if i in cases and (not ops or cases[i]["op"] in ops) and (only is None or i in only)
    ]
    fresh: dict[str, Any] = {}

    def done(value: Any, group: list[dict[str, Any]]) -> None:
        for case in group:
            if value.get(case["id"]) is not None:
                fresh[case["id"]] = value[case["id"]]
            elif len(group) > 1:
                submit([case])

    def submit(group: list[dict[str, Any]]) -> None:
        engine.submit(
            Task("rekey", group, 300.0, lambda v, g=group: done(v, g), lambda why: None),
            first=len(group) == 1,
        )

    by_bucket: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for case in todo:
        by_bucket[(case["op"], case["target"])].append(case)
    for bucket in by_bucket.values():
        for start in range(0, len(bucket), REKEY_GROUP):
            submit(bucket[start : start + REKEY_GROUP])
    say(f"keying {len(todo)} measured cases again (exported, not lowered)")
    engine.run()
    changed = 0
    rows = []
    for case_id, result in store.live_results().items():
        keys = fresh.get(case_id)
        if keys is not None and keys != result.get("keys"):
            result = dict(result, keys=keys)
            changed += 1
        rows.append(result)
    store.rewrite_results(rows)
    if store.shards is not None:
        changed += shards.rekey(store.shards, fresh)
    return changed


REJUDGED = "rejudge"  # the sub-folder a rejudge measures into (kept until it is applied)
# What judges a lowered case: a change to any of these sources is a change of judge.
JUDGE_SOURCES = (
    "sweep/measure.py",
    "sweep/values.py",
    "measured/case.py",
    "measured/outcomes.py",
    "verifier",
)


def judge_identity() -> str:
    """A hash of the judge's sources (``JUDGE_SOURCES``): a rejudge stopped under one judge
    resumes only under the same one, never mixing two judges' results in one apply."""
    import hashlib

    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha1()
    for name in JUDGE_SOURCES:
        path = root / name
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(str(source.relative_to(root)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def rejudge_all(
    engine: Engine, store: Store, cases: list[dict[str, Any]], say: Say
) -> dict[str, tuple[str, str]]:
    """Measure ``cases`` (already measured) again with today's judge, and put each new
    result in place of the old one, in this folder and in the shards: after a change to
    how a case is judged (``measure.py``), never to what was lowered. The new results go to
    a sub-folder first, so a rejudge stopped anywhere resumes there; only a finished one is
    applied (then the sub-folder goes). The tasks' CPU time is the store's, as a run's.
    Returns case id -> (outcome before, outcome now) of every case whose outcome changed."""
    aside = Store(store.folder / REJUDGED)
    judge = judge_identity()
    stamp = aside.folder / "judge.txt"
    unstamped = not stamp.exists() and aside.results_path.exists()  # before stamps
    if unstamped or (stamp.exists() and stamp.read_text() != judge):
        say(f"{aside.folder} was measured by another judge: measuring again from scratch")
        shutil.rmtree(aside.folder)
        aside = Store(store.folder / REJUDGED)
    stamp.write_text(judge)
    measure_all(engine, aside, cases, say)
    fresh = {i: r for i, r in aside.live_results().items() if i in {c["id"] for c in cases}}
    missing = len(cases) - len(fresh)
    if missing:
        raise RuntimeError(f"{missing} cases were not measured again: nothing applied")
    before = store.results()
    changed = {
        i: (before[i]["outcome"], r["outcome"])
        for i, r in fresh.items()
        if i in before and before[i]["outcome"] != r["outcome"]
    }
    live = store.live_results()
    store.rewrite_results([fresh.get(i, r) for i, r in live.items()])
    if store.shards is not None:
        shards.rejudge(store.shards, fresh)
    shutil.rmtree(aside.folder)
    return changed
