"""What one linted method gives the HTML report, turned into plain JSON-able data.

The page draws partition islands, node rows and the details panel from this data in the
browser. A 25k-node program must not become 25k DOM rows up front, so nodes are compact
arrays (op names, reasons and source lines interned into lists) that the page turns into
rows only when a partition is opened.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coreml_lint.core.files import display_path, project_root
from coreml_lint.core.findings import partitioner_code
from coreml_lint.program.graph import Graph, Node
from coreml_lint.program.placement import COREML, Partition, Placement
from coreml_lint.rulekit.context import source_location

if TYPE_CHECKING:
    from coreml_lint.core.findings import Finding, Location

# Bits of a node's flags entry.
KEPT_WHOLE, DECOMPOSED, REFUSED = 1, 2, 4
CRASH_OUTCOMES = ("crash", "load-failure")


@dataclass
class HtmlProgram:
    """One linted method, as the HTML report shows it.

    ``advice`` is the engine's combined advice (keys ``code``, ``avoids``, ``leaves``,
    ``introduces``, ``partitioner`` are shown first, any other key after them); ``verify``
    maps a partition id to ``{"status": "agrees" | "diverges" | "not verified", "detail":
    str}``; ``lowering`` is what ``lower`` did (``rewrites``, ``refused`` node -> reason,
    ``returned_buffers``, ``delegates``, ``cpu_ops``; a ``LowerReport.to_json()`` works too).
    """

    source: str
    graph: Graph
    placement: Placement
    findings: list[Finding]
    advice: dict[str, Any] | None = None
    verify: dict[int, dict[str, str]] | None = None
    lowering: dict[str, Any] | None = None

    @classmethod
    def from_report(
        cls,
        report: Any,
        *,
        source: str | None = None,
        verify: dict[int, dict[str, str]] | None = None,
        lowering: Any = None,
    ) -> HtmlProgram:
        """From anything with ``graph``, ``placement``, ``findings`` and ``advice`` (the
        engine's ``ProgramReport``); ``lowering`` may be a dict or a ``LowerReport``."""
        if lowering is not None and hasattr(lowering, "to_json"):
            lowering = lowering.to_json()
        return cls(
            source=source or report.graph.source,
            graph=report.graph,
            placement=report.placement,
            findings=list(report.findings),
            advice=_advice_dict(getattr(report, "advice", None)),
            verify=verify,
            lowering=lowering,
        )


def _advice_dict(advice: Any) -> dict[str, Any] | None:
    """The engine's ``Advice`` (or an advice dict) as the dict the page shows."""
    if advice is None:
        return None
    data = advice.to_json() if hasattr(advice, "to_json") else dict(advice)
    if data.get("checked") is None:  # not lowered with the advice (--check-advice does)
        data.pop("checked", None)
    return data or None


def _value(item: Any) -> str:
    """An enum's value, or the string itself (findings are duck-typed)."""
    return str(getattr(item, "value", item))


def shape_text(shape: tuple[Any, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


class _Interner:
    """Strings shared by many nodes (op names, reasons, source lines) stored once."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._index: dict[Any, int] = {}

    def __call__(self, item: Any) -> int:
        key = tuple(item) if isinstance(item, list) else item
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(item)
        return self._index[key]


class _Builder:
    """Builds one program's data; see :func:`program_data`."""

    def __init__(self, program: HtmlProgram) -> None:
        self.program = program
        self.graph = program.graph
        self.placement = program.placement
        self.index = {node.name: i for i, node in enumerate(self.graph.nodes)}
        self.producer = {out: node for node in self.graph.nodes for out in node.outputs}
        self.users = self.graph.users()
        self.input_kinds = {spec.name: spec.kind for spec in self.graph.inputs}
        self.graph_outputs = {o.name for o in self.graph.outputs if o.name}
        self.ops, self.reasons, self.locs = _Interner(), _Interner(), _Interner()
        self.root = project_root()  # model source paths shown as the text formats show them
        self.types = _Interner()  # [dtype, shape] pairs: most tensors share a few
        refused = (program.lowering or {}).get("refused") or {}
        self.refused = set(refused)
        # Partition ids may arrive as strings when the results went through JSON.
        self.verify = {int(k): v for k, v in (program.verify or {}).items()}

    def tensor(self, name: str) -> list[str]:
        info = self.graph.tensors.get(name)
        return [name, info.dtype, shape_text(info.shape)] if info else [name, "?", "?"]

    def part_of(self, node: Node) -> int | None:
        return self.placement.nodes[node.name].partition

    def peer_of_node(self, node: Node) -> list[Any]:
        pid = self.part_of(node)
        return ["p", pid] if pid is not None else ["n", self.index[node.name]]

    def input_peers(self, name: str) -> list[list[Any]]:
        node = self.producer.get(name)
        if node is not None:
            return [self.peer_of_node(node)]
        return [["g", (self.input_kinds.get(name) or "input").replace("_", " ")]]

    def output_peers(self, name: str, pid: int) -> list[list[Any]]:
        peers: list[list[Any]] = []
        for user in self.users.get(name, []):
            if self.part_of(user) != pid:
                peer = self.peer_of_node(user)
                if peer not in peers:
                    peers.append(peer)
        if name in self.graph_outputs:
            peers.append(["g", "program output"])
        return peers

    def node_row(self, node: Node) -> list[Any]:
        where = self.placement.nodes[node.name]
        flags = (KEPT_WHOLE if where.kept_whole else 0) | (DECOMPOSED if where.decomposed else 0)
        if node.name in self.refused:  # lower names refused nodes by their edge-graph name
            flags |= REFUSED
        loc = source_location(node.stack_trace)
        loc_id = self.locs(self.location(loc)) if loc else -1
        pid = where.partition
        return [
            node.name,
            self.ops(where.edge_name),
            self.ops(node.target),
            1 if where.where == COREML else 0,
            -1 if pid is None else pid,
            self.reasons(where.reason),
            list(dict.fromkeys(node.tensor_inputs())),
            list(node.outputs),
            flags,
            loc_id,
        ]

    def partition(self, part: Partition) -> dict[str, Any]:
        ops = Counter(self.placement.nodes[n.name].edge_name for n in part.nodes)
        verify = self.verify.get(part.id)
        return {
            "id": part.id,
            "nodes": [self.index[n.name] for n in part.nodes],
            "inputs": [[*self.tensor(t), self.input_peers(t)] for t in part.inputs],
            "outputs": [[*self.tensor(t), self.output_peers(t, part.id)] for t in part.outputs],
            "states": [self.tensor(t) for t in part.states],
            "constants": [self.tensor(t) for t in part.constants],
            "ops": [[self.ops(op), count] for op, count in ops.most_common()],
            "verify": dict(verify) if verify else None,
        }

    def items(self) -> list[dict[str, Any]]:
        """Partitions and the CPU runs between them, in program order: a partition sits
        where its first node is; consecutive CPU nodes form one run."""
        items: list[dict[str, Any]] = []
        seen: set[int] = set()
        for i, node in enumerate(self.graph.nodes):
            pid = self.part_of(node)
            if pid is not None:
                if pid not in seen:
                    seen.add(pid)
                    items.append({"k": "p", "id": pid})
            elif items and items[-1]["k"] == "c":
                items[-1]["nodes"].append(i)
            else:
                items.append({"k": "c", "nodes": [i]})
        return items

    def location(self, loc: Location) -> list[Any]:
        return [display_path(loc.path, self.root), loc.line, loc.source_line or ""]

    def finding(self, finding: Finding) -> dict[str, Any]:
        loc = finding.location
        partitioner = getattr(finding, "partitioner", None)
        return {
            "code": finding.code,
            "name": finding.name,
            "severity": _value(finding.severity),
            "outcome": _value(finding.outcome),
            "message": finding.message,
            "node": finding.node,
            "nodeIndex": self.index.get(finding.node, -1) if finding.node else -1,
            "op": finding.op,
            "loc": self.location(loc) if loc else None,
            "fix": finding.fix,
            "partitioner": partitioner_code(partitioner) if partitioner else None,
            "lowerFixes": bool(getattr(finding, "lower_fixes", False)),
            "count": int(getattr(finding, "count", 1) or 1),
        }


def program_data(program: HtmlProgram) -> dict[str, Any]:
    """The JSON the page's script reads for one program."""
    b = _Builder(program)
    nodes = [b.node_row(node) for node in b.graph.nodes]
    partitions = [b.partition(part) for part in b.placement.partitions]
    return {
        "source": program.source,
        "method": b.graph.method,
        "nodes": nodes,
        "partitions": partitions,
        "items": b.items(),
        "findings": [b.finding(f) for f in program.findings],
        "tensors": {
            name: b.types([info.dtype, shape_text(info.shape)])
            for name, info in b.graph.tensors.items()
        },
        "types": b.types.items,
        "ops": b.ops.items,
        "reasons": b.reasons.items,
        "locs": b.locs.items,
    }


def summary_counts(program: HtmlProgram) -> dict[str, Any]:
    """The numbers at the top of the page: placement, partitions, findings by outcome."""
    summary = program.placement.summary()
    by_outcome: Counter[str] = Counter()
    by_severity: Counter[str] = Counter()
    for f in program.findings:
        outcome, severity = _value(f.outcome), _value(f.severity)
        by_outcome["crash" if outcome in CRASH_OUTCOMES else outcome] += 1
        by_severity[severity] += 1
    return {
        "coreml_nodes": summary["coreml_node_count"],
        "cpu_nodes": summary["cpu_node_count"],
        "coreml_ops": summary["coreml_ops"],
        "cpu_ops": summary["cpu_ops"],
        "partitions": len(summary["partitions"]),
        "crashes": by_outcome["crash"],
        "silent": by_outcome["silent"],
        "by_outcome": dict(by_outcome),
        "by_severity": dict(by_severity),
        "settings": summary["settings"],
    }
