"""Aggregate the sweep's results into the checked-in table ``measured/data/behaviour.json``.

Only cases whose op became exactly one node of the linter's canonical graph are keyed: a
delegated node, or the op as the user wrote it where ``to_edge`` decomposes it (beside a
data-sized op, the nodes computing its size are not counted). Cases with the same key at the
same target and shape class are one cell; a cell whose cases disagree is ``mixed`` (the
rule never reports it). Cells of one key are then folded: all shape classes agreeing at a
target become shape ``*``, and targets with the same outcome one target list.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from coreml_lint.measured.case import Result
from coreml_lint.measured.entry import format_targets, parse_targets
from coreml_lint.measured.key import MeasuredKey
from coreml_lint.measured.outcomes import (
    BOUNDARY,
    BOUNDARY_CRASH,
    MIXED,
    boundary_crash,
    normalized,
)
from coreml_lint.measured.table import FORMAT
from coreml_lint.measured.values import (
    FOLD_RANKS,
    FOLD_SHAPES,
    class_variant,
    ranks_of,
    underived,
)

Cell = tuple[str, str, int]  # outcome, message, cases


def keyed(result: Result) -> MeasuredKey | None:
    """The one key of a case whose op became one delegated node, or one node ``to_edge``
    decomposes (``dec``: ``nn.Hardshrink``, ``narrow``, ``repeat_interleave``, measured as
    users write them); float32 made inside Core ML keyed as an input, as
    ``KeyMaker.origin`` keys it."""
    keys = tensor_keys(result)
    if len(keys) != 1 or keys[0]["context"] == "?":
        return None
    # "coreai": a Core AI case (``coreai.py``), where the whole program is Core AI's
    placed = keys[0]["placed"]
    if placed not in ("coreml", "coreai") and not decomposed_whole(keys, result["op"]):
        return None
    operands = ",".join(
        "float32:in" if o == "float32:op" else o for o in keys[0]["operands"].split(",")
    )
    return MeasuredKey(keys[0], operands=operands) if keys[0]["operands"] else keys[0]


# Nodes that compute a size, not a tensor: export adds them beside an op whose output size
# depends on its data, and a model calling that op has them too. Dropped only beside those
# ops (``DATA_SIZED``): elsewhere (a dynamic shape) a size node may be what crashes.
SIZE_OPS = ("aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int")
DATA_SIZED = frozenset(
    {
        "nonzero.default",
        "nonzero_numpy.default",
        "argwhere.default",
        "where.default",
        "masked_select.default",
        "_unique2.default",
        "unique_dim.default",
        "unique_consecutive.default",
        "repeat_interleave.Tensor",
        "repeat_interleave.self_Tensor",
    }
)


def tensor_keys(result: Result) -> list[dict[str, str]]:
    """A case's keys, less the nodes that compute the size of a data-sized op's output
    (``SIZE_OPS``, ``_operator``)."""
    keys = result.get("keys") or []
    if result["op"] not in DATA_SIZED:
        return keys
    return [k for k in keys if k["op"] not in SIZE_OPS and not k["op"].startswith("_operator.")]


def decomposed_whole(keys: list[dict[str, str]], op: str) -> bool:
    """Whether a case's one key is its own op as the user wrote it, which ``to_edge``
    decomposes (into pieces Core ML runs, or that its edge verifier refuses; another op's
    decomposition is not it): the light graph holds that node whole, and nothing else
    answers it."""
    return len(keys) == 1 and keys[0]["placed"] == "dec" and keys[0]["op"] == f"aten.{op}"


# Interface divergences about the partition's outputs, not the op's values: a single-op
# program returning a clone returns the input var itself (CML501's failure, not the op's).
BOUNDARY_MESSAGES = ("interface output-is-input", "interface duplicate-output")


def decomposed_ops(results: list[dict[str, Any]]) -> set[str]:
    """The ops whose cases are keyed as written, ``to_edge`` decomposing them."""
    return {
        r["op"]
        for r in results
        if r["outcome"] not in ("export", "error")
        and (key := keyed(r)) is not None
        and key["placed"] == "dec"
    }


def outcome_of(result: dict[str, Any]) -> str:
    """The outcome as the table keys it: a boundary's failure is told from the op's."""
    if result["outcome"] == "wrong" and result["message"].startswith(BOUNDARY_MESSAGES):
        return BOUNDARY
    if result["outcome"] == "crash" and boundary_crash(result["message"]):
        return BOUNDARY_CRASH  # the op's output returned from the delegate (zero strides)
    return result["outcome"]


def cells(results: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[tuple[str, int], Cell]]:
    """(op, operands, variant, context) -> (shape, target) -> the measured cell."""
    raw: dict[tuple[str, ...], dict[tuple[str, int], list[tuple[str, str]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for result in results:
        key = keyed(result)
        if key is None or result["outcome"] in ("export", "error"):
            continue
        group = (key["op"], key["operands"], key["variant"], key["context"])
        outcome = outcome_of(result)  # a returned clone's interface is CML501's, not the op's
        raw[group][(key["shape"], result["target"])].append((outcome, result["message"]))
    found: dict[tuple[str, ...], dict[tuple[str, int], Cell]] = {}
    for group, by_cell in raw.items():
        found[group] = {where: _cell(seen) for where, seen in by_cell.items()}
    return found


def _cell(seen: list[tuple[str, str]]) -> Cell:
    outcomes = Counter(o for o, _ in seen)
    if len(outcomes) > 1:
        return MIXED, "; ".join(f"{n} {o}" for o, n in outcomes.most_common()), len(seen)
    messages = Counter(normalized(m) for _, m in seen)
    common = messages.most_common(1)[0][0]
    message = next(m for _, m in seen if normalized(m) == common)
    return seen[0][0], message, len(seen)


def fold(by_cell: dict[tuple[str, int], Cell]) -> list[tuple[str, frozenset[int], Cell]]:
    """(shape, targets, cell) rows: shape ``*`` where ``FOLD_SHAPES`` or more shape classes
    of ``FOLD_RANKS`` or more ranks were measured at a target and all agree (fewer say
    little about the others)."""
    per_target: dict[int, dict[str, Cell]] = defaultdict(dict)
    for (shape, target), cell in by_cell.items():
        per_target[target][shape] = cell
    rows: dict[tuple[str, str, str, str], list[Any]] = {}
    for target, shapes in per_target.items():
        signatures = {(c[0], normalized(c[1])) for c in shapes.values()}
        wide = len(shapes) >= FOLD_SHAPES and len(ranks_of(shapes)) >= FOLD_RANKS
        if len(signatures) == 1 and wide:
            merged = list(shapes.values())
            cell = (merged[0][0], merged[0][1], sum(c[2] for c in merged))
            items = [("*", cell)]
        else:
            items = list(shapes.items())
        for shape, cell in items:
            sig = (shape, cell[0], normalized(cell[1]))
            row = rows.setdefault((*sig, ""), [set(), cell, 0])
            row[0].add(target)
            row[2] += cell[2]
    return [
        (shape, frozenset(targets), (cell[0], cell[1], count))
        for (shape, _, _, _), (targets, cell, count) in sorted(rows.items())
    ]


def bases(results: list[dict[str, Any]], cases: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Op -> the variant of its base call (the schema defaults around a legal call)."""
    found: dict[str, str] = {}
    for result in results:
        case = cases.get(result["id"])
        key = keyed(result)
        if case is not None and case["axis"] == "base" and key is not None:
            found.setdefault(key["op"], key["variant"])
    return dict(sorted(found.items()))


