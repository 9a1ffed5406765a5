"""CML801 measured-op-behaviour: a delegated op whose measured lowering crashes or is wrong.

What it does
    Matches every Core ML node against the measured table ``measured/data/behaviour.json``:
    the op, the dtypes in the graph's tensor metadata with where each operand comes from
    (a partition input, made inside Core ML, a constant), every other argument (small
    integers and short lists of them exactly, other values by class: ``eps`` given or not,
    a float or an int exponent, ``approximate="tanh"``), the shape class of the first
    operand (rank, a size-1 or empty dim), the consumer when it is
    ``linear``/``addmm``/``matmul`` (or any consumer inside the partition, when that was
    measured), and the deployment target. It reports a node whose measured outcome is a
    crash (with the measured error's first line) or wrong values (with the measured
    divergence), and what the table measured *ok* nearby: a higher target, other dtypes,
    the closest other variant.
    Wrong values the oracle saw only in its float16 pass (overflow past 65504, integers
    past 2048, underflow) depend on the values the model holds: they are warnings that say
    which range fails. A crash the single-op program met only because it returned the op's
    output from the delegate (zero strides) is reported only where the node's output
    leaves its partition too; an op Core ML makes its own input var (an alias, a squeeze
    that removes no dim: the single-op program returned its input) only where the node's
    partition then returns a value it receives. A crash of a converter that takes a
    constant only when its values are all alike (a per-channel PReLU at rank 3, measured
    with a trained layer's differing values) is a warning where the program's constant
    holds one repeated value, as an untrained layer's does: it converts as it stands.
    A call not measured exactly is answered from other measurements, saying so: the other
    values of its argument's class where they all agree; the same rank with or without a
    size-1 dim; another shape class where the op's base call behaves alike at every
    shape. It is predicted (the message says "predicted") only from crashes: when every
    variant measured with the node's dtypes crashes for one reason; when the op's base
    call crashes with them and its arguments change nothing in float32; when one argument
    change measured alone crashes and the node makes that change too (``sorted=False``
    with another ``k``); when one argument value crashes where a call differing only in
    it converts; or when a mode word (``padding_mode="circular"``) crashes the op in every
    call measured with it, at several shapes, while other values convert. Each of these
    ways is held out on the table's own cells and not used in an op family where it fell
    below 95 % precision. ``check --measure`` measures the rest on this machine. Other
    unmeasured combinations are not reported. A node a hand-written rule reports is left
    to that rule.

Why it breaks
    The stock partitioner delegates by op name only, whatever the dtypes, arguments and
    target; whether coremltools converts that combination, and computes the same values as
    eager, is decided op by op in its converters. ``python -m coreml_lint.sweep`` lowers
    single-op programs over those dimensions with the stock ``CoreMLPartitioner`` and judges
    each with the ``verify`` oracle (the MIL executed on Linux against eager).

Example
    ``torch.bitwise_and(a, b)`` of int64 tensors: coremltools' ``bitwise_and`` takes bools
    only (measured crash); ``F.rms_norm(x, [d], eps=0.5)``: the eps is added to the
    max-scaled mean square, so a large eps changes the result (measured wrong values).

Fix
    The measured workaround the finding names; or ``coreml-lint lower``, which keeps the
    node on the CPU when the portable runtime has a kernel for it. When the installed (or
    ``--target-coremltools``/``--target-executorch`` declared) versions differ from the
    table's, ``check`` says so; re-measure with ``python -m coreml_lint.sweep run``.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from coreml_lint.core.findings import Finding, Outcome, Severity
from coreml_lint.core.settings import PartitionerSettings
from coreml_lint.measured.entry import Entry
from coreml_lint.measured.key import (
    CONTEXT_OPS,
    INSIDE,
    Key,
    KeyMaker,
    const_origin,
    keyed_whole,
)
from coreml_lint.measured.outcomes import (
    ALIKE_VALUES_ONLY,
    BAD,
    BOUNDARY,
    BOUNDARY_CRASH,
    CRASH,
    EDGE_REFUSAL,
    the_nodes,
    value_dependent,
    value_range,
)
from coreml_lint.measured.table import (
    ALWAYS,
    BASE,
    CLASS,
    CONTRAST,
    EVERY,
    FACTOR,
    HERE,
    INTERFACE,
    MEASURED,
    OPERANDS,
    ORIGIN,
    RANK,
    READ_OFF,
    SHAPE,
    SIGN,
    UNIT,
    VARIANT,
    WORD,
    Answer,
    BehaviourTable,
)
from coreml_lint.measured.values import NARROW_INDEX, WIDE_SRC, describe_variant, factors
from coreml_lint.measured.versions import active_table, version_note
from coreml_lint.program.constants import CONSTANT_KINDS
from coreml_lint.program.graph import Node
from coreml_lint.program.optable import load_optable
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import F, case, module, nn, returns, torch
from coreml_lint.rulekit.numbers import integers_as_floats, past_int32
from coreml_lint.rulekit.rule import Rule

CRASHES = (CRASH, BOUNDARY_CRASH)


class MeasuredOpBehaviour(Rule):
    code = "CML801"
    name = "measured-op-behaviour"
    outcome = Outcome.CRASH
    other_severities = (Severity.WARNING,)  # a value-dependent outcome: see the docstring
    summary = "a delegated op whose measured lowering (the sweep's table) crashes or is wrong"
    defers = True

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        table = active_table()
        if table is None:
            return
        maker = KeyMaker(ctx.graph, ctx.placement)
        target = ctx.settings.minimum_deployment_target
        note = version_note(table)
        whole = set(map(id, ctx.coreml_nodes()))
        for node in ctx.coreml_nodes(include_decomposed=True):
            decomposed = id(node) not in whole and not keyed_whole(node.target)
            if decomposed and node.target not in table.measured_decomposed:
                continue  # decomposed into pieces the table keys apart (a rename is kept)
            found = measured(table, maker, node, ctx, target)
            if found is None:
                continue
            key, answer = found
            entry = answer.entry
            ranged = value_dependent(entry)
            returned = _boundary_source(node, ctx) if entry.outcome == BOUNDARY else None
            # lower keeps on the CPU only a node returning a program input (``refuse``), and
            # never one ExecuTorch's edge verifier refuses whatever runs it
            cpu_answers = entry.outcome != BOUNDARY or _returns_a_user_input(node, ctx)
            cpu_answers = cpu_answers and not edge_refused(entry)
            where = ctx.placement.nodes[node.name]
            kept_whole = where.kept_whole and where.aten_name not in ctx.table.core_aten
            # an op kept whole is decomposed by ``lower``, which changes nothing of a
            # partition returning its input (``must_decompose`` reads crashes and values)
            cpu_answers = cpu_answers and not (kept_whole and entry.outcome == BOUNDARY)
            message = _message(key, answer, target, table, note, returned)
            alike = _alike_constants(node, ctx, entry)
            if alike:  # converts as it stands: a warning of what training will bring
                message = _once_trained(message, alike)
            # values the model may never hold: ``lower`` leaves the node where it is
            how = _HOW_LOWER_ANSWERS["kept whole" if kept_whole else "whole"]
            how = _HOW_LOWER_ANSWERS["never"] if ranged else how
            fix = _fix(table, entry, target, key, cpu_answers, answer, how)
            if alike:
                fix = f"nothing as the program stands; once trained: {fix}"
            finding = ctx.finding(
                node,
                message,
                fix=fix,
                severity=Severity.WARNING if ranged or alike else None,
                outcome=Outcome.CRASH if entry.outcome in CRASHES else Outcome.SILENT,
                partitioner=ctx.skip_advice(node),
                measured=entry.outcome,
                basis=answer.basis,
                predicted_from_base_call=answer.predicted,
                measured_with=table.measured_with,
            )
            finding.lower_fixes = finding.lower_fixes and entry.outcome != BOUNDARY_CRASH
            finding.lower_fixes = finding.lower_fixes and cpu_answers
            if not cpu_answers:
                finding.extra["cpu_answers"] = False
            yield finding

    def unanswered(self, finding: Finding, *, dequantize_on_cpu: bool = False) -> str | None:
        """A zero-stride output leaving the delegate (an expand, a meshgrid returned as it
        is) crashes ExecuTorch's emitter wherever the op runs: keeping the node on the CPU
        answers nothing, the model must consume or copy the output first."""
        if finding.extra.get("measured") == BOUNDARY_CRASH:
            return (
                f"{finding.message} (coreml-lint lower has no answer: use the output inside "
                "the model, or return `.contiguous()` of it)"
            )
        if finding.extra.get("measured") == CRASH and EDGE_REFUSAL in finding.message:
            return f"{finding.message} (coreml-lint lower has no answer: {EDGE_FIX})"
        if finding.extra.get("cpu_answers") is False:  # see ``_returns_a_user_input``
            return (
                f"{finding.message} (coreml-lint lower has no answer: return the op's input "
                "itself, the op changes nothing here)"
            )
        return super().unanswered(finding, dequantize_on_cpu=dequantize_on_cpu)

    def rewrite(self, ep: Any, settings: PartitionerSettings) -> tuple[Any, list[str]]:
        """An integer past int32 beside a float tensor (``x * (-2**32 + 1)``, measured wrapping
        to 1) is written as the float torch computes with: the values stay, and Core ML
        holds a float. Other measured outcomes are answered by :meth:`refuse`."""
        from coreml_lint.rulekit.fx import finish

        done = integers_as_floats(ep, past_int32)
        return (finish(ep) if done else ep), done

    def refuse(self, node: Any, settings: PartitionerSettings) -> str | None:
        """A core ATen node whose measured outcome at the target is a crash or wrong values
        (or, returning a program input it reads, the op made its input var) stays on the
        CPU, when the portable runtime has a kernel for it (a view's is its copy's)."""
        if getattr(node, "op", "") != "call_function":
            return None
        name = fx_name(node.target)
        table = load_optable()
        if name.partition(".")[2] not in table.core_aten:
            return None  # decomposed instead (``must_decompose``)
        if not (table.has_portable_kernel(name) or table.has_portable_kernel(_copy_name(name))):
            return None
        target = settings.minimum_deployment_target
        entry = _bad_entry(node, target, boundary=_returns_a_program_input(node))
        return None if entry is None else f"{entry.outcome} at iOS{target} by the op table"

    def must_decompose(self, node: Any, settings: PartitionerSettings) -> bool:
        """A node of an op torch would decompose (not core ATen), kept whole for Core ML,
        whose measured outcome is bad: its pieces are delegated instead."""
        if getattr(node, "op", "") != "call_function":
            return False
        name = fx_name(node.target)
        if not name.startswith("aten.") or name.partition(".")[2] in load_optable().core_aten:
            return False
        return _bad_entry(node, settings.minimum_deployment_target) is not None


def _alike_constants(node: Node, ctx: ProgramContext, entry: Entry) -> dict[str, float]:
    """Target -> value of the node's constant operands, where the measured crash is a
    converter's that takes a constant only when its values are all alike
    (``ALIKE_VALUES_ONLY``) and this program's are (``program/constants.py`` read them):
    then the node converts as it stands. Empty otherwise."""
    if entry.outcome not in CRASHES or not any(t in entry.message for t in ALIKE_VALUES_ONLY):
        return {}
    uniform = ctx.graph.meta.get("uniform_floats") or {}
    constant = {s.name: s for s in ctx.graph.inputs if s.kind in CONSTANT_KINDS}
    specs = [constant[r] for r in node.tensor_inputs() if r in constant]
    if not specs or any(s.target not in uniform for s in specs):
        return {}
    return {s.target: uniform[s.target] for s in specs}


def _once_trained(message: str, alike: dict[str, float]) -> str:
    held = ", ".join(f"`{name}` holds {value:g} throughout" for name, value in alike.items())
    return (
        f"{message}; but here {held}, as an untrained layer's does, so this program "
        "converts as it stands: the crash comes once training makes the values differ"
    )


def _bad_entry(node: Any, target: int, boundary: bool = False) -> Entry | None:
    """The node's measured crash or wrong values (``boundary``: or its becoming its input
    var, where that makes the program return its input) at the target, if any."""
    table = active_table()
    if table is None:
        return None
    bad = BAD | {BOUNDARY} if boundary else BAD
    for key, context in fx_keys(node):
        answer = table.answer(key, target, context)
        if answer is None or value_dependent(answer.entry):
            continue  # values the model may never hold: not worth a CPU fallback
        # the hook sees no placement: a dtype handed back counts where the program returns
        # the node (one read by an op left on the CPU is the lint's finding alone)
        if not the_nodes(answer.entry, leaves=any(u.op == "output" for u in node.users)):
            continue
        if answer.entry.outcome in bad:  # a boundary crash is no op's: see ``unanswered``
            return answer.entry
    return None


def _returns_a_program_input(node: Any) -> bool:
    """A ``torch.fx`` node the program returns whose first operand is a program input:
    where it is delegated alone, its partition returns what it receives."""
    operands = list(node.all_input_nodes)
    returned = any(user.op == "output" for user in node.users)
    if not operands or not returned or operands[0].op != "placeholder":
        return False
    return not operands[0].name.startswith(_CONST_PREFIXES)


def measured(
    table: BehaviourTable, maker: KeyMaker, node: Node, ctx: ProgramContext, target: int
) -> tuple[Key, Answer] | None:
    """The node's key and its bad answer (alone, or feeding a context op): measured, or
    predicted (``Answer.basis`` says how). A crash the sweep saw only because its program
    returned the op's output straight from the delegate counts only when this node's
    output leaves its partition too, and so does a wrong dtype handed back."""
    key = maker.key(node)
    part = ctx.placement.partition_of(node)
    # measured consumed in the partition, as this node is: that answer, not the returned one
    # (a prediction there does not outweigh a measurement of the returned call)
    consumed = None if _leaves(node, part, ctx) else table.answer(key, target, INSIDE)
    inside = consumed is not None and consumed.basis in READ_OFF
    contexts = [INSIDE if inside else ""]
    contexts += [
        user.target
        for out in node.outputs
        for user in ctx.users.get(out, [])
        if user.target in CONTEXT_OPS and ctx.placement.partition_of(user) is part
    ]
    for context in dict.fromkeys(contexts):
        answer = table.answer(key, target, context)
        if answer is None:
            continue
        if not the_nodes(answer.entry, leaves=_leaves(node, part, ctx)):
            continue  # the sweep partition's lack of inputs (CML602's), or a dtype kept inside
        if answer.entry.outcome in BAD:
            return key, answer
        if answer.entry.outcome == BOUNDARY_CRASH and _leaves(node, part, ctx):
            return key, answer
        if answer.entry.outcome == BOUNDARY and _boundary_source(node, ctx) is not None:
            return key, answer
    return None


def _boundary_source(node: Node, ctx: ProgramContext) -> str | None:
    """Where the input of a node Core ML makes its input var is, when its partition returns
    the node's output: ``input`` (the partition receives it, or holds it as state: the
    partition returns what it receives) or ``output`` (the partition returns it too: two
    outputs of one name); None where the output is that op's own var."""
    inputs = node.tensor_inputs()
    part = ctx.placement.partition_of(node)
    if part is None or not inputs or not _leaves(node, part, ctx):
        return None
    if inputs[0] in part.inputs or inputs[0] in part.states:
        return "input"
    return "output" if inputs[0] in part.outputs else None


