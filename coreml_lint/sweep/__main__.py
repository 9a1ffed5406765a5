"""``python -m coreml_lint.sweep``: measure what every delegated op does, write the table.

    python -m coreml_lint.sweep run [--out DIR] [--workers 2 | --scheduler HOST:8786]
                                    [--ops amax.default,...] [--axes dtype,variant]
                                    [--only IDS_FILE]
    python -m coreml_lint.sweep rekey [--out DIR] [--workers 2 | --scheduler HOST:8786]
                                      [--ops ...] [--only IDS_FILE]
    python -m coreml_lint.sweep rejudge [--ops ...] [--outcomes wrong,unverified]
                                        [--message TEXT] [--only IDS_FILE]
    python -m coreml_lint.sweep build [--out DIR] [--table PATH]
    python -m coreml_lint.sweep report [--out DIR]
    python -m coreml_lint.sweep edges [--workers 2 | --scheduler HOST:8786]
    python -m coreml_lint.sweep run --target coreai --out DIR --ops ... --axes base,dtype
    python -m coreml_lint.sweep build --target coreai --out DIR

``run`` generates, measures (resuming whatever ``DIR`` and the repository's shards,
``measurements/<stack>/<op>.jsonl.gz``, already hold; every op measured in full is written
there as it finishes) and builds the table,
on ``--workers`` local Dask worker processes or on the Dask cluster whose scheduler is at
``--scheduler``;
``rekey`` keys every measured case again with today's key (after a key format change: the
programs are exported again, never lowered, and no outcome changes); ``rejudge`` lowers and
judges again the measured cases it selects, after a change to the judge, and puts the new
results in place (the one way a measured cell changes; its cost is recorded as a run's);
``build`` only
aggregates; ``report`` prints the counts by op family and which catalogue
pitfalls the sweep found; ``edges`` lowers the base call of each op ``to_edge`` decomposes
that the sweep leaves out and writes which ExecuTorch's edge verifier refuses
(``program/data/edge_refusals.json``, read by CML603). ``--target coreai`` measures the
same cases on Core AI instead
(``coreai_run.py``: converted and run on Core AI's Linux runtime; its own shards, and the
table ``measured/data/coreai_behaviour.json``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from coreml_lint.measured.table import TABLE_PATH

DEFAULT_OUT = Path("sweep-out")
OPS_PER_ROUND = 8


def _say(message: str) -> None:
    print(f"[sweep {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.target == "coreai":  # the same cases, measured on Core AI (coreai_run.py)
        from coreml_lint.sweep.coreai_run import run_coreai

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        return run_coreai(args, _say)
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.engine import Engine
    from coreml_lint.sweep.run import (
        Store,
        generate_all,
        measure_all,
        middle_targets,
        retire_superseded,
    )
    from coreml_lint.sweep.schema import in_scope
    from coreml_lint.sweep.scope import in_order

    store = Store(args.out, shards=_shards(args))
    meta = _begin(store)
    started = time.monotonic()
    ops, left_out = in_scope(load_optable())
    names = in_order([i.name for i in ops if not args.ops or i.name in args.ops])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # save the meta on a kill
    engine = Engine(args.workers, address=args.scheduler, on_cost=store.add_cost)
    try:
        generate_all(engine, store, names, _say)
        generated = [row for row in store.generated() if row["op"] in names]
        cases = [c for row in generated for c in row["cases"]]
        if args.axes:
            cases = [c for c in cases if c["axis"] in args.axes]
        if args.only:
            wanted = _ids(args)
            cases = [c for c in cases if c["id"] in wanted]
        # A few ops at a time, each round with its iOS16/17 cases, so that an op's shard
        # is written whole as its round ends (cases of one round still share programs).
        for start in range(0, len(names), OPS_PER_ROUND):
            chunk = set(names[start : start + OPS_PER_ROUND])
            mine = [c for c in cases if c["op"] in chunk]
            measure_all(engine, store, mine, _say)
            extra = middle_targets(mine, store.results())
            _say(f"{len(extra)} cases at iOS16/17 where iOS15 and iOS18 disagree")
            measure_all(engine, store, mine + extra, _say)
            if not (args.axes or args.only):  # every case of these ops is known: the rest go
                gone = retire_superseded(store, mine + extra)
                if gone:
                    _say(f"{gone} shard cases superseded by today's generator: retired")
            _record(store, meta, started, engine.size, left_out)
    finally:
        engine.close()
        store.save_meta(_record(store, meta, started, engine.size, left_out))
    return build(args)


def _begin(store: Any) -> dict[str, Any]:
    """The folder's meta, with its run id beside the shards kept before anything is
    measured (a run killed at once keeps it); a folder that measures into other shards is
    another run."""
    meta = store.meta()
    if "run" not in meta or meta.get("run_shards", str(store.shards)) != str(store.shards):
        meta.update(run=uuid.uuid4().hex[:12], run_shards=str(store.shards))
        # What the folder had cost before: not this run's (another stack's shards).
        meta.update(run_cpu_before=store.cpu_seconds(), run_wall_before=meta.get("wall_seconds", 0))
        store.save_meta(meta)
    return meta


def rejudge(args: argparse.Namespace) -> int:
    """Lower and judge again the measured cases ``--ops``, ``--outcomes``, ``--message``
    and ``--only`` select (after a change to the judge), put the new results in place, and
    rebuild the table; the CPU time is recorded beside the shards as a run's."""
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep.engine import Engine
    from coreml_lint.sweep.run import Store, rejudge_all
    from coreml_lint.sweep.schema import in_scope

    store = Store(args.out, shards=_shards(args))
    results, cases = store.results(), store.cases()
    wanted = _ids(args)
    chosen = [
        cases[i]
        for i, r in sorted(results.items())
        if i in cases
        and (not args.ops or r["op"] in args.ops)
        and (not args.outcomes or r["outcome"] in args.outcomes)
        and (args.message is None or args.message in r.get("message", ""))
        and (wanted is None or i in wanted)
    ]
    if not chosen:
        _say("no measured case matches: nothing judged again")
        return 2
    meta = _begin(store)
    started = time.monotonic()
    _, left_out = in_scope(load_optable())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    engine = Engine(args.workers, address=args.scheduler, on_cost=store.add_cost)
    try:
        _say(f"judging {len(chosen)} measured cases again")
        changed = rejudge_all(engine, store, chosen, _say)
    finally:
        engine.close()
        store.save_meta(_record(store, meta, started, engine.size, left_out))
    moves = Counter(f"{a} -> {b}" for a, b in changed.values())
    said = ", ".join(f"{n} {move}" for move, n in moves.most_common()) or "none"
    _say(f"{len(chosen)} cases judged again; outcomes changed: {said}")
    return build(args)