# The table's per-op maps (written one op a line): the base call's variant and what the
# schema says of the arguments.
PER_OP = ("bases", "arg_names", "arg_defaults", "dtype_args")


def arg_names(ops: set[str]) -> dict[str, list[str]]:
    """Op -> its schema's argument names (to print ``eps=frac`` rather than ``a3=frac``)."""
    return {op: [a.name for a in schema.arguments] for op, schema in _schemas(ops)}


def arg_defaults(ops: set[str]) -> dict[str, dict[str, str]]:
    """Op -> each defaulted argument as keys record it (``a4=[1,1]``, ``dtype=None``): export
    spells out a default before a given argument, and a call is compared by what it changes
    (``BehaviourTable.changes``)."""
    from coreml_lint.measured.values import value_text

    return {
        op: {
            _key_name(i, a): value_text(_plain(a.default_value))
            for i, a in enumerate(schema.arguments)
            if a.has_default_value() and not str(a.type).startswith(("Tensor", "Optional[Tensor"))
        }
        for op, schema in _schemas(ops)
    }


def dtype_args(ops: set[str]) -> dict[str, list[str]]:
    """Op -> its dtype arguments as keys name them (``dtype`` of ``sum.dim_IntList``,
    ``a2`` of ``softmax.int``): which of a variant's values is a dtype is the schema's to
    say, not the value's spelling."""
    found = {}
    for op, schema in _schemas(ops):
        names = [
            _key_name(i, a)
            for i, a in enumerate(schema.arguments)
            if str(a.real_type).removeprefix("Optional[").removesuffix("]") == "ScalarType"
        ]
        if names:
            found[op] = names
    return found