def _returns_a_user_input(node: Node, ctx: ProgramContext) -> bool:
    """The program returns the node's output and its input is a program input: the case
    ``lower`` answers (``refuse`` asks the same of the ``torch.fx`` node)."""
    inputs = node.tensor_inputs()
    kinds = {spec.name: spec.kind for spec in ctx.graph.inputs}
    returned = any(out in ctx.user_outputs for out in node.outputs)
    return returned and bool(inputs) and kinds.get(inputs[0]) == "user_input"


def _leaves(node: Node, part: Any, ctx: ProgramContext) -> bool:
    """Whether an output of the node is returned by its partition (read on the CPU or
    returned by the program)."""
    outputs = set(part.outputs) if part is not None else set()
    return any(out in outputs or out in ctx.user_outputs for out in node.outputs)


BASIS_WORDS = {
    MEASURED: "measured",
    SHAPE: "measured at shape class {shape} (the op behaves alike at every shape measured "
    "at this target)",
    UNIT: "measured at shape class {shape} (the same rank with or without a size-1 dim, "
    "which answered alike in this op family on the table's held-out cells)",
    BASE: "predicted (these arguments were not measured; the op crashes alike with every "
    "argument that was)",
    EVERY: "predicted (these arguments were not measured; every variant measured with "
    "these operands crashes alike)",
    HERE: "measured on this machine (`--measure`, cached per stack version)",
    CLASS: "measured with {variant} (every value of these kinds measured behaves alike)",
    FACTOR: "predicted (this combination of arguments was not measured; with {variant} "
    "the op crashes, and the node has the same {changed})",
    WORD: "predicted (this combination of arguments was not measured; {cause} crashes the "
    "op alike in every call measured with it, at several shapes, where other values convert, "
    "and the node has {cause})",
    SIGN: "predicted (this call was not measured; a negative value of its argument crashes "
    "the op alike in every call measured with one, at several shapes, where non-negative "
    "values convert, and the node has {cause})",
    CONTRAST: "predicted (this combination of arguments was not measured; {cause} crashes "
    "where a measured call differing only in it converts, and the node has {cause})",
    ORIGIN: "predicted (these operands were not measured where they come from; every "
    "measured origin of operands of these dtypes crashes alike)",
    OPERANDS: "predicted (this combination of arguments was not measured with these operands; "
    "the base call crashes with them, where it converts with the same dtypes from elsewhere)",
    VARIANT: "predicted (this call was not measured with these operands; it crashes alike "
    "with the same dtypes from elsewhere, where the base call converts with these)",
    ALWAYS: "predicted (this call was not measured; every call of the op measured at this "
    "target crashes alike, with several operand dtypes and at several shapes)",
    INTERFACE: "predicted (this combination of arguments was not measured; every call "
    "measured with these operands and {cause} returns the same wrong dtype)",
    RANK: "predicted (this call was not measured; every call of the op measured at shape "
    "class {shape} crashes alike, where the same calls convert at other shapes)",
}