def _record(
    store: Any, meta: dict[str, Any], started: float, workers: int, left_out: dict[str, str]
) -> dict[str, Any]:
    """The folder's meta as of now (its earlier runs' wall time plus this one's), also
    recorded beside the shards (``shards.record_run``) under the folder's run id, so a
    table built on another machine still knows what the measurements cost. A ledger that
    cannot be written is said, never the end of the run."""
    from coreml_lint.sweep import shards

    now = dict(meta)
    now["wall_seconds"] = meta.get("wall_seconds", 0.0) + time.monotonic() - started
    now["cpu_seconds"] = round(store.cpu_seconds(), 1)  # every task's, on every worker
    now["workers"] = workers
    now["left_out"] = left_out
    generated = store.generated()
    found = {r["op"] for r in generated if not r.get("why")}
    known = shards.run_totals(store.shards).get("no_legal_call", []) if store.shards else []
    # Every op generated so far, and what earlier runs found (a partial ``--ops`` run adds
    # to it), less the ops this folder found a call for.
    mine = {r["op"] for r in generated if r.get("why")}
    now["no_legal_call"] = sorted((set(known) | mine) - found)
    if store.shards is not None:
        record = {
            "cpu_seconds": round(now["cpu_seconds"] - meta.get("run_cpu_before", 0.0), 1),
            "wall_seconds": round(now["wall_seconds"] - meta.get("run_wall_before", 0.0), 1),
        }
        record.update(workers=workers, recorded=time.strftime("%Y-%m-%dT%H:%M:%S"))
        record.update(left_out=left_out, no_legal_call=now["no_legal_call"])
        try:
            shards.record_run(store.shards, now["run"], record)
        except OSError as exc:
            _say(f"warning: the run's cost was not recorded beside the shards: {exc}")
    return now


