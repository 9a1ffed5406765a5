"""What a program rule reads: the canonical graph, its predicted placement, the settings.

A rule yields :class:`Finding` objects through :meth:`ProgramContext.finding`, which fills
in the node, op and model source location so every rule reports the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from coreml_lint.core.findings import Finding, Location, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.program.graph import INTEGER_DTYPES, Graph, Node
from coreml_lint.program.optable import OpTable, load_optable
from coreml_lint.program.placement import COREML, Placement
from coreml_lint.source.sites import module_site, owner_stack

if TYPE_CHECKING:
    from coreml_lint.rulekit.rule import Rule


# The ops a value is cast with (``x.float()``, ``x.to(dtype)``, ``x.type_as(y)``).
CASTS = frozenset({"_to_copy", "to", "_to_dim_order_copy", "type_as"})
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)')
# Frames inside these packages are library internals, not the user's model code.
_LIBRARY_PARTS = ("/torch/", "/executorch/", "/coremltools/", "/torchao/")


def direct_attribute(owner_path: str, path: str) -> str | None:
    """``"norm"`` for the module at ``path`` ``"block.norm"`` under ``"block"``; None when it
    is not a direct attribute of that owner (``self.block.norm(x)`` called from the top)."""
    prefix = f"{owner_path}." if owner_path else ""
    attribute = path[len(prefix) :] if path.startswith(prefix) else ""
    return attribute if attribute and "." not in attribute else None


def not_one_call(line: int, count: int, calls: str) -> str:
    """Why a program-guided fix is not placed: the finding's line does not hold exactly one
    matching call. None at all usually means the op is made inside a function called on that
    line: a node's stack trace keeps the frames of ``forward`` methods only, so the program
    points at the call of the helper, not into it."""
    reason = f"line {line} holds {count} {calls} calls, not one"
    if count == 0:
        reason += " (an op made inside a function called there is not followed)"
    return reason


def changed_since_export(finding: Finding, lines: list[str] | None) -> str | None:
    """Why a program finding cannot be fixed at its line because the model source changed
    after the program was exported (the line is other code now, or it moved), or None when
    the line is still the code the node's stack trace recorded (or none was recorded).
    Every program-guided fix asks this first: a stale ``.pt2`` is told as stale, not as a
    line that does not hold the pattern."""
    loc = finding.location
    if loc is None or not loc.source_line or lines is None:
        return None
    was = " ".join(loc.source_line.split())
    now = " ".join(lines[loc.line - 1].split()) if 0 < loc.line <= len(lines) else None
    if now == was:
        return None
    at = [number for number, text in enumerate(lines, 1) if " ".join(text.split()) == was]
    if now is None:
        reason = f"the file no longer has a line {loc.line}"
    else:
        reason = f"line {loc.line} is now `{_clip(now)}`"
    reason += f", not `{_clip(was)}` as when the program was exported"
    if len(at) == 1:
        reason += f" (that code is at line {at[0]} now)"
    elif not at:
        reason += " (that code is no longer in the file)"
    return reason + ": the source changed after export; export again and lint the new program"


def _clip(code: str, width: int = 60) -> str:
    return code if len(code) <= width else code[: width - 3] + "..."


def source_location(stack_trace: str | None) -> Location | None:
    """The innermost stack frame in the user's code, with its source line."""
    if not stack_trace:
        return None
    frames = list(_FRAME.finditer(stack_trace))
    if not frames:
        return None
    chosen = None
    for match in reversed(frames):
        path = match.group("path").replace("\\", "/")
        if not any(part in path for part in _LIBRARY_PARTS) or "/site-packages/" not in path:
            chosen = match
            break
    chosen = chosen or frames[-1]
    rest = stack_trace[chosen.end() :].split("\n")
    code = rest[1].strip() if len(rest) > 1 and not rest[1].lstrip().startswith("File ") else None
    return Location(path=chosen.group("path"), line=int(chosen.group("line")), source_line=code)