def _message(
    key: Key,
    answer: Answer,
    target: int,
    table: BehaviourTable,
    note: str | None,
    returned: str | None = None,
) -> str:
    entry = answer.entry
    names = table.arg_names.get(key.op)
    feeding = f" feeding {entry.context}" if entry.context else ""
    base = factors(table.bases.get(key.op, ""))
    changed = ";".join(f"{f}={v}" for f, v in factors(entry.variant).items() if base.get(f) != v)
    how = BASIS_WORDS[answer.basis].format(
        shape=entry.shape,
        variant=describe_variant(entry.variant, names) or "no other arguments",
        changed=describe_variant(changed, names),
        cause=describe_variant(answer.cause, names),
    )
    if entry.outcome == BOUNDARY_CRASH:
        what = "lowering crashes when the op's output leaves the delegate, as it does here"
    elif entry.outcome == BOUNDARY and returned == "output":
        what = (
            "Core ML makes the op its input var itself, which the partition also returns: "
            "the Core ML model has two outputs of one name"
        )
    elif entry.outcome == BOUNDARY:
        what = (
            "Core ML makes the op its input var itself, so the partition returns the input "
            "it receives and the output does not hold what the program means"
        )
    elif entry.outcome == CRASH:
        what = "lowering crashes"
    elif value_dependent(entry):
        what = f"Core ML computes other values where {value_range(entry, names)}"
    else:
        what = "Core ML computes other values"
    text = (
        f"{key.describe(names)}{feeding} at iOS{target}: {how}, "
        f"{what}: `{entry.message}` ({entry.cases} sweep case(s) on {table.versions})"
    )
    if value_dependent(entry):
        text += (
            "; a model whose values never meet that condition is unaffected (`coreml-lint verify` "
            "checks the partition on the program's example inputs)"
        )
    return f"{text}; {note}" if note else text


