"""``lower`` learns from a crash nobody predicted, and from a divergence ``verify`` locates.

The lint predicts crashes as far as its rules and the measured op table reach. When the
real lowering still crashes, coremltools names the node it was converting (``converting
'prelu' op (located at: 'aten_prelu_default')``; ``stack/capture.py`` records it from the
converter's own node); when ``--verify`` finds a partition diverging, it names the MIL op and
edge node whose value first departs from eager, when it is certain. Either is an edge node;
its provenance (``from_node``) leads back to the node of the ATen program lowered (the node a
user's program holds: ``prelu``). That node is then kept on the CPU through the same answer
hook the rules use (``Rule.refuse``, asked by ``lowering/partitioner.py``): decomposed when
the stock partitioner would keep it whole, and every edge node made from it left to
ExecuTorch. ``lower`` then lowers again, at most :data:`MAX_MOVES` times.

What is learned is also measured: the node's call is measured alone, exactly as ``check
--measure`` measures a call the shipped table lacks (``sweep/ondemand.py``), into the same
per-stack cache, so the next ``check --measure`` of a program with that call reads it back
without lowering. A crash that names no node (a MIL pass after conversion, the partitioner,
``to_executorch``), or names one that maps to no node of the program, moves nothing:
``lower`` stops as before and says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from coreml_lint.core.findings import Outcome
from coreml_lint.rulekit.rule import Rule

MAX_MOVES = 4  # nodes moved to the CPU in one ``lower``: then it stops, saying so
CRASH, DIVERGENCE = "crash", "divergence"  # what showed a node must move
LEARNED = "learned"  # the code the plan records the learned refusals under (no rule's)

Say = Callable[[str], None]


@dataclass
class Move:
    """One node kept on the CPU because the lowering showed it must be: the ATen node of the
    program lowered, its op, the edge node the converter or verifier named, why, and what
    the op-table cache now holds for its call."""

    node: str
    target: str
    kind: str  # CRASH or DIVERGENCE
    edge_node: str
    why: str
    measured: str = ""

    def describe(self) -> str:
        what = (
            "the converter crashed on" if self.kind == CRASH else "verify located a divergence at"
        )
        measured = f"; {self.measured}" if self.measured else ""
        return (
            f"{self.node} ({self.target}) moved to the CPU: {what} {self.edge_node}: "
            f"{self.why}{measured}"
        )

    def to_json(self) -> dict[str, str]:
        return asdict(self)


class KeptOnCpu(Rule):
    """The learned answer, asked like a rule's (no rule's: the plan records it under
    ``learned``): refuse the moved ATen nodes and every edge node made from them."""

    code = LEARNED
    name = "learned-by-lowering"
    outcome = Outcome.CRASH
    summary = "a node the lowering itself showed must stay on the CPU"

    def __init__(self, learned: Learned) -> None:
        self.learned = learned

    def refuse(self, node: Any, settings: Any) -> str | None:
        move = self.learned.moves.get(self.learned.origin(node) or "")
        return None if move is None else f"the {move.kind} at {move.edge_node}: {move.why}"


@dataclass
class Learned:
    """What one ``lower`` learned, across its attempts (each lowers the same program)."""

    moves: dict[str, Move] = field(default_factory=dict)  # ATen node -> why it moved
    aten: dict[str, str] = field(default_factory=dict)  # ATen node -> its op, of the program
    readers: dict[str, list[str]] = field(default_factory=dict)  # ATen node -> its readers
    stopped: str = ""  # why learning stopped short, when it did

    def bind(self, program: Any) -> None:
        """The ATen program about to be lowered: the names an edge node's provenance meets."""
        nodes = [n for n in program.graph.nodes if n.op == "call_function"]
        self.aten = {n.name: str(n.target) for n in nodes}
        self.readers = {  # a tuple's getitem holds no value Core ML computes
            n.name: [
                u.name
                for u in n.users
                if u.op == "call_function" and "getitem" not in str(u.target)
            ]
            for n in nodes
        }

    def rules(self) -> list[Rule]:
        return [KeptOnCpu(self)] if self.moves else []

    def origin(self, node: Any) -> str | None:
        """The ATen node ``node`` is (in the ATen graph) or was made from (an edge node)."""
        if type(node.target).__name__ != "EdgeOpOverload" and node.name in self.aten:
            return node.name
        from coreml_lint.stack.capture import lineage

        return next((name for name in lineage(node) if name in self.aten), None)

    def from_crash(
        self, failures: list[Any], decomposed: dict[str, str] | None = None
    ) -> Move | str:
        """The move a crash calls for, or why it calls for none. A crash that names no node
        after a rule had a node decomposed so its pieces go to Core ML (``decomposed``: node
        -> the rule's code) moves that node whole, pieces and all (a group norm of a 5-d
        input decomposes into rank-6 views, which Core ML's backend refuses by layer name)."""
        if not failures:
            pieces = next(
                (n for n in decomposed or {} if n not in self.moves and n in self.aten), None
            )
            if pieces is None:
                return "the converter named no node (the crash is not attributable)"
            why = (
                f"lowering crashed naming no node after {decomposed[pieces]}'s answer had it "
                "decomposed for Core ML: its pieces stay on the CPU too"
            )
            return self._new(Move(pieces, self.aten[pieces], CRASH, "(its pieces)", why), pieces)
        failure = failures[0]
        origin = next((name for name in failure.lineage if name in self.aten), None)
        if origin is None:
            return f"{failure.located} maps to no node of the program lowered"
        move = Move(origin, self.aten[origin], CRASH, failure.node, failure.message)
        return self._new(move, failure.located)

    def from_divergence(
        self, divergences: list[Any], lineages: dict[str, list[str]], aten: dict | None = None
    ) -> Move | str:
        """The move the first divergence located at a node calls for, or why none; ``aten``:
        the ATen nodes of the attempt that diverged (else the latest bound)."""
        aten = aten or self.aten
        located = [d for d in divergences if d.node]
        if not located:
            return "verify located no diverging node (the divergence is not attributable)"
        first = located[0]
        origin = next((n for n in lineages.get(first.node, []) if n in aten), None)
        if origin is None:
            return f"the diverging node {first.node} maps to no node of the program lowered"
        why = f"{first.check} {first.kind} ({first.mil_op or 'MIL op'}): {first.message}"
        if origin in self.moves:  # its value, computed on the CPU, enters the partition
            # there and departs as Core ML takes it in (a float32 value past float16's
            # range): what reads it in the partition moves too
            reader = next((r for r in self.readers.get(origin, []) if r not in self.moves), None)
            if reader is not None and reader in aten:
                why += f" (the value {origin} computes on the CPU departs as Core ML reads it)"
                return self._new(Move(reader, aten[reader], DIVERGENCE, first.node, why), reader)
        return self._new(Move(origin, aten[origin], DIVERGENCE, first.node, why), first.node)

    def _new(self, move: Move, seen: str) -> Move | str:
        if move.node in self.moves:
            return f"{seen}: {move.node} is already on the CPU, and the failure persists"
        if len(self.moves) >= MAX_MOVES:
            return f"{seen}: already moved {MAX_MOVES} node(s), the most one lower moves"
        return move

    def learn(self, move: Move, linted: Any, say: Say) -> None:
        """Keep ``move``, and measure its call alone into the ``--measure`` cache."""
        self.moves[move.node] = move
        say(f"keeping {move.node} ({move.target}) on the CPU and lowering again: {move.why}")
        move.measured = measure_call(linted, move.node, say)

    def to_json(self) -> list[dict[str, str]]:
        return [move.to_json() for move in self.moves.values()]