def _ids(args: argparse.Namespace) -> set[str] | None:
    """The case ids of ``--only`` (a file of ids, any whitespace between), or None."""
    return set(args.only.read_text().split()) if args.only else None


def _shards(args: argparse.Namespace) -> Path | None:
    """The repository's shards of the installed stack (``--shards``), or None (``none``)."""
    from coreml_lint.measured.stack import installed_versions
    from coreml_lint.sweep.shards import stack_folder

    if args.shards == "none":
        return None
    return Path(args.shards) if args.shards else stack_folder(installed_versions())


def rekey(args: argparse.Namespace) -> int:
    from coreml_lint.sweep.engine import Engine
    from coreml_lint.sweep.run import Store, rekey_all

    store = Store(args.out, shards=_shards(args))
    engine = Engine(args.workers, address=args.scheduler, on_cost=store.add_cost)
    try:
        changed = rekey_all(engine, store, _say, args.ops, _ids(args))
    finally:
        engine.close()
    _say(f"{changed} measured cases keyed anew")
    return 0


def build(args: argparse.Namespace) -> int:
    """The table of every op measured in full (the repository's shards and this folder),
    with the rows of the table it replaces that it does not measure again (``carry``)."""
    if getattr(args, "target", "coreml") == "coreai":
        from coreml_lint.sweep.coreai_run import build_coreai

        return build_coreai(args, _say)
    from coreml_lint.sweep import shards
    from coreml_lint.sweep.report import sweep_summary
    from coreml_lint.sweep.run import Store
    from coreml_lint.sweep.table import build_table, carry, write_table

    store = Store(args.out, shards=_shards(args))
    complete = store.complete_ops()
    cases = store.cases()
    results = [  # the results of the cases known today (not of a generator's older cases)
        r for i, r in store.results().items() if i in cases and cases[i]["op"] in complete
    ]
    if not results:  # a mistyped --out must not replace the table with an empty one
        _say(f"error: {args.out} and the shards hold no op measured in full: nothing written")
        return 2
    earlier = shards.retired(store.shards, shards.EARLIER) if store.shards else set()
    generated = sum(1 for i, c in cases.items() if c["op"] in complete and i not in earlier)
    summary = sweep_summary(_meta(store), results, generated)
    summary["cases_measured"] -= sum(1 for r in results if r["id"] in earlier)
    if earlier:  # still those calls' measurements: in the table, counted apart
        summary["cases_of_earlier_generators"] = sum(1 for r in results if r["id"] in earlier)
    table = build_table(results, summary, cases)
    source = _carry_source(store, args.table)
    if source is not None:
        table = carry(source, table, CARRIED)
    write_table(args.table, table)
    entries = sum(len(rows) for rows in table["ops"].values())
    _say(
        f"wrote {args.table}: {entries} entries over {len(table['ops'])} ops "
        f"({len(complete)} measured in full, {len(results)} cases)"
    )
    return 0


