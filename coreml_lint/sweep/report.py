"""What a sweep found: counts by op family, and which catalogue pitfalls are in the table.

The pitfall queries only *read* the finished table (the sweep itself is told nothing about
them): each names the entries that would reproduce one op-level pitfall of the catalogue.
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coreml_lint.measured.entry import Entry
from coreml_lint.measured.families import family
from coreml_lint.measured.outcomes import BAD
from coreml_lint.measured.table import load_table


def sweep_summary(
    meta: dict[str, Any], results: list[dict[str, Any]], generated: int
) -> dict[str, Any]:
    """The table's ``sweep`` section: what was measured, of how much generated, at what
    cost. ``results`` and ``generated`` count the ops measured in full only."""
    outcomes = Counter(r["outcome"] for r in results)
    summary = {
        "measured": time.strftime("%Y-%m-%d"),
        "ops": len({r["op"] for r in results}),
        "cases": len(results),
        "cases_generated": generated,
        "cases_measured": len(results),
        "outcomes": dict(sorted(outcomes.items())),
        "wall_seconds": round(meta.get("wall_seconds", 0.0)),
        "cpu_seconds": round(meta.get("cpu_seconds", 0.0)),
        "workers": meta.get("workers"),
        "ops_without_a_legal_call": meta.get("no_legal_call", []),
        "ops_left_out": meta.get("left_out", {}),
        "sampling": SAMPLING,
    }
    if meta.get("note"):  # what a reader of the numbers must know (a run cut short)
        summary["note"] = meta["note"]
    return summary


SAMPLING = (
    "one factor at a time around a legal float32 call found from the schema: 9 dtypes; "
    "each argument at up to 8 other legal values, a float one at up to 10 and a Scalar one "
    "at every class listed (small integers and short lists of them exactly; 0 and 0.0, "
    "special, negative, non-integral, infinite and out-of-float16 scalars, 1.0 and -1.0 "
    "apart from other whole numbers; scale factors "
    "making a fractional and a whole output size; equations with ellipsis and repeated "
    "labels), every value of a bool, string or dtype argument (strings: the words torch's "
    "error lists and ATen's enum words the op takes; in float32 and float16 made in the "
    "program, strings, bools and dtypes on int64 too); every two non-tensor arguments "
    "together (their first three other values each and three legal alone, legal calls "
    "only; a pair illegal alone beside the first value of a third argument that makes it "
    "legal); the op as a model calls it (a batch of one and of two, parameters constant and given, "
    "the base call's values where legal) with each argument and every two around it; "
    "ranks 0-5 with size-1 and empty dims (each string value at each), and each operand "
    "alone at rank 1 and 0; the "
    "first operand made in the program, the second a constant (non-uniform values); every"
    " dtype's output consumed inside the partition; float16 outputs feeding "
    "linear/addmm/matmul for the base call and float/Scalar variants; fixed-length lists "
    "whose dims differ ([1,0], [2,1]) alone and beside each other argument; every operand "
    "after the first a constant (three operands or more), and index operands constant; "
    "index and mask operands after the first made in the program (beside the base call and "
    "each variant); a "
    "min and a max tensor that never cross; negative pads (a crop); attention with fewer "
    "key/value heads than query heads; integers as data for ops taking integers only, and "
    "later operands as Python numbers; one of the first two float operands an int64 (made "
    "in the program or an input) or a bool made in the program beside float32 ones; a "
    "module's float spelling of integer defaults; the calls torch.nn's layers make (each "
    "flag, every two, common settings; recurrent layers' ops only so, their settings also "
    "beside each flag, a time-major layer's batch second, with their zero states as "
    "inputs, in float32 and float16, reading every output and the first alone); a dtype "
    "argument at float32, float16, int32 "
    "and int64 on int32, int64 and bool data, alone and beside each other argument's first "
    "two values; a resize's output size of each ratio class, one more than the input's and "
    "half of it; written calls for ops whose operands must fit one another (index_fill "
    "with a 0-d value, affine_grid); "
    "coordinate layouts ([N, H, W, 2]) for an op with no legal call on a cube; 87 ops "
    "to_edge decomposes measured as users write them; iOS15 and iOS18, plus iOS16/17 where "
    "they disagree"
)


def by_family(results: list[dict[str, Any]]) -> dict[str, Counter]:
    from coreml_lint.sweep.table import outcome_of

    counts: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        counts[family("aten." + result["op"])][outcome_of(result)] += 1
    return counts


def _find(entries: list[Entry], test: Callable[[Entry], bool]) -> list[Entry]:
    return [e for e in entries if test(e)]


def _dtypes(e: Entry) -> list[str]:
    return [o.partition(":")[0] for o in e.operands.split(",") if o]


PITFALLS: dict[str, Callable[[Entry], bool]] = {
    "bool min/max (crash)": lambda e: (
        e.outcome == "crash"
        and re.match(r"aten\.(amax|amin|max|min|maximum|minimum)\.", e.op) is not None
        and "bool" in _dtypes(e)
    ),
    "rms_norm without eps (crash)": lambda e: (
        e.op == "aten.rms_norm.default"
        and e.outcome == "crash"
        and "a3=" not in e.variant
        and set(_dtypes(e)) == {"float32"}
    ),
    "max_pool without stride (crash)": lambda e: (
        "max_pool" in e.op
        and e.outcome == "crash"
        and "a2=" not in e.variant
        and set(_dtypes(e)) == {"float32"}
    ),
    "tanh GELU (wrong)": lambda e: (
        e.op == "aten.gelu.default" and "approximate=tanh" in e.variant and e.outcome == "wrong"
    ),
    "bfloat16 (crash)": lambda e: "bfloat16" in _dtypes(e) and e.outcome == "crash",
    "8-bit inputs (crash)": lambda e: (
        e.outcome == "crash" and any(o in e.operands for o in ("uint8:in", "int8:in"))
    ),
    "integer fills (wrong)": lambda e: (
        re.match(r"aten\.(full|full_like|new_full|fill)", e.op) is not None and e.outcome == "wrong"
    ),
    "float16 SDPA with scale (crash)": lambda e: (
        "scaled_dot_product" in e.op
        and "scale=" in e.variant
        and "float16" in _dtypes(e)
        and e.outcome == "crash"
    ),
    "float16 float-exponent pow (crash)": lambda e: (
        e.op == "aten.pow.Tensor_Scalar"
        and "float16" in _dtypes(e)
        and re.search(r"a1=(frac|whole)", e.variant) is not None
        and e.outcome == "crash"
    ),
}


def render_report(store: Any, table_path: Path) -> str:
    cases = store.cases()  # a superseded case is kept in its shard, not reported
    results = [r for i, r in store.results().items() if i in cases]
    lines = [f"{len(results)} cases measured"]
    meta = store.meta()
    if meta.get("wall_seconds"):
        lines.append(
            f"wall time {meta['wall_seconds'] / 60:.1f} min with {meta.get('workers')} workers"
        )
    lines.append("\noutcomes by op family:")
    for name, counts in sorted(by_family(results).items()):
        parts = ", ".join(f"{o} {n}" for o, n in counts.most_common())
        lines.append(f"  {name}: {parts}")
    table = load_table(table_path)
    entries = [e for rows in table.entries.values() for e in rows]
    bad = [e for e in entries if e.outcome in BAD]
    lines.append(
        f"\ntable {table_path}: {len(entries)} entries over {len(table.by_op)} ops, "
        f"{len(bad)} crash/wrong"
    )
    lines.append("\ncatalogue pitfalls in the table:")
    for name, test in PITFALLS.items():
        found = _find(entries, test)
        ops = sorted({e.op for e in found})
        shown = ", ".join(ops[:4]) + (f" (+{len(ops) - 4} ops)" if len(ops) > 4 else "")
        lines.append(f"  {'FOUND' if found else 'missed'}  {name}: {len(found)} entries {shown}")
    return "\n".join(lines)