class ProgramContext:
    """Everything a program rule may read: graph, placement, settings, op table."""

    def __init__(self, graph: Graph, placement: Placement, table: OpTable | None = None) -> None:
        self.graph = graph
        self.placement = placement
        self.settings: PartitionerSettings = placement.settings
        self.table = table or load_optable()
        self.rule: type[Rule] | None = None  # the running rule, set by the engine
        self.memo: dict[str, Any] = {}  # per-graph caches rules may keep

    @cached_property
    def users(self) -> dict[str, list[Node]]:
        return self.graph.users()

    @cached_property
    def producers(self) -> dict[str, Node]:
        return self.graph.producers()

    @cached_property
    def input_kinds(self) -> dict[str, str]:
        return {spec.name: spec.kind for spec in self.graph.inputs}

    @cached_property
    def user_outputs(self) -> list[str]:
        return [o.name for o in self.graph.outputs if o.kind == "user_output" and o.name]

    def on_coreml(self, node: Node) -> bool:
        return self.placement.on_coreml(node)

    def coreml_nodes(self, *, include_decomposed: bool = False) -> list[Node]:
        """Delegated nodes. A node torch decomposes first is not one (its pieces are),
        so op-specific rules skip it unless they ask for it."""
        return self._delegated[1] if include_decomposed else self._delegated[0]

    @cached_property
    def _delegated(self) -> tuple[list[Node], list[Node]]:
        """(delegated nodes, the same plus decomposed ones), listed once per graph."""
        whole, every = [], []
        for node in self.graph.nodes:
            p = self.placement.nodes[node.name]
            if p.where == COREML:
                every.append(node)
                if not p.decomposed:
                    whole.append(node)
        return whole, every

    def readers_in(self, value: str, part: Any) -> list[Node]:
        """The nodes of partition ``part`` that read ``value``."""
        return [u for u in self.users.get(value, []) if self.placement.partition_of(u) is part]

    def partition_inputs(self) -> Iterator[tuple[Any, str, list[Node]]]:
        """(partition, value, its readers there) for each value a partition receives and
        some node of it reads: what coremltools sees as the delegate's inputs."""
        for part in self.placement.partitions:
            for value in part.inputs:
                readers = self.readers_in(value, part)
                if readers:
                    yield part, value, readers

    @cached_property
    def boundaries(self) -> dict[str, Any]:
        """Value -> the first partition that receives or returns it."""
        found: dict[str, Any] = {}
        for part in self.placement.partitions:
            for value in [*part.inputs, *part.outputs]:
                found.setdefault(value, part)
        return found

    @cached_property
    def module_sites(self) -> dict[tuple[str, str], set[str]]:
        """(class of the owner module, path below it) -> the classes of the modules the
        program has at that path of an owner of that class: ``("Block", "norm") ->
        {"torch.nn.modules.normalization.RMSNorm", "torch.nn.modules.normalization.LayerNorm"}``
        when one ``self.norm = norm_layer(dim)`` line built both. The owner is the nearest
        module that is not a torch container (``("Model", "mlp.1")`` for a Sequential's
        member)."""
        sites: dict[tuple[str, str], set[str]] = {}
        for node in self.graph.nodes:
            stack = node.modules()
            for end in range(2, len(stack) + 1):
                site = module_site(owner_stack(stack[:end]))
                if site is not None:
                    sites.setdefault(site, set()).add(stack[end - 1][1])
        return sites

    def coreml_users_downstream(
        self,
        values: list[str],
        *,
        follow: Callable[[Node], bool] = lambda node: True,
        depth: int = 64,
    ) -> Iterator[tuple[str, Node]]:
        """Each Core ML node that reads ``values``, or (breadth-first, ``depth`` steps) the
        outputs of a node ``follow`` lets the walk pass through, once, with the value it
        reads."""
        frontier, seen = list(values), set()
        for _ in range(depth):
            following: list[str] = []
            for value in frontier:
                for user in self.users.get(value, []):
                    if user.name in seen or not self.on_coreml(user):
                        continue
                    seen.add(user.name)
                    yield value, user
                    if follow(user):
                        following.extend(user.outputs)
            if not following:
                return
            frontier = following

    def dtype(self, value: str | None) -> str | None:
        return self.graph.dtype(value) if value else None

    def shape(self, value: str) -> tuple[int | str, ...] | None:
        info = self.graph.tensors.get(value)
        return info.shape if info else None

    def computed_from_input(self, values: list[str], limit: int | None = None) -> bool:
        """Whether any of ``values`` is a program input or is computed from one (not from
        parameters and constants alone), following producers back through the whole graph
        (at most ``limit`` values)."""
        seen, frontier = set(values), list(values)
        while frontier and (limit is None or len(seen) <= limit):
            value = frontier.pop()
            if self.input_kinds.get(value) == "user_input":
                return True
            producer = self.producers.get(value)
            for name in producer.tensor_inputs() if producer is not None else ():
                if name not in seen:
                    seen.add(name)
                    frontier.append(name)
        return False

    def integer_source(self, value: str) -> str | None:
        """The integer (or bool) dtype a float value was cast from (``lag.float()``), or
        None: its values are whole numbers, which some lowerings keep exact."""
        producer = self.producers.get(value)
        if producer is None or producer.op_base not in CASTS or not producer.tensor_inputs():
            return None
        source = self.dtype(producer.tensor_inputs()[0])
        return source if source in INTEGER_DTYPES or source == "bool" else None

    def edge_name(self, node: Node) -> str:
        return self.placement.nodes[node.name].edge_name

    def skip_advice(self, *nodes: Node) -> dict[str, Any] | None:
        """``skip_ops_for_coreml_delegation`` entries that move these nodes to the CPU.

        Only offered when it is safe: the edge spelling, lower case, for an op the portable
        runtime has a kernel for and that is not kept whole without an out variant (see
        ``coreml-lint rule CML603``). And only when the entry moves just these nodes: a
        skip entry names an op class, so advising it to dodge one node would move every
        other node of that op to the CPU as well; when the rule has a node-level answer in
        ``coreml-lint lower``, that is the advice instead. Returns None otherwise.
        """
        entries = []
        for node in nodes:
            p = self.placement.nodes[node.name]
            if p.decomposed or not self.table.has_portable_kernel(p.edge_name):
                return None
            if (
                p.kept_whole
                and p.aten_name not in self.table.core_aten
                and (p.aten_name not in self.table.with_out_variant)
            ):
                return None
            entries.append(p.edge_name.lower())
        flagged = {node.name for node in nodes}
        others = [n for e in entries for n in self._coreml_nodes_by_edge_name.get(e, ())]
        if self.rule is not None and self.rule.lowers() and set(others) - flagged:
            return None
        return self.with_skip(*entries)

    @cached_property
    def _coreml_nodes_by_edge_name(self) -> dict[str, list[str]]:
        index: dict[str, list[str]] = {}
        for name, p in self.placement.nodes.items():
            if p.where == COREML and not p.decomposed:
                index.setdefault(p.edge_name.lower(), []).append(name)
        return index

    def with_skip(self, *entries: str) -> dict[str, Any]:
        """The current skip list plus ``entries``, as partitioner advice."""
        merged = list(dict.fromkeys([*self.settings.skip_ops_for_coreml_delegation, *entries]))
        return {"skip_ops_for_coreml_delegation": merged}

    def finding(
        self,
        node: Node | None,
        message: str,
        *,
        fix: str | None = None,
        partitioner: dict[str, Any] | None = None,
        severity: Severity | None = None,
        outcome: Outcome | None = None,
        explains: tuple[str, ...] = (),
        rewrite_as_warning: bool = False,
        shows_at: Node | None = None,
        **extra: Any,
    ) -> Finding:
        assert self.rule is not None, "finding() is called from inside a rule's check()"
        return self.rule.make_finding(
            message,
            severity=severity,
            outcome=outcome,
            file=self.graph.source,
            node=node.name if node else None,
            op=self.edge_name(node) if node else None,
            location=source_location(node.stack_trace) if node else None,
            fix=fix,
            partitioner=partitioner,
            explains=explains,
            rewrite_as_warning=rewrite_as_warning,
            shows_at=source_location(shows_at.stack_trace) if shows_at else None,
            extra=extra,
        )