def _meta(store: Any) -> dict[str, Any]:
    """What the table's ``sweep`` section says of the runs: the shards' ledger (every run
    that measured into them, on any machine) where there are shards, else the folder's."""
    from coreml_lint.sweep.shards import run_totals

    meta = store.meta()
    if store.shards is None:
        return meta
    return dict(meta, **run_totals(store.shards))  # no run recorded: the folder's own


def _carry_source(store: Any, table_path: Path) -> dict[str, Any] | None:
    """The table whose rows the new one carries where it does not measure them: the
    first run's own (``_first_run.json.gz`` beside the shards), else the table at
    ``table_path``. Never a table this sweep built before: its rows under a key since
    changed (``rekey``) would be carried as other calls, stale, build after build."""
    import gzip

    from coreml_lint.sweep.shards import FIRST_RUN

    first = store.shards / FIRST_RUN if store.shards is not None else None
    if first is not None and first.exists():
        with gzip.open(first, "rt") as handle:
            return json.load(handle)
    if not table_path.exists():
        return None
    previous = json.loads(table_path.read_text())
    return previous if previous.get("sweep", {}).get("on_demand") is None else None


CARRIED = (
    "rows of the table this one replaced, measured on the same stack, for calls this sweep "
    "did not measure again: every op outside its scope, and within it the calls the "
    "generator does not make"
)


def edges(args: argparse.Namespace) -> int:
    """The edge verifier's verdict on the ops ``to_edge`` decomposes (``edges.py``)."""
    from coreml_lint.program.optable import load_optable
    from coreml_lint.sweep import edges as edge_verdicts
    from coreml_lint.sweep.engine import Engine

    engine = Engine(args.workers, address=args.scheduler)
    try:
        names = edge_verdicts.candidates(load_optable())
        found = edge_verdicts.refusals(engine, names, _say)
    finally:
        engine.close()
    edge_verdicts.write(found)
    _say(f"{len(found['refused'])} of {len(names)} decomposed ops refused by the edge verifier")
    return 0


def report(args: argparse.Namespace) -> int:
    from coreml_lint.sweep.report import render_report
    from coreml_lint.sweep.run import Store

    print(render_report(Store(args.out, shards=_shards(args)), args.table))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coreml_lint.sweep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "rekey", "rejudge", "build", "report", "edges"):
        sub = commands.add_parser(name)
        sub.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the sweep's folder")
        sub.add_argument("--table", type=Path, default=TABLE_PATH, help="the table to write")
        if name in ("run", "build"):
            sub.add_argument(
                "--target",
                choices=("coreml", "coreai"),
                default="coreml",
                help="coreai: measure the same cases on Core AI's runtime (its own shards "
                "and table)",
            )
        if name in ("run", "rekey", "rejudge", "edges"):
            sub.add_argument("--workers", type=int, default=2, help="local worker processes")
            sub.add_argument(
                "--scheduler",
                default=None,
                help="the address of a Dask scheduler (a cluster) instead of local workers",
            )
        if name in ("run", "rekey", "rejudge", "build", "report"):
            sub.add_argument(
                "--shards",
                default=None,
                help="where measured ops are kept (default: measurements/<stack>; 'none')",
            )
        if name in ("run", "rekey", "rejudge"):
            sub.add_argument("--ops", type=lambda s: set(s.split(",")), default=None)
        if name in ("run", "rekey", "rejudge"):
            sub.add_argument(
                "--only",
                type=Path,
                default=None,
                help="a file of case ids to measure (a sample), or to key again",
            )
        if name == "run":
            sub.add_argument("--axes", type=lambda s: set(s.split(",")), default=None)
        if name == "rejudge":
            sub.add_argument(
                "--outcomes",
                type=lambda s: set(s.split(",")),
                default=None,
                help="only cases measured with these outcomes (wrong,unverified,...)",
            )
            sub.add_argument("--message", default=None, help="only cases whose message has it")
    args = parser.parse_args(argv)
    commands = {"run": run, "rekey": rekey, "rejudge": rejudge, "build": build}
    commands.update(report=report, edges=edges)
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
