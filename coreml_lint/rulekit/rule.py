"""What a rule is: one class in one module, holding everything known about one pitfall.

A rule module ``coreml_lint/rules/cmlNNN_<name>.py`` holds a ``Rule`` subclass; the module
docstring is the rule's documentation (``coreml-lint rule CODE`` prints it). The class
carries, in one place:

- **detection**: :meth:`Rule.check` on an exported program, :meth:`Rule.check_source` on
  model code;
- **examples that are its tests**: ``examples`` (source snippets that must or must not be
  flagged, with the fixed text) and :meth:`Rule.program_cases` (models and what the stock
  lowering really does with them; the oracle tests lower every one);
- **the source fix**: the finding's ``edit``, made where the finding is (``SourceContext.edit
  (node, <rewrite>, ...)`` in ``check_source`` or ``program_fix``), carrying its libcst
  rewrite: a ``@replacement`` function of the rule's module;
- **the lowering answer**: hooks ``coreml-lint lower`` calls when the rule fires: a checked
  graph rewrite, a node refusal, partitioner changes, a buffer handed back to ExecuTorch,
  and a check of the Core ML program it produced. Each does nothing by default and imports
  torch inside its body, so the linting path stays torch-free.

Whether ``lower`` answers a rule is computed from which hooks it overrides; a rule that has
no answer says why in ``cannot_lower``, and ``lower`` then stops before lowering with the
line :meth:`Rule.unanswered` gives. An answer that gives up something the user asked for
(``dequantize_on_cpu``) is applied only when the user chooses it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from coreml_lint.core.findings import Finding, Outcome, Severity, SourceFix, is_replacement
from coreml_lint.core.settings import PartitionerSettings

if TYPE_CHECKING:
    from coreml_lint.rulekit.context import ProgramContext
    from coreml_lint.rulekit.examples import ProgramCase, SourceExample
    from coreml_lint.source.context import SourceContext
    from coreml_lint.source.triggers import CalleeNames

APPLIES_TO = "executorch 1.5.x with coremltools 9.0 (torch 2.13)"
COREAI_APPLIES_TO = "coreai-torch 0.4.3 with coreai-core 1.0.0b3 (torch 2.13)"
# The backends a rule can be about: Core ML (the default) and Core AI, each with the prefix
# of its rule modules and codes (``cmlNNN_*.py`` / CML, ``caiNNN_*.py`` / CAI).
TARGETS = {"coreml": "cml", "coreai": "cai"}
# The hooks that make up a lowering answer, in the order `lower` consults them.
LOWERING_HOOKS = (
    "rewrite",
    "refuse",
    "refuse_partition",
    "bridge_partitions",
    "adjust_settings",
    "return_buffer",
    "must_decompose",
)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    # Other severities the rule reports on some findings (CML301: a small fill used only
    # inside Core ML is a warning); the README's table shows them all.
    other_severities: ClassVar[tuple[Severity, ...]] = ()
    outcome: ClassVar[Outcome]
    summary: ClassVar[str]
    applies_to: ClassVar[str] = APPLIES_TO
    # The backend whose pitfall this is (a key of ``TARGETS``): `--target` selects the rules.
    target: ClassVar[str] = "coreml"
    # Substrings a Python file must contain for check_source to have anything to find; the
    # source engine parses only files that contain one (parsing is the expensive part). A
    # trigger may also be a sharper test over the text (``source.triggers.CalleeNames``).
    source_triggers: ClassVar[tuple[str | CalleeNames, ...]] = ()
    # The README's source-rule table row: the pattern in source, its fix, and whether the
    # fix is safe (keeps what the model computes). None for program-only rules.
    source_pattern: ClassVar[str | None] = None
    source_fix: ClassVar[str | None] = None
    # Source snippets that must (``Invalid``) or must not (``Valid``) be flagged.
    examples: ClassVar[tuple[SourceExample, ...]] = ()
    # Why `coreml-lint lower` cannot answer this rule (when no lowering hook is defined).
    cannot_lower: ClassVar[str | None] = None
    # How far the outputs may move in eager after ``rewrite``: absolutely near zero and
    # relatively elsewhere (``|new - old| <= tol + tol * |new|``).
    rewrite_tolerance: ClassVar[float] = 0.0
    # A rule that reports from measured data rather than a known cause: its finding on a
    # node is dropped when another rule reports an error on the same node (one finding per
    # node, the one that explains).
    defers: ClassVar[bool] = False

    # -- reporting ------------------------------------------------------------------------
    @classmethod
    def make_finding(
        cls,
        message: str,
        *,
        severity: Severity | None = None,
        outcome: Outcome | None = None,
        **fields: Any,
    ) -> Finding:
        """A finding of this rule: code, name, default severity and outcome filled in.
        ``lower`` answers errors only (it acts on the rules with an error finding), so a
        warning claims a lowering answer only where the rule's exact rewrite answers it
        (``rewrite_as_warning``)."""
        severity = severity or cls.severity
        answered = severity is Severity.ERROR or fields.get("rewrite_as_warning", False)
        return Finding(
            code=cls.code,
            name=cls.name,
            severity=severity,
            outcome=outcome or cls.outcome,
            message=message,
            lower_fixes=cls.lowers() and answered,
            **fields,
        )

    @classmethod
    def severities(cls) -> tuple[Severity, ...]:
        """Every severity the rule's findings can have, the default first."""
        return (cls.severity, *(s for s in cls.other_severities if s is not cls.severity))

    @classmethod
    def documentation(cls) -> str:
        return sys.modules[cls.__module__].__doc__ or cls.summary

    @classmethod
    def lowering_hooks(cls) -> tuple[str, ...]:
        """The lowering hooks this rule defines (computed, never claimed)."""
        return tuple(h for h in LOWERING_HOOKS if getattr(cls, h) is not getattr(Rule, h))

    @classmethod
    def lowers(cls) -> bool:
        """Whether ``coreml-lint lower`` has an answer for this rule."""
        return bool(cls.lowering_hooks())

    @classmethod
    def program_cases(cls) -> list[ProgramCase]:
        """The models declared in this rule's module with ``@case`` (oracle-tested)."""
        from coreml_lint.rulekit.examples import cases_of

        return cases_of(cls.__module__)

    # -- detection ------------------------------------------------------------------------
    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        """Findings on an exported program (the canonical graph and its placement)."""
        return iter(())

    def check_methods(self, methods: dict[str, ProgramContext]) -> Iterator[Finding]:
        """Findings on a program of several methods lowered together (``{name: context}``,
        in the order ``to_edge_transform_and_lower`` gets them): what no single method shows,
        such as partitions that differ under positional weight sharing."""
        return iter(())

    def check_source(self, ctx: SourceContext) -> Iterator[Finding]:
        """Findings on model source code, without exporting anything."""
        return iter(())

    # -- the source fix -------------------------------------------------------------------
    @classmethod
    def fixes_source(cls) -> bool:
        """Whether the rule rewrites model source: its module (or the module of a rule it
        extends) holds a ``@replacement`` (the rewrite an edit carries, made beside the check
        that makes the finding)."""
        # the rule's module, or a rule's it inherits its checks from (CAI105 from CML105)
        names = {k.__module__ for k in cls.__mro__ if issubclass(k, Rule) and k is not Rule}
        return any(
            is_replacement(value) and value.__module__ == name
            for name in names
            for value in vars(sys.modules[name]).values()
        )

    def program_fix(self, finding: Finding, source: SourceContext) -> SourceFix | str | None:
        """The source edit that fixes a program ``finding``, placed with what the program
        knows (a dtype, a value, the module or buffer behind a node), in the model file
        ``source`` holds (``source.rule`` is this rule, so ``source.edit(...)`` works).

        Returns the ``SourceFix``; or why no fix can be placed safely (reported, nothing
        guessed); or None, when the rule has no guided fix and its own source check at
        the finding's line decides."""
        return None

    # -- the lowering answer (heavy: torch is imported inside the hooks) ------------------
    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """Rewrite the functional ``ExportedProgram`` so Core ML computes what it means, for
        the partitioner ``settings`` it will be lowered with (every lowering hook is given
        them: an answer may depend on the deployment target).

        Returns the (possibly new) program and one sentence per change, naming the node and
        what was done to the model; ``lower`` keeps it only when the rewritten program gives
        the same outputs in eager (within ``rewrite_tolerance``, absolute near zero and relative
        to a large output)."""
        return ep, []

    def check_inputs(self, inputs: Any) -> Any:
        """The inputs on which ``rewrite`` must keep the eager outputs equal (``(args,
        kwargs)``, the program's example or random inputs by default). A rewrite whose
        promise holds only where the outputs mean something says so here."""
        return inputs

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """Why this ``torch.fx`` node must stay on the CPU, or None. Asked in the ATen graph
        (so the node's op is decomposed rather than kept whole) and in the edge graph."""
        return None

    def refuse_partition(
        self, nodes: list[Any], program: Any, settings: PartitionerSettings
    ) -> str | None:
        """Why a partition the partitioner proposed (its ``torch.fx`` nodes, in the edge
        ``program``) must stay on the CPU as a whole, or None. Asked of every rule, fired
        or not: another rule's refusal can leave such a partition behind."""
        return None

    def bridge_partitions(
        self,
        program: Any,
        partition_of: Callable[[Any], int | None],
        settings: PartitionerSettings,
    ) -> list[str]:
        """Edit the edge ``program`` where values cross into a Core ML partition
        (``partition_of(node)``: the partition the partitioner will propose for it, every
        refusal included; None on the CPU), so each delegate receives what Core ML
        accepts; returns what was done, one line per value. Runs just before partitioning
        (a partitioner may not change the graph), asked of every rule, fired or not: which
        values cross is known only once every refusal is."""
        return []

    def adjust_settings(self, settings: PartitionerSettings) -> PartitionerSettings:
        """Partitioner settings that avoid the failure (e.g. no Core ML state)."""
        return settings

    def return_buffer(self, node: Any, program: Any, settings: PartitionerSettings) -> str | None:
        """Why the mutable buffer placeholder ``node`` must stay with ExecuTorch rather than
        become Core ML state, or None."""
        return None

    def must_decompose(self, node: Any, settings: PartitionerSettings) -> bool:
        """Whether the ATen ``node``'s op must be decomposed instead of kept whole for Core
        ML (it would otherwise be stranded on the CPU without a kernel)."""
        return False

    def unanswered(self, finding: Finding, *, dequantize_on_cpu: bool = False) -> str | None:
        """Why ``coreml-lint lower`` cannot answer this error finding of the rule, in one line
        that says what to do instead, or None when it can. ``lower`` stops at once, before
        lowering, when an error finding is unanswered (``dequantize_on_cpu``: the user's
        choice, which the rule's :meth:`dequantize_on_cpu` hook may answer)."""
        if self.lowers():
            return None
        return f"{finding.message} ({self.cannot_lower or 'coreml-lint lower has no answer'})"

    def dequantize_on_cpu(self, node: Any, settings: PartitionerSettings) -> str | None:
        """Why this ``torch.fx`` node runs on the CPU when the user chose to dequantize
        weights there (``lower(..., dequantize_on_cpu=True)``), or None. Asked like
        :meth:`refuse`, only when that choice is made: it gives up the quantized weights in
        Core ML."""
        return None

    @classmethod
    def readme_notes(cls) -> str | None:
        """Markdown the README prints after the rule tables (generated from the rule's own
        measured tables), or None."""
        return None

    def mil_problem(self, model: Any, original: Any) -> str | None:
        """A wrong-value signature of this rule in one Core ML model ``lower`` produced
        (``model`` is the coremltools MLModel, ``original`` the program as exported)."""
        return None
