"""What a program rule is, and the context it reads.

A rule is one module ``cmlNNN_<name>.py`` holding a ``Rule`` subclass; the module
docstring is the rule's documentation (``coreml-lint rule CODE`` prints it). A rule reads
the canonical graph and the predicted placement from :class:`ProgramContext` and yields
:class:`Finding` objects through :meth:`ProgramContext.finding`, which fills in the node,
op and source location so every rule reports the same way.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from coreml_lint.lint.findings import Finding, Location, Outcome, Severity
from coreml_lint.program.graph import Graph, Node
from coreml_lint.program.optable import OpTable, load_optable
from coreml_lint.program.placement import COREML, PartitionerSettings, Placement
from coreml_lint.source.context import SourceContext, SourceFix

APPLIES_TO = "executorch 1.5.x with coremltools 9.0 (torch 2.13)"


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    outcome: ClassVar[Outcome]
    summary: ClassVar[str]
    applies_to: ClassVar[str] = APPLIES_TO
    lower_fixes: ClassVar[bool] = False
    # Substrings a Python file must contain for check_source to have anything to find; the
    # source engine parses only files that contain one (parsing is the expensive part).
    source_triggers: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def make_finding(
        cls,
        message: str,
        *,
        severity: Severity | None = None,
        outcome: Outcome | None = None,
        **fields: Any,
    ) -> Finding:
        """A finding of this rule: code, name, default severity and outcome filled in."""
        return Finding(
            code=cls.code,
            name=cls.name,
            severity=severity or cls.severity,
            outcome=outcome or cls.outcome,
            message=message,
            lower_fixes=cls.lower_fixes,
            **fields,
        )

    @classmethod
    def documentation(cls) -> str:
        return sys.modules[cls.__module__].__doc__ or cls.summary

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        """Findings on an exported program (the canonical graph and its placement)."""
        return iter(())

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        """Findings on model source code, without exporting anything."""
        return iter(())

    def transform(self, fix: SourceFix, call: Any, edits: Any) -> Any:
        """The libcst expression replacing ``call`` for one of this rule's ``SourceFix``es.

        ``edits`` is the running codemod: ``edits.need_import(module, name=None)`` and
        ``edits.need_helper(code)`` add what the new code needs to the file."""
        raise NotImplementedError(f"{self.code} has no transform {fix.kind!r}")


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)')
# Frames inside these packages are library internals, not the user's model code.
_LIBRARY_PARTS = ("/torch/", "/executorch/", "/coremltools/", "/torchao/")


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
        self.rule: type[Rule] | None = None
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
        return self.placement.nodes[node.name].where == COREML

    def coreml_nodes(self, *, include_decomposed: bool = False) -> Iterator[Node]:
        """Delegated nodes. A node torch decomposes first is not one (its pieces are),
        so op-specific rules skip it unless they ask for it."""
        for node in self.graph.nodes:
            p = self.placement.nodes[node.name]
            if p.where == COREML and (include_decomposed or not p.decomposed):
                yield node

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

    def edge_name(self, node: Node) -> str:
        return self.placement.nodes[node.name].edge_name

    def skip_advice(self, *nodes: Node) -> dict[str, Any] | None:
        """``skip_ops_for_coreml_delegation`` entries that move these nodes to the CPU.

        Only offered when it is safe (pitfalls.md G1): the edge spelling, lower case, for
        an op the portable runtime has a kernel for and that is not kept whole without an
        out variant. Returns None when no safe entry exists.
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
        return self.with_skip(*entries)

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
            extra=extra,
        )


def read_source_line(location: Location) -> str | None:
    try:
        lines = Path(location.path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return lines[location.line - 1] if 0 < location.line <= len(lines) else None