def _along_dim_fix(key: Key | None) -> str | None:
    """How a gather or scatter keyed by its shapes (``values.along_dim_texts``) gets shapes
    coremltools takes, with torch's values: torch reads a gather's input and a scatter's
    ``src`` only at the corner the index spans."""
    made = set(key.variant.split(";")) if key is not None else set()
    if WIDE_SRC in made and NARROW_INDEX not in made:
        return (
            "slice `src` to the index's shape (`x.scatter(1, index, src[:, :3])` for an index "
            "3 wide): torch writes only that corner of it, and Core ML takes equal shapes"
        )
    if NARROW_INDEX in made and key is not None and key.op == "aten.gather.default":
        return (
            "slice the input to the index's size on every dim but `dim` (`torch.gather(x[..., "
            ":2], 1, index)` for an index 2 wide on the last dim): torch reads only that "
            "corner, and Core ML takes equal sizes there"
        )
    return None


EDGE_FIX = (
    "replace the op with core ATen ops, or register a decomposition for it: ExecuTorch's "
    "edge verifier refuses it whatever runs it, the CPU included"
)


def edge_refused(entry: Entry) -> bool:
    """Whether the measured crash is the edge verifier's (no CPU fallback answers it)."""
    return entry.outcome == CRASH and EDGE_REFUSAL in entry.message


# How the node leaves Core ML, and whether ``lower`` does it: a core ATen op stays on the CPU
# (``refuse``); an op torch would decompose, which the partitioner keeps whole, is decomposed
# (``must_decompose``: the CPU has no kernel for most of them whole), a piece measured bad
# kept on the CPU; a value-dependent outcome is left to the user (``_bad_entry``).
_HOW_LOWER_ANSWERS = {
    "whole": "keep the node on the CPU (`coreml-lint lower` does)",
    "kept whole": (
        "let torch decompose the op rather than keep it whole for Core ML (`coreml-lint "
        "lower` does, and keeps a piece measured bad on the CPU)"
    ),
    "never": "keep the node on the CPU where its values may reach that range",
}


def _fix(
    table: BehaviourTable,
    entry: Entry,
    target: int,
    key: Key | None = None,
    cpu_answers: bool = True,
    answer: Answer | None = None,
    cpu: str = "",
) -> str:
    """What to do about a bad measured outcome; ``cpu`` says how the node leaves Core ML
    (``_HOW_LOWER_ANSWERS``)."""
    cpu = cpu or _HOW_LOWER_ANSWERS["whole"]
    if entry.outcome == BOUNDARY_CRASH:  # the measured-meshgrid cases lower these two
        return (
            "return a value computed from the output inside the model, or `.contiguous()` "
            "of it, not the output itself"
        )
    if edge_refused(entry):
        return EDGE_FIX
    if entry.outcome == BOUNDARY:
        same = "return the op's input itself (the op changes nothing here)"
        return f"{same}, or {cpu}" if cpu_answers else same
    along = _along_dim_fix(key) if entry.outcome == CRASH else None
    if along is not None:
        return f"{along}; or {cpu}"
    if key is not None and any(v.endswith("big64") for v in factors(key.variant).values()):
        return (
            "write the number within int32's range or as a float (a padding or masking "
            "constant: `-30000.0`, which float16 holds too): Core ML holds a Python integer "
            f"as int32, and this one wraps; or {cpu}"
        )
    if answer is not None and answer.basis == SIGN:
        label = describe_variant(answer.cause, table.arg_names.get(key.op) if key else None)
        return (
            f"give {label.partition('=')[0]} no negative value (a negative pad crops: slice "
            f"the tensor instead, `x[..., 2:-2, 2:-2]` for a pad of `(-2, -2, -2, -2)`); or "
            f"{cpu}"
        )
    if answer is not None and answer.basis == WORD and key is not None:
        # the word is the cause: the other words of that argument, at the node's shape
        name = answer.cause.partition("=")[0]
        words = table.converting_values(key, name, target, entry.context)
        if not words:
            return cpu
        label = describe_variant(f"{name}=_", table.arg_names.get(key.op)).partition("=")[0]
        return (
            f"{label}={' or '.join(words)} (measured ok at this shape; another mode computes "
            f"other values: only where the model allows it); or {cpu}"
        )
    found = table.workarounds(entry, target, key)
    return ("measured ok: " + "; ".join(found) + f"; or {cpu}") if found else cpu


