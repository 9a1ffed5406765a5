"""How well the op table answers calls it did not measure: hold out part of its own cells,
answer them from the rest exactly as the lint would, and count.

Run by hand (torch-free, a minute):

    .venv/bin/python benchmarks/optable_holdout.py [--table PATH] [--json FILE] [--write-gates]

Three kinds of hold-out, each group removed alone from the table and then asked for back
(every target it was measured at) through ``BehaviourTable.answer``, the lint's own path:

- *argument value*: every cell of one op whose variant holds one argument value
  (``stride=[2,2]``, ``approximate=tanh``);
- *operand origin*: every cell of one op with an operand made inside Core ML (``op``) or a
  constant (``const``);
- *shape class*: every cell of one op measured at one shape class only (``r0``, ``r3u``);
- *one call*: one cell whose call changes two arguments or more from the base call (what
  a prediction from one changed argument answers);
- *call at one origin*: one cell of a call also measured with the same operand dtypes at
  other origins (what a reading across origins answers: ``operands``, ``variant``).

An answer is *bad* when it says crash or wrong values (what CML801 reports as an error). Per
op family and per basis of the answer (how the table reached it: another value of the same
class, the same rank with or without a size-1 dim (``unit``), another shape, a prediction
from the base call, every variant, one changed argument, one argument value that a
measured call differing in it alone shows causing the crash (``contrast``), or a mode word
that crashes wherever it was measured (``word``)) it reports
precision (answers bad that are bad) and recall (bad cells answered bad). Where a
basis answers bad at least ``MIN_SUPPORT`` times in an op family (or fewer times, but
wrongly at least ``MIN_WRONG`` times) and falls below 95 % precision there (``GATE``), the
reader stops answering that way in that family:
``--write-gates`` writes those families to ``coreml_lint/measured/data/prediction_gates.json``.
A basis the hold-out could not exercise enough in a family (fewer bad answers) is left as
it is there, and the report says how much evidence each one had.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from coreml_lint.measured import table as measured_table
from coreml_lint.measured.entry import Entry
from coreml_lint.measured.families import family
from coreml_lint.measured.key import Key
from coreml_lint.measured.outcomes import BAD, BOUNDARY_CRASH, MIXED
from coreml_lint.measured.table import BehaviourTable, load_table
from coreml_lint.measured.values import factors

GATE = 0.95
MIN_SUPPORT = 5  # a basis with fewer bad answers in a family is judged there only
MIN_WRONG = 2  # by its wrong ones, when it has this many
TRUTHS = {"ok", "crash", "wrong", BOUNDARY_CRASH, "edge"}


def bad(outcome: str) -> bool:
    return outcome in BAD or outcome == BOUNDARY_CRASH


def groups(table: BehaviourTable) -> list[tuple[str, str, list[Entry]]]:
    """(kind, label, held-out entries) of every hold-out group."""
    found = []
    for op, entries in sorted(table.by_op.items()):
        by_value: dict[str, list[Entry]] = defaultdict(list)
        for entry in entries:
            for name, value in factors(entry.variant).items():
                by_value[f"{name}={value}"].append(entry)
        found += [("argument value", f"{op} {k}", v) for k, v in sorted(by_value.items())]
        for origin in ("op", "const"):
            held = [e for e in entries if f":{origin}" in e.operands]
            if held:
                found.append(("operand origin", f"{op} {origin}", held))
        base = factors(table.bases.get(op, ""))
        for entry in entries:  # a call changing two arguments or more, alone
            changed = [f for f, v in factors(entry.variant).items() if base.get(f) != v]
            if len(changed) >= 2:
                found.append(("one call", f"{op} {entry.variant}", [entry]))
        found += _calls_at_one_origin(entries, table.bases.get(op, ""))
        shapes = Counter(e.shape for e in entries if e.shape != "*")
        for shape in sorted(shapes):
            held = [e for e in entries if e.shape == shape]
            found.append(("shape class", f"{op} {shape}", held))
    return found


def _calls_at_one_origin(entries: list[Entry], base: str) -> list[tuple[str, str, list[Entry]]]:
    """Each cell of a call (not the base call) also measured with the same operand dtypes
    at other origins, alone: what a reading across origins answers (``operands``,
    ``variant``)."""
    origins: dict[tuple, set[str]] = defaultdict(set)
    for e in entries:
        dtypes = tuple(o.partition(":")[0] for o in e.operands.split(","))
        origins[(e.variant, dtypes, e.shape, e.context)].add(e.operands)
    found = []
    for e in entries:
        dtypes = tuple(o.partition(":")[0] for o in e.operands.split(","))
        if e.variant != base and len(origins[(e.variant, dtypes, e.shape, e.context)]) >= 2:
            found.append(("call at one origin", f"{e.op} {e.variant} {e.operands}", [e]))
    return found


def without(table: BehaviourTable, held: list[Entry]) -> BehaviourTable:
    """The table less ``held`` (only the held op's rows are copied)."""
    gone = {id(e) for e in held}
    op = held[0].op
    entries = dict(table.entries)
    for key in [k for k in table.entries if k[0] == op]:
        kept = [e for e in table.entries[key] if id(e) not in gone]
        if kept:
            entries[key] = kept
        else:
            del entries[key]
    by_op = dict(table.by_op)
    by_op[op] = [e for e in table.by_op.get(op, ()) if id(e) not in gone]
    return replace(table, entries=entries, by_op=by_op)


def ask(reduced: BehaviourTable, entry: Entry) -> list[tuple[int, str, str]]:
    """(target, truth, answer outcome or '', basis) for each target of a held-out entry."""
    shape = entry.shape if entry.shape != "*" else "r2"
    key = Key(entry.op, entry.operands, entry.variant, shape)
    found = []
    for target in sorted(entry.targets):
        answer = reduced.answer(key, target, entry.context)
        found.append(
            (
                target,
                entry.outcome,
                answer.entry.outcome if answer else "",
                answer.basis if answer else "",
            )
        )
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", type=Path, default=measured_table.TABLE_PATH)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--write-gates", action="store_true")
    args = parser.parse_args()
    measured_table.use_local_measurements(False)
    table = load_table(args.table, gated=False)  # every way of answering, to measure each
    # counts[(kind, family, basis)] = [bad answers, of them truly bad, truly bad cells, answered]
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for kind, _label, held in groups(table):
        reduced = without(table, held)
        for entry in held:
            if entry.outcome not in TRUTHS or entry.outcome == MIXED:
                continue
            for _target, truth, answered, basis in ask(reduced, entry):
                fam = family(entry.op)
                for k in (
                    (kind, fam, basis or "-"),
                    (kind, "ALL", basis or "-"),
                    ("ALL", fam, basis or "-"),
                    ("ALL", "ALL", basis or "-"),
                ):
                    row = counts[k]
                    row[0] += bad(answered)
                    row[1] += bad(answered) and bad(truth)
                    row[2] += bad(truth)
                    row[3] += bool(answered)
    report = render(counts)
    print(report["text"])
    if args.json:
        args.json.write_text(json.dumps(report["data"], indent=1, sort_keys=True) + "\n")
    if args.write_gates:
        path = measured_table.GATES_PATH
        data = json.loads(path.read_text()) if path.exists() else {"tables": {}}
        data.update(gate=GATE, min_support=MIN_SUPPORT, min_wrong=MIN_WRONG)
        data["tables"][args.table.name] = gate_file(counts)
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")
    return 0


