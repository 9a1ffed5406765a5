"""``coreml-lint check --measure``: measure what the shipped table lacks, for this program.

The sweep measures calls it generated; a user's program holds calls it never tried (other
argument values, a batch of one, a rank the sweep skipped). For every Core ML node whose
key the shipped table has not measured, this builds the single-op program of that very
call (the node's operand shapes, dtypes and origins, its arguments as recorded), measures
it as the sweep does (``sweep/measure.py``: stock lowering, the ``verify`` oracle on typical
then extreme values) and keeps the result in the user's cache, per stack version
(``measured/stack.py``'s ``cache_folder``), as a table CML801 then reads. A key measured
once is never measured again: the second run is a plain lint.

Finding what to measure is torch-free; measuring imports the heavy stack.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from coreml_lint.measured.case import Case
from coreml_lint.measured.key import Key, KeyMaker, keyed_whole
from coreml_lint.measured.stack import cache_folder
from coreml_lint.measured.table import TABLE_PATH, BehaviourTable
from coreml_lint.program.graph import DType, Graph, Node, Opaque, SymRef, TensorRef
from coreml_lint.program.placement import COREML, Placement
from coreml_lint.sweep.values import DTYPES, case_id, encode_float, ordered_bounds

Say = Callable[[str], None]


class Unmeasurable(ValueError):
    """A node whose call cannot be rebuilt as a single-op program (dynamic shapes, a dtype
    or argument kind the generator does not make)."""


@dataclass
class Wanted:
    key: Key
    case: dict[str, Any]
    node: str


@dataclass
class Summary:
    measured: list[tuple[Wanted, dict[str, Any]]] = field(default_factory=list)
    cached: int = 0
    unmeasurable: dict[str, str] = field(default_factory=dict)  # node -> why
    elsewhere: list[str] = field(default_factory=list)  # measured under another key


@contextmanager
def quiet() -> Iterator[None]:
    """Silence what the heavy stack prints while it imports and converts (progress bars,
    version warnings from C++ as well as Python): the user asked for a lint."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def wanted(graph: Graph, placement: Placement, table: BehaviourTable) -> Iterator[Wanted]:
    """One single-op case per key of a whole Core ML node the table has not measured."""
    maker = KeyMaker(graph, placement)
    target = placement.settings.minimum_deployment_target
    seen: set[Key] = set()
    for node in graph.nodes:
        where = placement.nodes[node.name]
        if where.where != COREML or not node.target.startswith("aten."):
            continue
        if where.decomposed and not keyed_whole(node.target):
            continue  # its pieces are keyed (and measured) each on its own
        key = maker.key(node)
        entry = table.lookup(key, target)
        if key in seen or (entry is not None and entry.shape in ("*", key.shape)):
            continue
        seen.add(key)
        try:
            case = node_case(graph, maker, node, target, table.arg_names)
        except Unmeasurable as why:
            yield Wanted(key, {"why": str(why)}, node.name)
            continue
        yield Wanted(key, case, node.name)


def node_case(
    graph: Graph,
    maker: KeyMaker,
    node: Node,
    target: int,
    names_of: Mapping[str, list[str]],
) -> Case:
    """The sweep's case spec for the node's call as the table keys it (``__and__`` as
    ``bitwise_and``, ``transpose`` as the ``permute`` it becomes: ``KeyMaker.keyed_node``;
    ``sweep/values.py`` describes the form). ``names_of``: each op's schema argument
    names (the table's ``arg_names``), which say which operands are a ``min`` and a
    ``max`` the case holds apart as models do (``values.ordered_bounds``)."""
    tensors: list[dict[str, Any]] = []

    def encoded(value: Any) -> Any:
        if isinstance(value, TensorRef):
            return _tensor(graph, maker, node, value, tensors)
        if isinstance(value, (list, tuple)):
            return [encoded(v) for v in value]
        if isinstance(value, DType):
            return {"dtype": value.name}
        if isinstance(value, float):
            return encode_float(value)
        if isinstance(value, Opaque) and value.kind in ("as_device", "as_layout"):
            return {"opaque": value.kind}
        if isinstance(value, Opaque) and value.kind == "as_memory_format":
            return {"opaque": value.kind, "value": value.value}
        if isinstance(value, (SymRef, Opaque)):
            raise Unmeasurable(f"an argument of kind {getattr(value, 'kind', 'symbolic')}")
        return value

    keyed = maker.keyed_node(node)
    args = [encoded(a) for a in keyed.args]
    kwargs = {k: encoded(v) for k, v in keyed.kwargs.items()}
    names = names_of.get(keyed.target, [])
    case = {
        "op": keyed.target[len("aten.") :],
        "args": args,
        "kwargs": kwargs,
        "tensors": ordered_bounds(tensors, names, args, kwargs),
        "context": "",
        "axis": "measure",
        "label": node.name,
        "target": target,
    }
    if len(node.outputs) > 1 and not all(o in maker.read for o in node.outputs):
        case["returns"] = [i for i, o in enumerate(node.outputs) if o in maker.read]
    case["id"] = case_id(case)
    return case