# -- the torch.fx side (lower's refuse hook; imports torch only through the node) ----------
_CONST_PREFIXES = ("p_", "b_", "c_", "_param_constant", "_tensor_constant", "_lifted_tensor")


def fx_keys(node: Any) -> list[tuple[Key, str]]:
    """The keys a ``torch.fx`` node may have in the table: with each plausible origin of an
    operand another node makes (inside Core ML, or a partition input), alone and feeding
    each context op among its users."""
    from coreml_lint.measured.key import variant_of
    from coreml_lint.measured.values import shape_class
    from coreml_lint.program.graph import DType, Opaque, SymRef, TensorRef

    if node.op != "call_function":
        return []
    name = fx_name(node.target)

    def light(value: Any) -> Any:
        if hasattr(value, "op") and hasattr(value, "meta"):
            symbolic = type(value.meta.get("val")).__name__ in ("SymInt", "SymFloat", "SymBool")
            return SymRef(value.name) if symbolic else TensorRef(value.name)
        if isinstance(value, (list, tuple)):
            return [light(v) for v in value]
        if type(value).__name__ == "dtype":
            return DType(str(value).replace("torch.", ""))
        if type(value).__name__ in ("device", "layout", "memory_format"):
            return Opaque(f"as_{type(value).__name__}")  # the export schema's kind
        return value

    kwargs = {k: light(v) for k, v in node.kwargs.items() if k != "dim_order"}
    shell = Node(node.name, name, [light(a) for a in node.args], kwargs, [node.name])
    # every tensor operand in argument order, a repeated one repeated (``x.scatter(1, i,
    # x)``), as the light graph keys it; ``all_input_nodes`` lists each node once
    by_name = {n.name: n for n in node.all_input_nodes}
    operands = [by_name[ref] for ref in shell.tensor_inputs()]
    dims = _dims(operands[0].meta.get("val") if operands else node.meta.get("val"))
    shape = shape_class(dims)
    shapes = [_dims(o.meta.get("val")) for o in operands]
    keys = []
    # a view op at the edge is its copy, which the sweep measured under either name
    names = [name, _copy_name(name)] if _is_copy(node.target) else [name]
    for made_inside in ("op", "in"):
        parts = [f"{_dtype(o)}:{_origin(o, made_inside)}" for o in operands]
        for op in names:
            variant = variant_of(replace(shell, target=op), dims, shapes)
            key = Key(op, ",".join(parts), variant, shape)
            keys.append((key, ""))
            for user in node.users:
                if user.op == "call_function" and fx_name(user.target) in CONTEXT_OPS:
                    keys.append((key, fx_name(user.target)))
    return keys


def _dims(value: Any) -> tuple[Any, ...] | None:
    """A fake tensor's shape as the light graph spells it (a symbol as its text)."""
    if value is None:
        return None
    return tuple(d if isinstance(d, int) else str(d) for d in getattr(value, "shape", ()) or ())


def _is_copy(target: Any) -> bool:
    """Whether a ``torch.fx`` target is an ATen view's copy (``aten.alias_copy``)."""
    schema = getattr(getattr(target, "_op", target), "_schema", None)
    return schema is not None and _is_view_copy(*schema.name.partition("::")[::2])


# ExecuTorch's edge ops that stand for an ATen op the linter's graph names.
_EDGE_TO_ATEN = {
    "dim_order_ops._to_dim_order_copy.default": "aten._to_copy.default",
    "dim_order_ops._clone_dim_order.default": "aten.clone.default",
}


def fx_name(target: Any) -> str:
    """``aten.amax.default`` for an ATen or an edge op (a view copy as its view)."""
    op = getattr(target, "_op", target)
    schema = getattr(op, "_schema", None)
    if schema is None:
        return str(target)
    namespace, _, base = schema.name.partition("::")
    name = f"{namespace}.{base}.{schema.overload_name or 'default'}"
    if name in _EDGE_TO_ATEN:
        return _EDGE_TO_ATEN[name]
    if _is_view_copy(namespace, base):
        return f"aten.{base[: -len('_copy')]}.{schema.overload_name or 'default'}"
    return name


def _is_view_copy(namespace: str, base: str) -> bool:
    """An ATen view's copy (``alias_copy``, ``squeeze_copy``; not ``_to_copy``)."""
    return namespace == "aten" and base.endswith("_copy") and base != "_to_copy"


def _copy_name(name: str) -> str:
    """A view op's edge name (``aten.squeeze.dims`` -> ``aten.squeeze_copy.dims``): the
    portable runtime's kernel for the view is its copy. A name of no ATen op (a getitem, a
    delegate call) is returned as it is."""
    parts = name.split(".", 2)
    if len(parts) != 3 or parts[0] != "aten":
        return name
    namespace, base, overload = parts
    return f"{namespace}.{base}_copy.{overload}"


def _dtype(node: Any) -> str:
    value = node.meta.get("val")
    return str(getattr(value, "dtype", None)).replace("torch.", "")


def _origin(node: Any, made_inside: str) -> str:
    constant = node.op == "placeholder" and node.name.startswith(_CONST_PREFIXES)
    if node.op == "get_attr" or constant:
        shape = getattr(node.meta.get("val"), "shape", None)
        return const_origin(None if shape is None else tuple(shape))
    if node.op == "placeholder" or _dtype(node) == "float32":
        return "in"  # a float32 value made inside is keyed as an input (KeyMaker.origin)
    return made_inside