def _schemas(ops: set[str]) -> Iterator[tuple[str, Any]]:
    """(op, its schema) for each of ``ops`` (``aten.amax.default``) this torch has."""
    import torch

    for op in sorted(ops):
        namespace, base, overload = op.split(".")
        try:
            yield op, getattr(getattr(getattr(torch.ops, namespace), base), overload)._schema
        except (AttributeError, RuntimeError):
            continue


def _key_name(index: int, arg: Any) -> str:
    """An argument as a key names it: a keyword-only one by name, else by position."""
    return arg.name if arg.kwarg_only else f"a{index}"


def _plain(value: Any) -> Any:
    """A schema default as a node argument holds it (a dtype default as its name)."""
    return str(value).rpartition(".")[2] if type(value).__name__ == "dtype" else value


def build_table(
    results: list[dict[str, Any]], sweep: dict[str, Any], cases: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    messages: list[str] = []
    index: dict[str, int] = {}
    ops: dict[str, list[list[Any]]] = defaultdict(list)
    decomposed = decomposed_ops(results)
    for (op, operands, variant, context), by_cell in sorted(cells(results).items()):
        for shape, targets, (outcome, message, count) in fold(by_cell):
            if message and message not in index:
                index[message] = len(messages)
                messages.append(message)
            ops[op].append(
                [
                    operands,
                    variant,
                    context,
                    shape,
                    format_targets(targets),
                    outcome,
                    index.get(message) if message else None,
                    count,
                ]
            )
    return {
        "format": FORMAT,
        "measured_with": measured_versions(),
        "sweep": sweep,
        "bases": bases(results, cases),
        "arg_names": arg_names(set(ops)),
        "arg_defaults": arg_defaults(set(ops)),
        "dtype_args": dtype_args(set(ops)),
        "measured_decomposed": sorted(op for op in ops if op.removeprefix("aten.") in decomposed),
        "messages": messages,
        "ops": dict(sorted(ops.items())),
    }


def merge_new(shipped: dict[str, Any], extra: dict[str, Any], note: str) -> dict[str, Any]:
    """``shipped`` with the rows of ``extra`` whose (operands, variant, context) the shipped
    table has not measured: a later sample adds cells, and never changes a measured one
    (a cell both measured would need both sweeps' cases to fold). Both on one stack."""
    if extra["measured_with"] != shipped["measured_with"]:
        raise ValueError("the two tables were measured on other versions")
    messages = list(shipped["messages"])
    index = {m: i for i, m in enumerate(messages)}
    added = 0
    for op, rows in extra["ops"].items():
        mine = shipped["ops"].setdefault(op, [])
        have = {tuple(r[:3]) for r in mine}
        for row in rows:
            if tuple(row[:3]) in have:
                continue
            message = extra["messages"][row[6]] if row[6] is not None else None
            if message is not None and message not in index:
                index[message] = len(messages)
                messages.append(message)
            mine.append([*row[:6], index.get(message) if message else None, row[7]])
            added += 1
    shipped["messages"] = messages
    shipped["ops"] = dict(sorted(shipped["ops"].items()))
    for key in PER_OP:  # the shipped table lacks them for new ops
        merged = {**extra.get(key, {}), **shipped.get(key, {})}
        shipped[key] = dict(sorted(merged.items()))
    kept = ("measured", "cases", "outcomes", "wall_seconds", "workers")
    summary = {k: extra["sweep"][k] for k in kept if k in extra["sweep"]}
    shipped["sweep"].setdefault("added", []).append(dict(summary, rows=added, note=note))
    return shipped


def carry(previous: dict[str, Any], table: dict[str, Any], note: str) -> dict[str, Any]:
    """``table`` with what ``previous`` (the table shipped before, on the same stack)
    measured and it does not: every row of an op this sweep did not complete, and of the
    others each row at the targets no new row covers (same operands and context, and a
    variant equal to a new one or the class of one, with or without a squeeze's ``(no-op)``
    mark, which older tables lack: an exact measurement supersedes the class-keyed cell it
    falls in). A later sweep so adds cells and refines class cells
    into exact ones, and never loses a call and target nobody measured again."""
    if previous.get("measured_with") != table["measured_with"]:
        return table
    messages = list(table["messages"])
    index = {m: i for i, m in enumerate(messages)}
    rows_kept, ops_kept = 0, set()
    for op, rows in previous["ops"].items():
        mine = table["ops"].setdefault(op, [])
        covered: dict[tuple[str, str, str], set[int]] = defaultdict(set)
        for r in mine:
            for variant in (r[1], class_variant(r[1]), class_variant(underived(r[1]))):
                covered[(r[0], variant, r[2])] |= parse_targets(r[4])
        for row in rows:
            left = parse_targets(row[4]) - covered.get((row[0], row[1], row[2]), set())
            if not left:
                continue
            message = previous["messages"][row[6]] if row[6] is not None else None
            if message is not None and message not in index:
                index[message] = len(messages)
                messages.append(message)
            mine.append([*row[:4], format_targets(left), row[5], index.get(message), row[7]])
            rows_kept += 1
            ops_kept.add(op)
        if not mine:
            del table["ops"][op]
    table["messages"] = messages
    table["ops"] = dict(sorted(table["ops"].items()))
    for key in PER_OP:  # carried ops' own, the new first
        table[key] = dict(sorted({**previous.get(key, {}), **table.get(key, {})}.items()))
    lacking = set(table["ops"]) - set(table["arg_defaults"])  # a table older than the key
    table["arg_defaults"] = dict(sorted({**table["arg_defaults"], **arg_defaults(lacking)}.items()))
    table["dtype_args"] = dtype_args(set(table["ops"]))  # the schema's, for every op
    before = previous["sweep"].get("carried", {}).get("from") or {
        k: previous["sweep"][k]
        for k in ("measured", "cases", "cases_generated", "note", "added")
        if k in previous["sweep"]
    }
    table["sweep"]["carried"] = {
        "rows": rows_kept,
        "ops": len(ops_kept),
        "note": note,
        "from": before,
    }
    return table


def measured_versions() -> dict[str, str]:
    return {p: metadata.version(p) for p in ("torch", "executorch", "coremltools")}


def render(table: dict[str, Any]) -> str:
    """One line per entry (and per op of the per-op maps): compact, and a re-measure diffs
    by line."""
    lines = ["{"]
    for key, value in table.items():
        if key in ("messages", "ops", *PER_OP):
            continue
        lines.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)},")
    for key in PER_OP:
        items = list(table[key].items())
        lines.append(f"{json.dumps(key)}: {{")
        lines += [
            f"{json.dumps(op)}: {json.dumps(v)}" + ("," if i < len(items) - 1 else "")
            for i, (op, v) in enumerate(items)
        ]
        lines.append("},")
    lines.append('"messages": [')
    lines += [json.dumps(m) + "," for m in table["messages"]]
    if table["messages"]:
        lines[-1] = lines[-1][:-1]
    lines.append("],")
    lines.append('"ops": {')
    ops = list(table["ops"].items())
    for i, (op, rows) in enumerate(ops):
        lines.append(f"{json.dumps(op)}: [")
        lines += [json.dumps(r) + ("," if j < len(rows) - 1 else "") for j, r in enumerate(rows)]
        lines.append("]" + ("," if i < len(ops) - 1 else ""))
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_table(path: Path, table: dict[str, Any]) -> None:
    path.write_text(render(table))