def delegate_lineages(edge: Any) -> dict[str, list[str]]:
    """Every node of the edge program and of its Core ML delegates' modules, by name, with
    the names of the nodes it was made from (a divergence names a delegate's node)."""
    from coreml_lint.stack.capture import lineage

    program = edge.exported_program()
    found: dict[str, list[str]] = {}
    graphs = [program.graph]
    for node in program.graph.nodes:
        if node.op == "call_function" and "executorch_call_delegate" in str(node.target):
            lowered = getattr(program.graph_module, node.args[0].target)
            graphs.append(lowered.original_module.graph)
    for graph in graphs:
        for node in graph.nodes:
            if node.op == "call_function":
                found.setdefault(node.name, lineage(node))
    return found


def measure_call(linted: Any, name: str, say: Say) -> str:
    """Measure the call of node ``name`` of the linted program alone, as ``check --measure``
    does, into its cache; what the cache (or the shipped table) now says about it."""
    from coreml_lint.measured.key import KeyMaker
    from coreml_lint.measured.versions import active_table
    from coreml_lint.sweep.ondemand import Unmeasurable, Wanted, measure_wanted, node_case

    graph, placement = linted.graph, linted.placement
    node = next((n for n in graph.nodes if n.name == name), None)
    if node is None or not node.target.startswith("aten."):
        return "its call is not measured (not an ATen node of the linted program)"
    maker = KeyMaker(graph, placement)
    key, target = maker.key(node), placement.settings.minimum_deployment_target
    table = active_table()
    entry = table.lookup(key, target) if table is not None else None
    if entry is not None and entry.shape in ("*", key.shape):
        return f"the shipped op table measured this call alone: {entry.outcome}"
    try:
        case = node_case(graph, maker, node, target, table.arg_names if table else {})
    except Unmeasurable as why:
        return f"its call is not measurable alone ({why})"
    try:
        with _restored():
            summary = measure_wanted([Wanted(key, case, node.name)], say)
    except Exception as exc:  # the cache unwritable, say: the move stands, unmeasured
        return f"its call could not be measured alone ({type(exc).__name__}: {exc})"[:300]
    if summary.cached:
        return "its call alone was measured before (in the --measure cache)"
    ((_, result),) = summary.measured
    elsewhere = " under another key than the node's" if summary.elsewhere else ""
    return f"measured alone{elsewhere}: {result['outcome']} (kept in the --measure cache)"


@contextmanager
def _restored() -> Iterator[None]:
    """A measurement quiets and pins the process as a sweep worker does (logging, torch
    threads): undone, since ``lower`` goes on lowering and verifying."""
    import torch

    threads, disabled = torch.get_num_threads(), logging.root.manager.disable
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        logging.disable(disabled)