# -- program cases: what the stock CoreMLPartitioner really does (the oracle lowers each) --
# Models no hand-written rule names, built around outcomes the sweep measured.
@case(
    "measured-rms-norm-large-eps",
    expect={"CML801"},
    silent=returns(r"mean_squared\w*, y=0\.5"),  # eps added to the max-scaled mean
)
def _():
    return module(lambda s, x: F.rms_norm(x, [8], eps=0.5)), (torch.randn(2, 8),)


# torch's gather reads, and its scatter writes, only the corner of the input or ``src`` the
# index spans; coremltools wants the shapes equal (keyed ``index=narrower``, ``src=wider``).
def _keypoints(sliced: bool) -> Any:
    """The x and y of 4 chosen keypoints out of (x, y, score): an index 2 wide, input 3."""
    index = torch.tensor([[0, 3, 5, 9], [1, 2, 7, 8]])[:, :, None].expand(2, 4, 2)

    def pick(s, points):
        source = points[..., :2] if sliced else points
        return torch.gather(source, 1, s.index) * 2.0

    return module(pick, index=index.contiguous()), (torch.randn(2, 10, 3),)


@case("measured-gather-narrower-index", expect={"CML801"}, crash=r"same size at axis")
def _():
    return _keypoints(sliced=False)


@case("measured-gather-of-a-sliced-input", expect=set())
def _():
    return _keypoints(sliced=True)


def _route(sliced: bool) -> Any:
    """Scores scattered into 3 of 6 slots per row from a (3, 6) ``src``: wider than the
    index, whose (3, 3) corner torch writes."""

    def scatter(s, scores):
        src = scores[:, :3] if sliced else scores
        return torch.zeros(3, 6).scatter(1, s.slots, src * 2.0)

    slots = torch.tensor([[4, 0, 2], [1, 3, 5], [5, 2, 0]])
    return module(scatter, slots=slots), (torch.randn(3, 6),)


@case("measured-scatter-wider-src", expect={"CML801"}, crash=r"AssertionError")
def _():
    return _route(sliced=False)


@case("measured-scatter-of-a-sliced-src", expect=set())
def _():
    return _route(sliced=True)


# A Python integer past int32 (DIN's padding ``ones_like(s) * (-2**32 + 1)``) wraps to 1 as
# the int32 Core ML holds it in: the product by 1 is optimized away.
@case(
    "measured-mul-by-an-integer-past-int32",
    expect={"CML801"},
    silent=lambda lowered: lowered.ok and "mul(" not in lowered.mil,
)
def _():
    return module(lambda s, x: x * (-(2**32) + 1)), (torch.randn(2, 3),)


@case("measured-mul-by-an-integer-int32-holds", expect=set())
def _():
    return module(lambda s, x: x * -(10**9)), (torch.randn(2, 3),)


# A U-Net's skip connection cropped to the upsampled map with a negative pad of every
# spatial side: measured crashing at ranks 2 and 3, predicted at rank 4 (SIGN); the slice
# the advice names lowers.
def _crop(sliced: bool) -> Any:
    def join(s, skip, up):
        cropped = skip[..., 2:-2, 2:-2] if sliced else F.pad(skip, (-2, -2, -2, -2))
        return torch.cat([cropped, up], dim=1)

    return module(join), (torch.randn(1, 4, 12, 12), torch.randn(1, 4, 8, 8))


@case("measured-negative-pad-crop", expect={"CML801"}, crash=r"pad must be non-negative integer")
def _():
    return _crop(sliced=False)


@case("measured-crop-by-slicing", expect=set())
def _():
    return _crop(sliced=True)


# A per-channel PReLU after a 1-d convolution (rank 3): coremltools takes its alpha only
# when the values are all alike. A trained layer's differ and lowering crashes; an untrained
# one (0.25 everywhere) converts, and the finding is a warning of what training brings.
def _prelu(trained: bool) -> Any:
    layers = torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3), torch.nn.PReLU(4))
    if trained:
        with torch.no_grad():
            layers[1].weight.copy_(torch.tensor([0.1, 0.2, 0.3, 0.4]))
    return layers, (torch.randn(1, 4, 8),)


@case(
    "measured-prelu-per-channel-trained",
    expect={"CML801"},
    crash=r"only supported when all the values of alpha are same",
)
def _():
    return _prelu(trained=True)


@case("measured-prelu-per-channel-untrained", expect=set(), warnings={"CML801"})
def _():
    return _prelu(trained=False)


@case("measured-rms-norm-small-eps", expect=set())
def _():
    return module(lambda s, x: F.rms_norm(x, [8], eps=1e-6)), (torch.randn(2, 8),)


@case(
    "measured-any-of-floats",
    expect={"CML801"},
    silent=returns(r'cast\(x=%args_0, dtype="int32"'),  # the float input truncated to int
)
def _():
    return module(lambda s, x: x.any(dim=1).float()), (torch.randn(3, 4) * 0.5,)


@case("measured-any-of-a-comparison", expect=set())
def _():
    return module(lambda s, x: (x != 0).any(dim=1).float()), (torch.randn(3, 4) * 0.5,)


@case(
    "measured-bitwise-and-of-ints",
    expect={"CML801"},
    crash=r"bitwise_and` op only supports boolean input",
)
def _():
    return module(lambda s, a, b: torch.bitwise_and(a, b) + 1), (
        torch.randint(0, 4, (4, 4)),
        torch.randint(0, 4, (4, 4)),
    )


@case("measured-bitwise-and-of-bools", expect=set())
def _():
    return module(lambda s, a, b: torch.bitwise_and(a > 1, b > 1).float()), (
        torch.randint(0, 4, (4, 4)),
        torch.randint(0, 4, (4, 4)),
    )


@case(
    "measured-and-operator-on-ids",  # `&` is `__and__` in the program, `bitwise_and` at the edge
    expect={"CML801"},
    crash=r"bitwise_and` op only supports boolean input",
)
def _():
    return module(lambda s, ids: (ids & 1).float() * 2), (torch.randint(0, 100, (2, 7)),)