def _tensor(graph, maker, node, ref, tensors) -> dict[str, int]:
    info = graph.tensors.get(ref.name)
    if info is None or not all(isinstance(d, int) for d in info.shape):
        raise Unmeasurable("an operand of dynamic or unknown shape")
    if info.dtype not in DTYPES:
        raise Unmeasurable(f"an operand of dtype {info.dtype}")
    origin = maker.origin(ref.name, node)
    if origin == "op" and info.dtype == "float32":
        origin = "in"
    spec = {"shape": list(info.shape), "dtype": info.dtype, "values": "typical", "origin": origin}
    tensors.append(spec)
    return {"t": len(tensors) - 1}


def cached_ids() -> set[str]:
    """The cases measured on this machine's stack before (read without torch)."""
    from coreml_lint.sweep.run import Store

    folder = cache_folder()
    return set(Store(folder).results()) if folder.exists() else set()


# ---------------------------------------------------------------- the heavy half
def measure_wanted(found: list[Wanted], say: Say) -> Summary:
    """Measure every wanted case not yet in the cache, and rewrite the cached table."""
    from coreml_lint.sweep.run import Store

    store = Store(cache_folder())
    done = store.results()
    summary = Summary()
    for item in found:
        if "why" in item.case:
            summary.unmeasurable[item.node] = item.case["why"]
        elif item.case["id"] in done:
            summary.cached += 1
        else:
            say(f"measuring {item.key.op} ({item.node}) at iOS{item.case['target']}")
            with quiet():
                result = _measure_one(item.case)
            store.append(store.results_path, result)
            summary.measured.append((item, result))
            keys = {Key(k["op"], k["operands"], k["variant"], k["shape"]) for k in result["keys"]}
            if item.key not in keys:
                summary.elsewhere.append(item.node)
    if summary.measured:
        _write_table(store)
    return summary


def _measure_one(case: dict[str, Any]) -> dict[str, Any]:
    from coreml_lint.sweep.measure import first_line, measure
    from coreml_lint.sweep.tasks import _heavy, prepare

    prepare()
    _heavy()
    legal = _legal(case)
    try:
        (result,) = measure([legal])
    except Exception as exc:  # a call the stack cannot even build: recorded, not retried
        result = {"outcome": "error", "message": first_line(exc), "keys": []}
    return dict(result, id=case["id"], op=case["op"], target=case["target"])


def _legal(case: dict[str, Any]) -> dict[str, Any]:
    """The case with operand values torch accepts: integer operands that index another
    tensor get indices (``0``) when the typical values (up to 3001) are out of range."""
    from coreml_lint.sweep.build import _op
    from coreml_lint.sweep.legal import Call, is_legal
    from coreml_lint.sweep.schema import OpInfo, schema_args

    packet = _op(case["op"])
    info = OpInfo(case["op"], packet, tuple(schema_args(packet)))
    call = Call(case["tensors"], case["args"], case["kwargs"])
    if is_legal(info, call):
        return case
    made = call.copy()
    for spec in made.tensors:
        if spec["dtype"] in ("int64", "int32"):
            spec.update(values="index", high=1)
    return dict(case, tensors=made.tensors) if is_legal(info, made) else case


def _write_table(store: Any) -> None:
    from coreml_lint.sweep.table import build_table, write_table

    results = list(store.results().values())
    table = build_table(results, {"cases": len(results), "on_demand": True}, {})
    write_table(store.folder / TABLE_PATH.name, table)