def render(counts: dict[tuple[str, str, str], list[int]]) -> dict:
    data = {}
    head = ("held out", "family", "basis", "bad ans", "prec", "bad cells", "answered")
    lines = ["{:16} {:22} {:9} {:>7} {:>6} {:>9} {:>8}".format(*head)]
    for (kind, fam, basis), (said, right, truly, answered) in sorted(counts.items()):
        precision = right / said if said else None
        data[f"{kind}|{fam}|{basis}"] = {
            "bad_answers": said,
            "precision": None if precision is None else round(precision, 4),
            "bad_cells": truly,
            "answered": answered,
        }
        if fam == "ALL" or kind == "ALL":
            p = "-" if precision is None else f"{precision:.3f}"
            lines.append(f"{kind:16} {fam:22} {basis:9} {said:7} {p:>6} {truly:9} {answered:8}")
    return {"text": "\n".join(lines), "data": data}


def gate_file(counts: dict[tuple[str, str, str], list[int]]) -> dict:
    """basis -> the op families where its answers fell below ``GATE`` precision on at least
    ``MIN_SUPPORT`` bad answers, or with ``MIN_WRONG`` wrong ones (there the reader gives no
    such answer)."""
    refused: dict[str, list[str]] = defaultdict(list)
    for (kind, fam, basis), (said, right, _truly, _answered) in counts.items():
        if kind != "ALL" or fam == "ALL" or basis in ("-", "measured", "here"):
            continue
        # with fewer answers, two bad ones are already more than 95 % precision explains
        # (at most a 1.4 % chance in four answers): a new family's first misses count
        enough = said >= MIN_SUPPORT or said - right >= MIN_WRONG
        if enough and right / said < GATE:
            refused[basis].append(fam)
    return {"refused": {b: sorted(f) for b, f in sorted(refused.items())}}


if __name__ == "__main__":
    raise SystemExit(main())