@case("measured-parity-in-float", expect=set())
def _():
    return module(lambda s, ids: (ids.float() % 2) * 2), (torch.randint(0, 100, (2, 7)),)


# The keys users write: arguments changed together, a batch of one, outputs left unread.
@case(
    "measured-pixel-unshuffle-ios15",  # measured on (4,4,4,4) with factor 1 and 2
    expect={"CML801"},
    crash=r"No available version for pixel_unshuffle in the coremltools.target.iOS15",
)
def _():
    return module(lambda s, x: F.pixel_unshuffle(x, 2) * 2.0), (torch.rand(1, 3, 16, 16),)


@case("measured-pixel-unshuffle-ios16", expect=set(), settings={"ios": 16})
def _():
    return module(lambda s, x: F.pixel_unshuffle(x, 2) * 2.0), (torch.rand(1, 3, 16, 16),)


@case(
    "measured-topk-unsorted",  # sorted=False measured with k=1; here k=4, indices unread
    expect={"CML801"},
    crash=r"only sorted=True supported for the topk",
)
def _():
    return module(lambda s, x: torch.topk(x * 2.0, 4, dim=-1, sorted=False)[0].sum(-1)), (
        torch.rand(2, 16),
    )


@case("measured-topk-sorted", expect=set())
def _():
    return module(lambda s, x: torch.topk(x * 2.0, 4, dim=-1)[0].sum(-1)), (torch.rand(2, 16),)


# A model's PReLU: its alphas a constant, its input a batch of one (the sweep's model axis).
@case(
    "measured-prelu-per-channel",
    expect={"CML801"},
    crash=r"rank 3 or rank 5 input is only supported when all the values of alpha are same",
)
def _():
    return module(lambda s, x: F.prelu(x, s.alpha) * 2.0, alpha=torch.rand(4)), (
        torch.randn(1, 4, 8),
    )


@case("measured-prelu-one-alpha", expect=set())  # one alpha: keyed apart, and it lowers
def _():
    return module(lambda s, x: F.prelu(x, s.alpha) * 2.0, alpha=torch.tensor([0.25])), (
        torch.randn(1, 4, 8),
    )


# A convolution's circular padding: a pad of [1, 1, 1, 1] on a 4-d input, never measured;
# every circular pad measured (ranks 2-4) crashes, every other mode converts somewhere.
@case(
    "measured-circular-padding",
    expect={"CML801"},
    crash=r"Pad mode should be one of",
)
def _():
    torch.manual_seed(0)
    return torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), (torch.randn(2, 3, 8, 8),)


@case("measured-replicate-padding", expect=set())
def _():
    torch.manual_seed(0)
    return torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"), (torch.randn(2, 3, 8, 8),)


# A transposed convolution whose output_padding differs per dim, legal only beside its
# stride: the sweep measures lists whose dims differ beside each other argument.
@case(
    "measured-transposed-conv-output-padding-per-dim",
    expect={"CML801"},
    crash=r"'NoneType' object is not iterable",
)
def _():
    torch.manual_seed(0)
    return torch.nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=(1, 0)), (
        torch.randn(2, 3, 8, 8),
    )


@case("measured-transposed-conv-stride-2", expect=set())
def _():
    torch.manual_seed(0)
    return torch.nn.ConvTranspose2d(3, 4, 3, stride=2), (torch.randn(2, 3, 8, 8),)


# A crash seen only at the single-op program's boundary: meshgrid's expanded outputs have
# zero strides, which ExecuTorch refuses for a delegate's output, not inside the delegate.
@case("measured-meshgrid-returned", expect={"CML801"}, crash=r"0 in strides is not supported")
def _():
    return module(lambda s, a, b: torch.meshgrid(a * 2.0, b * 2.0, indexing="ij")), (
        torch.rand(4),
        torch.rand(5),
    )


@case("measured-meshgrid-returned-contiguous", expect=set())  # what `unanswered` advises
def _():
    def grid(s, a, b):
        ys, xs = torch.meshgrid(a * 2.0, b * 2.0, indexing="ij")
        return ys.contiguous(), xs.contiguous()

    return module(grid), (torch.rand(4), torch.rand(5))


@case("measured-meshgrid-consumed", expect=set())
def _():
    def anchors(s, a, b):
        ys, xs = torch.meshgrid(a * 2.0, b * 2.0, indexing="ij")
        return torch.stack([xs, ys], dim=-1) + 0.5

    return module(anchors), (torch.rand(4), torch.rand(5))


# Wrong values measured only where float16 overflows (``10000 ** t`` at the sweep's values):
# a sine position embedding's exponents stay in range, so a warning, not an error.
@case("measured-pow-scalar-sine-embedding", expect=set(), warnings={"CML801"})
def _():
    def embed(s, x):
        dim_t = torch.arange(16, dtype=torch.float32).reshape(1, 16)
        dim_t = 10000 ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / 16)
        pos = x[:, :, None] / dim_t[0]
        return torch.cat([pos[:, :, 0::2].sin(), pos[:, :, 1::2].cos()], dim=2)

    return module(embed), (torch.rand(2, 8),)


# An op Core ML makes its input var: a squeeze of a dim that is not size 1 changes nothing,
# so the partition of a returned squeeze of an input returns the input it receives.
@case(
    "measured-squeeze-without-effect",
    expect={"CML801"},
    silent=lambda lowered: any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: x.squeeze(0)), (torch.randn(3, 4),)


@case(
    "measured-transpose-of-one-dim",  # torch makes it an alias, Core ML the input var
    expect={"CML801"},
    silent=lambda lowered: any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: x.transpose(1, 1)), (torch.randn(3, 4),)


@case(
    "measured-squeeze-of-a-size-1-dim",
    expect=set(),
    clean=lambda lowered: not any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: x.squeeze(0)), (torch.randn(1, 4),)


@case(
    "measured-squeeze-without-effect-made-inside",  # returns the mul's var
    expect=set(),
    clean=lambda lowered: not any(d.returns_an_input for d in lowered.delegates),
)
def _():
    return module(lambda s, x: (x * 2.0).squeeze(0)), (torch.randn(3, 4),)


@case(
    "measured-squeeze-without-effect-of-a-returned-value",  # two outputs of one name
    expect={"CML801"},
    silent=lambda lowered: any(d.duplicate_outputs for d in lowered.delegates),
)
def _():
    def forward(s, x):
        y = x * 2.0
        return y, y.squeeze(0)

    return module(forward), (torch.randn(3, 4),)


@case("measured-new-ones-beside-its-input", expect=set())
def _():
    # The sweep's new_ones alone made a partition with no inputs (CML602's crash, below
    # iOS18): here the mul reads x, and the partition has it.
    return module(lambda s, x: x * x.new_ones(8)), (torch.randn(2, 8),)


@case("measured-factory-of-a-model", expect=set())
def _():
    # export writes device= and pin_memory= into a model's factory calls: keyed as the
    # sweep's calls, measured, converting
    return module(lambda s, x: x + torch.zeros(2, 8, device=x.device)), (torch.randn(2, 8),)


@case("measured-fold-overlap-add", expect={"CML801"}, crash=r"stride >= kernel_size for col2im")
def _():
    # Overlapping patches added back (kernel 8, stride 4): a call the sweep never made,
    # answered by every overlapping call it made (``window=overlap``).
    return module(lambda s, x: F.fold(x, (24, 24), kernel_size=8, stride=4)), (
        torch.randn(1, 64, 25),
    )


@case("measured-fold-tiles", expect=set())
def _():
    return module(lambda s, x: F.fold(x, (24, 24), kernel_size=4, stride=4)), (
        torch.randn(1, 16, 36),
    )


@case(
    "measured-repeat-by-durations",
    expect={"CML801"},
    crash=r"repeat_interleave\.Tensor is not in Core ATen",
)
def _():
    # A length regulator (text to speech): each frame repeated by its duration. to_edge
    # decomposes the call into repeat_interleave.Tensor, which the edge verifier refuses;
    # measured as users write it (the op itself, never a delegated node).
    durations = torch.tensor([2, 1, 3, 1, 2])
    return module(
        lambda s, h: torch.repeat_interleave(h, s.durations, dim=0, output_size=9),
        durations=durations,
    ), (torch.randn(5, 6),)


@case("measured-repeat-by-a-number", expect=set())
def _():
    # The same op by a number (grouped-query attention's key heads): converts.
    return module(lambda s, k: k.repeat_interleave(2, dim=1)), (torch.randn(1, 2, 8, 4),)


@case("measured-where-as-indices", expect={"CML801"}, crash=r"data-dependent expression")
def _():
    # torch.where with the condition alone: export adds the size nodes of its data-dependent
    # output beside it, and the sweep's cases of it are keyed without them.
    return module(lambda s, x: torch.where(x > 0)), (torch.randn(4, 4),)


@case(
    "measured-antialiased-downscale",
    expect={"CML801"},
    silent=lambda lowered: "upsample_bilinear(" in lowered.mil,
)
def _():
    # antialias=True halving the size: coremltools lowers a plain bilinear resize (keyed
    # ``size=down``); lower decomposes the .vec call and keeps its .default on the CPU
    return module(
        lambda s, x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True)
    ), (torch.randn(1, 3, 32, 40),)


@case("measured-antialiased-upscale", expect=set())
def _():
    # growing, antialiasing changes nothing: not keyed as the shrinking calls
    return module(
        lambda s, x: F.interpolate(x, scale_factor=2.0, mode="bilinear", antialias=True)
    ), (torch.randn(1, 3, 8, 8),)


@case("measured-int64-mask-of-a-product", expect={"CML801"}, crash=r"only supports boolean input")
def _():
    # A hash's mask of ids made in Core ML with a mask never measured: every mask measured
    # on int64 inputs crashes alike, so this one is predicted from the base call's crash.
    return module(lambda s, ids: ((ids * 3) & 0x7FFFFFFF) % 1000), (
        torch.randint(0, 2**20, (4, 6)),
    )


def _mixed_kernel_conv(bias_from_input: bool) -> tuple[Any, tuple[Any, ...]]:
    """A per-sample mixture of kernels (CondConv), run as a grouped convolution: the weight
    is computed in the program, and the bias too, or not."""

    class Mixture(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.route = nn.Linear(4, 3)
            self.weight = nn.Parameter(torch.randn(3, 8 * 4 * 9) * 0.1)
            self.bias = nn.Parameter(torch.randn(3, 16))
            self.fixed = nn.Parameter(torch.randn(16))

        def forward(self, x):
            a = torch.softmax(self.route(x.mean((2, 3))), dim=1)
            weight = (a @ self.weight).view(16, 4, 3, 3)
            bias = (a @ self.bias).mean(0) if bias_from_input else self.fixed
            return F.conv2d(x.reshape(1, 8, 6, 6), weight, bias, padding=1, groups=2)

    return Mixture(), (torch.randn(2, 4, 6, 6),)


@case("measured-conv-bias-made-in-the-program", expect={"CML801"}, crash=r"bias must be const")
def _():
    # predicted: the base call crashes with a bias made in the program where a constant
    # bias converts, and this call (padding, groups) was not measured with one
    return _mixed_kernel_conv(bias_from_input=True)


@case("measured-conv-constant-bias-computed-weight", expect=set())
def _():
    return _mixed_kernel_conv(bias_from_input=False)


def _scores(column: bool) -> tuple[Any, tuple[Any, ...]]:
    """A score per row: a matrix times a learned vector, or times it as a column."""

    class Scores(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p = nn.Parameter(torch.randn(12))

        def forward(self, x):
            return (x @ self.p[:, None])[:, 0] if column else x @ self.p

    return Scores(), (torch.randn(16, 12),)


@case("measured-matmul-by-a-vector-weight", expect={"CML801"}, crash=r"IndexError")
def _():
    # predicted: ranks 2 x 1 crash with two inputs, and the base call converts with a weight
    return _scores(column=False)


@case("measured-matmul-by-a-column-weight", expect=set())
def _():
    return _scores(column=True)
