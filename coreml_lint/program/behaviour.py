"""What each delegated op really does, read from the measured table ``data/behaviour.json``.

Why a measured table: the stock partitioner delegates by op *name* (background: the support
test reads op names), so whether a delegated node converts, and computes the right values,
depends on its dtypes, argument values and the deployment target, and nobody can read that
off a changelog. ``python -m coreml_lint.sweep`` lowers single-op programs over those
dimensions with the stock ``CoreMLPartitioner``, judges each with the ``verify`` oracle and
writes the outcomes here; CML801 matches every Core ML node against them.

The light half (this module) is torch-free: the *key* of a node, computed the same way for
the sweep's own programs and for the programs the linter reads (so a measured entry applies
exactly where it was measured), and the reader of the table. A key is

- ``op``: the node's target in edge spelling (``aten.amax.default``);
- ``operands``: each tensor operand as ``dtype:origin``, origin ``in`` (the partition
  receives it), ``op`` (made inside the same partition) or ``const`` (a parameter, buffer or
  constant Core ML owns);
- ``variant``: every non-tensor argument export recorded, by position or keyword, as a value
  *class* (``keepdim=True``, ``a1=ints2``, ``exponent=frac``): exact values would never match
  a model's, classes carry what decides a lowering (a float exponent, an eps given or not);
- ``shape``: the rank of the first tensor operand and whether it has a size-1 or empty dim.

A node's key is answered (``BehaviourTable.answer``, which says how): measured at the key;
measured on this machine by ``check --measure`` (a table in the user's cache, per stack
version); measured at another shape class where the op's base call behaves alike at every
shape measured at that target; or predicted, from crashes only (the base call's, every
variant's, or one changed argument's, measured alone). Wrong values seen only in the
oracle's float16 pass depend on the operands' values (``value_dependent``); a crash seen
only because the single-op program returned the op's output is the boundary's
(``boundary-crash``).

Tables for several releases ship side by side (``data/behaviour*.json``); the one whose
coremltools and executorch versions match the installed (or declared) ones is used, and the
linter says so when none matches.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass, field
from functools import cache, cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

from coreml_lint.program.graph import DType, Graph, Node, Opaque, SymRef, TensorRef
from coreml_lint.program.placement import Placement

DATA = Path(__file__).with_name("data")
TABLE_PATH = DATA / "behaviour.json"
VERSIONED_PACKAGES = ("coremltools", "executorch")
FORMAT = 1

CRASH, WRONG, OK, UNVERIFIED, CPU, MIXED = "crash", "wrong", "ok", "unverified", "cpu", "mixed"
BAD = frozenset({CRASH, WRONG})
# A crash the single-op program meets only because it returns the op's output straight
# from the delegate (ExecuTorch's emitter refuses a zero-stride output, as an expand or a
# meshgrid makes): the node crashes a model only when its output leaves its partition too.
BOUNDARY_CRASH = "boundary-crash"
BOUNDARY_CRASH_MESSAGES = ("0 in strides is not supported",)
# What range of values a float16-pass divergence needs, by the verify oracle's kind word.
VALUE_RANGES = {
    "inf": "results pass float16's largest value (|x| > 65504) and become inf",
    "nan": "float16 intermediates overflow and the result becomes NaN",
    "integer": "integers pass 2048 (not exact in float16)",
    "values": "values are too small or too large for float16 (below 6e-8 or past 65504)",
}
ORIGIN_WORDS = {"in": "a partition input", "op": "made inside Core ML", "const": "a constant"}
# Consumers whose dtype handling an op's output can break (measured as two-op contexts).
CONTEXT_OPS = frozenset({"aten.linear.default", "aten.addmm.default", "aten.matmul.default"})
FP16_MAX = 65504.0
# The context of a case whose op output is consumed inside the partition (the sweep's
# ``inside`` axis): what a node whose outputs stay in its partition meets.
INSIDE = "inside"
# The sweep returns every output of an op; a node with outputs nobody reads (layer norm's
# saved mean and rstd) is another program, and keyed apart from what was measured.
UNUSED_OUTPUTS = "outputs=partly-unused"


# ---------------------------------------------------------------- keys
def value_class(value: Any) -> str:
    """The class of a non-tensor argument value, as keys record it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return _int_class(value)
    if isinstance(value, float):
        return _float_class(value)
    if isinstance(value, str):
        return value
    if isinstance(value, DType):
        return value.name
    if isinstance(value, SymRef):
        return "sym"
    if isinstance(value, TensorRef):
        return "T"
    if isinstance(value, Opaque):
        return value.kind
    if isinstance(value, (list, tuple)):
        return _list_class(list(value))
    return type(value).__name__


# Small integers and short lists of them are keyed by their exact value: a stride, padding,
# dilation or output size of [1, 1] and [3, 3] can lower differently, and a class would
# merge them. Which exact values of a class behave alike is then read off the measurements
# (``BehaviourTable._by_class``), never assumed.
EXACT_INT = 64
EXACT_LIST = 6


def value_text(value: Any) -> str:
    """A non-tensor argument value as keys record it: the exact value of a small integer
    or a short list of small integers, else its class (``value_class``)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= EXACT_INT:
        return str(value)
    if (
        isinstance(value, (list, tuple))
        and 0 < len(value) <= EXACT_LIST
        and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
        and all(abs(i) <= EXACT_INT for i in value)
    ):
        return "[" + ",".join(str(i) for i in value) + "]"
    return value_class(value)


_EXACT_INT = re.compile(r"-?\d+")
_EXACT_LIST = re.compile(r"\[-?\d+(,-?\d+)*\]")


def class_of_text(text: str) -> str:
    """The class of a value as a key records it (an exact value's class; a class is its
    own)."""
    if _EXACT_INT.fullmatch(text):
        return _int_class(int(text))
    if _EXACT_LIST.fullmatch(text):
        return _list_class([int(i) for i in text[1:-1].split(",")])
    return text


def class_variant(variant: str) -> str:
    """A variant with every exact value replaced by its class."""
    return ";".join(
        f"{name}={class_of_text(value)}"
        for name, value in (part.partition("=")[::2] for part in variant.split(";") if part)
    )


def _int_class(value: int) -> str:
    if value in (0, 1, -1):
        return str(value)
    if abs(value) > 2048:  # not exact in float16
        return "big" if value > 0 else "-big"
    return "int" if value > 0 else "-int"


def _float_class(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0.0:
        return "0.0"
    magnitude = abs(value)
    sign = "-" if value < 0 else ""  # a negative slope or bound is another call
    if magnitude > FP16_MAX:
        return sign + "huge"
    if magnitude < 1e-4:
        return sign + "tiny"
    if value.is_integer():
        return sign + "whole"
    return sign + "frac"


def _list_class(items: list[Any]) -> str:
    if not items:
        return "[]"
    if all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        marks = ("-" if any(i < 0 for i in items) else "") + ("0" if 0 in items else "")
        return f"ints{len(items)}{marks}"
    if any(isinstance(i, TensorRef) or i is None for i in items):
        return "[" + ",".join("T" if isinstance(i, TensorRef) else "None" for i in items) + "]"
    return "[" + ",".join(value_class(i) for i in items) + "]"


def shape_class(shape: tuple[int | str, ...] | None) -> str:
    """``r<rank>`` plus ``u`` for a size-1 dim and ``e`` for an empty one."""
    if shape is None:
        return "r?"
    marks = ("u" if 1 in shape else "") + ("e" if 0 in shape else "")
    return f"r{len(shape)}{marks}"


@dataclass(frozen=True)
class Key:
    op: str
    operands: str  # "bool:op,float32:in"
    variant: str  # "a1=ints1;keepdim=False"
    shape: str  # "r2", "r0", "r3u"

    def describe(self, names: list[str] | None = None) -> str:
        """``aten.rms_norm.default on float32 (a partition input) with eps=frac``; positional
        arguments by their schema names when ``names`` are known."""
        dtypes = ", ".join(
            f"{d} ({ORIGIN_WORDS.get(o, o)})"
            for d, _, o in (p.partition(":") for p in self.operands.split(",") if p)
        )
        variant = describe_variant(self.variant, names)
        return f"{self.op} on {dtypes or 'no tensor'}" + (f" with {variant}" if variant else "")


def describe_variant(variant: str, names: list[str] | None) -> str:
    parts = []
    for part in filter(None, variant.split(";")):
        name, _, value = part.partition("=")
        if names and re.fullmatch(r"a\d+", name) and int(name[1:]) < len(names):
            name = names[int(name[1:])]
        parts.append(f"{name}={value}")
    return ", ".join(parts)


# Ops export keeps that ExecuTorch's edge dialect turns into another before the partitioner
# sees them (``x & 1`` is ``__and__`` in the exported program, ``bitwise_and`` at the edge):
# the sweep measured them under the edge name.
SAME_OP = {
    f"aten.__{name}__.{overload}": f"aten.bitwise_{name}.{overload}"
    for name in ("and", "or", "xor")
    for overload in ("Scalar", "Tensor")
}


class KeyMaker:
    """Keys of the nodes of one placed graph (shared lookups worked out once)."""

    def __init__(self, graph: Graph, placement: Placement) -> None:
        self.graph = graph
        self.placement = placement
        self.producers = graph.producers()
        self.kinds = {spec.name: spec.kind for spec in graph.inputs}

    def origin(self, value: str, node: Node) -> str:
        """Where a node's operand comes from. A float32 value made inside Core ML is keyed
        as an input: the sweep makes operands inside the program only for the other dtypes
        (a cast there is what can differ), so ``float32:in`` is what was measured."""
        producer = self.producers.get(value)
        if producer is not None:
            mine = self.placement.nodes[node.name].partition
            theirs = self.placement.nodes[producer.name].partition
            inside = mine is not None and mine == theirs
            return "op" if inside and self.graph.dtype(value) != "float32" else "in"
        if self.kinds.get(value) in ("parameter", "buffer", "constant"):
            return "const" if self.placement.settings.take_over_constant_data else "in"
        return "in"

    def key(self, node: Node) -> Key:
        refs = node.tensor_inputs()
        operands = ",".join(f"{self.graph.dtype(r)}:{self.origin(r, node)}" for r in refs)
        first = refs[0] if refs else (node.outputs[0] if node.outputs else None)
        info = self.graph.tensors.get(first) if first else None
        variant = variant_of(node)
        if len(node.outputs) > 1 and not all(o in self.read for o in node.outputs):
            variant += ";" * bool(variant) + UNUSED_OUTPUTS
        op = SAME_OP.get(node.target, node.target)
        return Key(op, operands, variant, shape_class(info and info.shape))

    @cached_property
    def read(self) -> set[str]:
        """Values some node or the program's outputs read."""
        found = {o.name for o in self.graph.outputs if o.name}
        found.update(r for node in self.graph.nodes for r in node.tensor_inputs())
        return found


def variant_of(node: Node) -> str:
    """The non-tensor arguments of a node as export recorded them: small integers and
    lists of them exactly, other values by class."""
    parts = [
        f"a{i}={value_text(v)}"
        for i, v in enumerate(node.args)
        if not isinstance(v, TensorRef) and not _only_tensors(v)
    ]
    parts += [
        f"{k}={value_text(v)}"
        for k, v in sorted(node.kwargs.items())
        if not isinstance(v, TensorRef) and not _only_tensors(v)
    ]
    return ";".join(parts)


def _same_value(mine: str | None, measured: str | None) -> bool:
    """Whether a node's argument value is the measured one: equal, or the measured one is
    a class (a table keyed by classes) the node's exact value falls in."""
    if mine == measured or mine is None or measured is None:
        return mine == measured
    return class_of_text(measured) == measured and class_of_text(mine) == measured


def _distance(a: dict[str, str], b: dict[str, str]) -> int:
    return sum(a.get(f) != b.get(f) for f in a.keys() | b.keys())


def factors(variant: str) -> dict[str, str]:
    """A variant as argument -> value class (an argument left out is absent)."""
    return dict(part.partition("=")[::2] for part in variant.split(";") if part)


def _only_tensors(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(i, TensorRef) for i in value)
    )


# ---------------------------------------------------------------- op families
# Families of ops, for the sweep's report and for where a prediction rule holds out
# (``prediction_gates.json``): the first pattern an op's name matches.
FAMILIES = (
    ("attention", r"attention"),
    ("normalization", r"norm"),
    ("convolution", r"conv|col2im|im2col"),
    ("pooling", r"pool"),
    ("matmul/linear", r"^(mm|bmm|addmm|baddbmm|matmul|linear|dot|mv|outer|einsum)\."),
    (
        "reduction",
        r"^(sum|mean|amax|amin|max|min|var|std|prod|any|all|argmax|argmin|logsumexp|cumsum|cumprod|norm|linalg)",
    ),
    ("comparison/logical", r"^(eq|ne|lt|le|gt|ge|logical|bitwise|isnan|where)"),
    ("index/gather/scatter", r"index|gather|scatter|embedding|select|slice|take|masked"),
    ("fill/factory", r"^(full|zeros|ones|empty|arange|eye|scalar_tensor|new_|fill|linspace)"),
    (
        "activation",
        r"relu|gelu|silu|sigmoid|tanh|elu|softmax|softplus|hard|mish|glu|prelu|log_softmax|threshold",
    ),
    (
        "shape/copy",
        r"view|reshape|permute|transpose|expand|squeeze|unsqueeze|cat|stack|split|flatten|repeat|tile|flip|roll|copy|clone|pad|chunk|unbind|narrow|alias|contiguous|t\.|numpy_T|atleast|broadcast|pixel|upsample|interp|grid",
    ),
    ("elementwise math", r"."),
)


def family(op: str) -> str:
    """The family of an op (``aten.`` prefix or not)."""
    name = op.removeprefix("aten.")
    return next(f for f, pattern in FAMILIES if re.search(pattern, name))


# ---------------------------------------------------------------- the table
def parse_targets(text: str) -> frozenset[int]:
    """``"15-18"`` / ``"15,17"`` -> the iOS versions."""
    found: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return frozenset(found)


def format_targets(targets: Iterable[int]) -> str:
    ordered = sorted(set(targets))
    runs: list[list[int]] = []
    for t in ordered:
        if runs and t == runs[-1][-1] + 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


@dataclass(frozen=True)
class Entry:
    """One measured outcome: an op's operands, variant, context and shape class at some
    targets (``shape`` ``*``: two or more shape classes were measured, and agreed)."""

    op: str
    operands: str
    variant: str
    context: str  # "" or the consumer's target ("aten.addmm.default")
    shape: str
    targets: frozenset[int]
    outcome: str
    message: str
    cases: int

    def where(self) -> str:
        return f"iOS{format_targets(self.targets).replace(',', ', iOS')}"


# How an answer was reached: measured at the key, at another shape class of a key whose
# op behaves alike at every shape measured, or predicted (from the base call's crash, from
# every measured variant crashing alike, from one changed argument's crash).
MEASURED, SHAPE, BASE, EVERY, FACTOR = "measured", "shape", "base", "every", "factor"
HERE = "here"  # measured on this machine by ``check --measure``
# Measured at other values of the same classes, which all agree (``_lookup_class``).
CLASS = "class"


def same_call(entry: Entry, key: Key) -> bool:
    """Whether an entry measured the key's own call: its exact variant, or the variant's
    classes in a table keyed by classes."""
    return entry.variant in (key.variant, class_variant(key.variant)) and (
        entry.variant == key.variant or entry.variant == class_variant(entry.variant)
    )


@dataclass(frozen=True)
class Answer:
    entry: Entry
    basis: str

    @property
    def predicted(self) -> bool:
        return self.basis in (BASE, EVERY, FACTOR)


@dataclass
class BehaviourTable:
    measured_with: dict[str, str]
    sweep: dict[str, Any]
    entries: dict[tuple[str, str, str, str], list[Entry]]
    path: Path
    by_op: dict[str, list[Entry]] = field(default_factory=dict)
    bases: dict[str, str] = field(default_factory=dict)  # op -> the base call's variant
    arg_names: dict[str, list[str]] = field(default_factory=dict)  # op -> schema names
    # basis -> the op families where it did not hold out (None: no hold-out measured)
    refused: dict[str, frozenset[str]] | None = None
    _free: dict[Any, Any] = field(default_factory=dict, repr=False)  # answers worked out once

    def lookup(self, key: Key, target: int, context: str = "") -> Entry | None:
        """The measured outcome for a node key at a target, or None when unmeasured."""
        return self._lookup(key.op, key.operands, key.variant, key.shape, target, context)

    def answer(self, key: Key, target: int, context: str = "") -> Answer | None:
        """The measured outcome for a node key, else one measured on this machine
        (``--measure``), else the predicted one, saying which."""
        entry = self.lookup(key, target, context)
        if entry is not None and entry.shape in ("*", key.shape):
            basis = MEASURED if same_call(entry, key) else CLASS
            if self.holds(basis, key.op):
                return Answer(entry, basis)
        local = local_table()
        here = local._lookup(*astuple(key), target, context) if local is not None else None
        if here is not None:
            return Answer(here, HERE)
        if entry is not None and entry.shape not in ("*", key.shape):
            return Answer(entry, SHAPE) if self.holds(SHAPE, key.op) else None
        found = self.predicted(key, target, context)
        return found if found is not None and self.holds(found.basis, key.op) else None

    def holds(self, basis: str, op: str) -> bool:
        """Whether answers reached this way are given for this op: a measurement always;
        an answer for a call that was not measured except in the op families where that
        way of answering fell below 95 % precision on the table's own held-out cells
        (``benchmarks/optable_holdout.py``, ``prediction_gates.json``)."""
        if self.refused is None or basis in (MEASURED, HERE):
            return True
        return family(op) not in self.refused.get(basis, ())

    def predict(self, key: Key, target: int, context: str = "") -> Entry | None:
        found = self.predicted(key, target, context)
        return None if found is None else found.entry

    def predicted(self, key: Key, target: int, context: str = "") -> Answer | None:
        """:meth:`_predict`, once per key (a model repeats its blocks: few keys, many nodes)."""
        memo = ("predict", key, target, context)
        if memo not in self._free:
            self._free[memo] = self._predict(key, target, context)
        return self._free[memo]

    def _predict(self, key: Key, target: int, context: str) -> Answer | None:
        """For an unmeasured variant of an op whose arguments change nothing in float32
        (every float32 variant measured has the base call's outcome, for one reason), the
        crash measured on the base call with the same operands: a prediction, not a
        measurement."""
        # Only a crash carries over: wrong values depend on the values, which the other
        # arguments change (an integer clamp to [0, 7] never reaches float16's rounding).
        base = self.bases.get(key.op)
        if base is not None and base != key.variant and self.variant_free(key.op):
            entry = self._lookup(key.op, key.operands, base, key.shape, target, context)
            if entry is not None and entry.outcome == "crash":
                return Answer(entry, BASE)
        found = self._every_variant_crashes(key, target, context)
        if found is not None:
            return Answer(found, EVERY)
        found = self._factor_crashes(key, target, context)
        return None if found is None else Answer(found, FACTOR)

    def _factor_crashes(self, key: Key, target: int, context: str) -> Entry | None:
        """The crash of a measured variant whose every change from the base call the key
        makes too (``sorted=False`` measured with ``k=1`` crashes; the node's ``k=4,
        sorted=False`` holds the same change): the sweep varies one argument at a time, so a
        user's call changing two is never measured, but a crash one change causes is
        caused by it whatever the other arguments. Only where the base call with the key's
        operands, at the key's shape and target, was measured and does not crash (else the
        change explains nothing)."""
        base = self.bases.get(key.op)
        if base is None or base == key.variant:
            return None
        mine, theirs = factors(key.variant), factors(base)
        control = self._lookup(key.op, key.operands, base, key.shape, target, context)
        if control is None or control.outcome in (CRASH, MIXED):
            return None  # a base call that crashes is no control for what a change causes
        for variant in sorted(self._variants(key.op, key.operands, context)):
            measured = factors(variant)
            changed = {
                f for f in measured.keys() | theirs.keys() if measured.get(f) != theirs.get(f)
            }
            if not changed or any(not _same_value(mine.get(f), measured.get(f)) for f in changed):
                continue
            entry = self._lookup(key.op, key.operands, variant, key.shape, target, context)
            if entry is not None and entry.outcome == CRASH:
                return entry
        return None

    def _variants(self, op: str, operands: str, context: str) -> set[str]:
        return {
            e.variant
            for e in self.by_op.get(op, ())
            if e.operands == operands and e.context == context
        }

    def _every_variant_crashes(self, key: Key, target: int, context: str) -> Entry | None:
        """The crash every variant measured with the key's operands shows at the target,
        for one reason (two variants or more: ``x & 1`` of int64, where 0, 7 and 3001 were
        measured), or None."""
        variants = {
            e.variant
            for e in self.by_op.get(key.op, ())
            if e.operands == key.operands and e.context == context
        }
        found = [
            self._lookup(key.op, key.operands, variant, key.shape, target, context)
            for variant in variants
        ]
        reasons = {(e.outcome, normalized(e.message)) for e in found if e is not None}
        if len(variants) >= 2 and None not in found and len(reasons) == 1:
            ((outcome, _),) = reasons
            if outcome == "crash":
                return found[0]
        return None

    def variant_free(self, op: str) -> bool:
        """Whether every float32 variant measured has one outcome, for one reason."""
        if op not in self._free:
            reference = self._float32(op)
            variants = {e.variant for e in reference}
            reasons = {(e.outcome, normalized(e.message)) for e in reference}
            self._free[op] = len(variants) > 1 and len(reasons) == 1
        return self._free[op]

    def shape_free(self, op: str) -> bool:
        """Whether the op's base call converts and computes right at every shape class
        measured, two or more: then what a dtype or an argument does, measured at one shape,
        is taken for every shape. Where the base call itself fails (a pool without stride),
        it is no control for the other cases, and they answer only for their own shape."""
        key = ("shape", op)
        if key not in self._free:
            base = [e for e in self._float32(op) if e.variant == self.bases.get(op)]
            self._free[key] = bool(base) and all(e.outcome == "ok" for e in base)
            self._free[key] &= any(e.shape == "*" for e in base)
        return self._free[key]

    def _float32(self, op: str) -> list[Entry]:
        return [
            e
            for e in self.by_op.get(op, ())
            if not e.context and set(e.operands.split(",")) <= {"float32:in"}
        ]

    def _lookup(self, op, operands, variant, shape, target, context) -> Entry | None:
        """The entry of this exact call, else the one every other measured value of its
        class agrees on (:meth:`_lookup_class`)."""
        found = self._lookup_exact(op, operands, variant, shape, target, context)
        if found is not None or not variant:
            return found
        return self._lookup_class(op, operands, variant, shape, target, context)

    def _lookup_class(self, op, operands, variant, shape, target, context) -> Entry | None:
        """The outcome, for one reason, of every other value of the same classes that was
        measured (``[2, 2]`` answers for ``[3, 3]`` only where no measured value of the
        class behaves otherwise): which values of an argument decide an op's outcome is
        read off the measurements. A table keyed by classes (format 1) is its own class."""
        members = self._by_class().get((op, operands, class_variant(variant), context), ())
        found = [
            entry
            for other in sorted(members)
            if other != variant
            for entry in [self._lookup_exact(op, operands, other, shape, target, context)]
            if entry is not None
        ]
        reasons = {(e.outcome, normalized(e.message)) for e in found}
        return found[0] if len(reasons) == 1 else None

    def _by_class(self) -> dict[tuple[str, str, str, str], set[str]]:
        """(op, operands, class variant, context) -> the variants measured in it."""
        if "by_class" not in self._free:
            index: dict[tuple[str, str, str, str], set[str]] = {}
            for op, operands, variant, context in self.entries:
                group = (op, operands, class_variant(variant), context)
                index.setdefault(group, set()).add(variant)
            self._free["by_class"] = index
        return self._free["by_class"]

    def _lookup_exact(self, op, operands, variant, shape, target, context) -> Entry | None:
        """The entry at ``shape``, else the one for every shape (``*``), else, for a
        shape-free op, the one measured at another shape (when those agree)."""
        found = {}
        for entry in self.entries.get((op, operands, variant, context), ()):
            if target in entry.targets:
                rank = 0 if entry.shape == shape else 1 if entry.shape == "*" else 2
                found.setdefault(rank, []).append(entry)
        if 0 in found or 1 in found:
            return (found.get(0) or found[1])[0]
        others = found.get(2, [])
        reasons = {(e.outcome, normalized(e.message)) for e in others}
        if len(reasons) == 1 and (
            self.shape_free(op) or reasons == self._everywhere(op, operands, target, context)
        ):
            return others[0]
        return None

    def _everywhere(self, op: str, operands: str, target: int, context: str) -> set:
        """The (outcome, reason) the base call with these operands (or in float32) shows at
        every shape measured at the target (a ``*`` entry), or an empty set. A variant
        measured at one shape with that same outcome and reason shows it at every shape:
        the outcome is the op's at this target (no iOS15 version of ``pixel_unshuffle``),
        not the shape's."""
        base = self.bases.get(op)
        for ops in (operands, ",".join("float32:in" for _ in operands.split(","))):
            for entry in self.entries.get((op, ops, base, context), ()):
                if entry.shape == "*" and target in entry.targets:
                    return {(entry.outcome, normalized(entry.message))}
        return set()

    def workarounds(self, entry: Entry, target: int, key: Key | None = None) -> list[str]:
        """What the table measured *ok* near a bad entry: a higher target, other dtypes,
        another variant of the same op, the one closest to the node's ``key`` (in that
        order of preference)."""
        return list(_workarounds(self, entry, target, key))

    @property
    def versions(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.measured_with.items())


def _workarounds(
    table: BehaviourTable, bad: Entry, target: int, key: Key | None = None
) -> Iterator[str]:
    same = table.entries.get((bad.op, bad.operands, bad.variant, bad.context), ())
    higher = sorted(
        t
        for e in same
        if e.outcome == OK and e.shape in ("*", bad.shape)
        for t in e.targets
        if t > target
    )
    if higher:
        yield f"minimum_deployment_target iOS{higher[0]} (measured ok)"
    others = [
        e
        for e in table.by_op.get(bad.op, ())
        if e.outcome == OK
        and target in e.targets
        and e.context == bad.context
        and e.shape in ("*", bad.shape)
    ]
    origins = [o.partition(":")[2] for o in bad.operands.split(",")]
    for e in others:
        theirs = [o.partition(":")[2] for o in e.operands.split(",")]
        if e.variant == bad.variant and theirs == origins and e.operands != bad.operands:
            dtypes = ", ".join(o.partition(":")[0] for o in e.operands.split(","))
            yield f"operands of dtype {dtypes} (measured ok)"
            break
    near = factors(key.variant if key is not None else bad.variant)
    others.sort(key=lambda e: _distance(near, factors(e.variant)))
    for e in others:
        if e.operands == bad.operands and e.variant != bad.variant:
            variant = describe_variant(e.variant, table.arg_names.get(bad.op))
            yield (
                f"the call with {variant or 'no other arguments'} (measured ok; other argument "
                "values may compute other results: check they fit the model)"
            )
            break
    if bad.context:
        plain = table.entries.get((bad.op, bad.operands, bad.variant, ""), ())
        if any(e.outcome == OK and target in e.targets for e in plain):
            yield f"the same {bad.op.split('.')[1]} not feeding {bad.context} (measured ok)"


def boundary_crash(message: str) -> bool:
    """Whether a crash message is the program boundary's, not the op's."""
    return any(m in message for m in BOUNDARY_CRASH_MESSAGES)


def value_dependent(entry: Entry) -> bool:
    """Wrong values the verify oracle saw only in its float16 pass (overflow, underflow,
    integers past 2048): they depend on the values the operands hold, which the sweep
    picked at their limits; a model's own values may never reach them."""
    return entry.outcome == WRONG and entry.message.startswith("float16 ")


BIG_CLASSES = frozenset({"big", "-big", "huge", "-huge", "tiny", "-tiny", "inf", "-inf"})


def value_range(entry: Entry, names: list[str] | None = None) -> str:
    """The values a value-dependent outcome needs, in words (``names``: the schema's)."""
    kind = entry.message.split()[1] if len(entry.message.split()) > 1 else ""
    found = VALUE_RANGES.get(kind, "values reach float16's limits")
    big = [p for p in entry.variant.split(";") if p.partition("=")[2] in BIG_CLASSES]
    said = describe_variant(";".join(big), names)
    return found + (f" (measured with {said})" if big else "")


GATES_PATH = DATA / "prediction_gates.json"


def load_gates(path: Path) -> dict[str, frozenset[str]] | None:
    """Where each way of answering an unmeasured call fell below the gate, for a shipped
    table (its hold-out benchmark wrote ``prediction_gates.json``); None for any other."""
    if path.resolve().parent != DATA.resolve() or not GATES_PATH.exists():
        return None
    found = json.loads(GATES_PATH.read_text()).get("tables", {}).get(path.name)
    if found is None:
        return None
    return {basis: frozenset(families) for basis, families in found["refused"].items()}


def load_table(path: Path, gated: bool = True) -> BehaviourTable:
    """The table at ``path``; ``gated=False`` answers every way (the hold-out benchmark
    measures the ways themselves)."""
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: behaviour table format {data.get('format')} is not {FORMAT}")
    messages = data["messages"]
    entries: dict[tuple[str, str, str, str], list[Entry]] = {}
    by_op: dict[str, list[Entry]] = {}
    for op, rows in data["ops"].items():
        for operands, variant, context, shape, targets, outcome, message, cases in rows:
            entry = Entry(
                op,
                operands,
                variant,
                context,
                shape,
                parse_targets(targets),
                outcome,
                messages[message] if message is not None else "",
                cases,
            )
            entries.setdefault((op, operands, variant, context), []).append(entry)
            by_op.setdefault(op, []).append(entry)
    return BehaviourTable(
        data["measured_with"],
        data.get("sweep", {}),
        entries,
        path,
        by_op,
        dict(data.get("bases", {})),
        dict(data.get("arg_names", {})),
        refused=load_gates(path) if gated else None,
    )


# ---------------------------------------------------------------- versions
_DECLARED: dict[str, str] = {}


def declare_versions(**versions: str | None) -> None:
    """The coremltools / executorch versions the user lowers with (``check
    --target-coremltools``), when they are not the installed ones."""
    _DECLARED.clear()
    _DECLARED.update({k: v for k, v in versions.items() if v})


def target_versions() -> dict[str, str]:
    """The declared versions, else the installed ones (read from package metadata: nothing
    is imported)."""
    found = {}
    for package in VERSIONED_PACKAGES:
        if package in _DECLARED:
            found[package] = _DECLARED[package]
            continue
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def table_paths() -> list[Path]:
    """Every shipped table: ``behaviour.json`` first, then the others by name."""
    others = sorted(p for p in DATA.glob("behaviour*.json") if p != TABLE_PATH)
    return [p for p in [TABLE_PATH, *others] if p.exists()]


@cache
def _load(path: Path) -> BehaviourTable:
    return load_table(path)


def _matches(table: BehaviourTable, versions: dict[str, str]) -> bool:
    return all(table.measured_with.get(k) == v for k, v in versions.items())


def active_table() -> BehaviourTable | None:
    """The table measured on the target versions, else the default one (None when no
    table ships)."""
    paths = table_paths()
    if not paths:
        return None
    versions = target_versions()
    for path in paths:
        table = _load(path)
        if _matches(table, versions):
            return table
    return _load(paths[0])


def version_note(table: BehaviourTable | None = None) -> str | None:
    """A sentence when the table in use was measured on other versions than the target's."""
    table = table or active_table()
    if table is None:
        return None
    versions = target_versions()
    differ = {
        k: (v, table.measured_with.get(k))
        for k, v in versions.items()
        if table.measured_with.get(k) != v
    }
    if not differ:
        return None
    said = ", ".join(f"{k} {v} (table: {was})" for k, (v, was) in differ.items())
    shipped = "; ".join(_load(p).versions for p in table_paths())
    return (
        f"the measured op behaviour was not measured on {said}: CML801 applies the table "
        f"of {table.versions} (tables shipped: {shipped}); re-measure with "
        "`python -m coreml_lint.sweep`"
    )


# ---------------------------------------------------------------- measured here
# ``check --measure`` measures the keys the shipped table lacks on this machine's stack and
# keeps them per stack version in the user's cache: a second run reads them back, torch-free.
_LOCAL: dict[str, Any] = {"on": False}
STACK = ("torch", *VERSIONED_PACKAGES)


def installed_versions() -> dict[str, str]:
    found = {}
    for package in STACK:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/coreml-lint/measured/<stack>`` (``~/.cache`` without it)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    versions = installed_versions()
    stack = "-".join(f"{p}{versions.get(p, 'none')}" for p in STACK)
    return root / "coreml-lint" / "measured" / re.sub(r"[^\w.+-]", "_", stack)


def use_local_measurements(on: bool) -> None:
    """Whether CML801 also answers from what ``--measure`` measured on this machine."""
    _LOCAL.clear()
    _LOCAL["on"] = on


def local_table() -> BehaviourTable | None:
    """The table of this machine's measurements, when in use and present."""
    if not _LOCAL.get("on"):
        return None
    if "table" not in _LOCAL:
        path = cache_folder() / TABLE_PATH.name
        _LOCAL["table"] = load_table(path) if path.exists() else None
    return _LOCAL["table"]


def normalized(message: str) -> str:
    """A message with its numbers and quoted names blanked: two outcomes are the same when
    these agree."""
    text = re.sub(r'"[^"]*"', '"…"', message)
    text = re.sub(r"'[^']*'", "'…'", text)
    return re.sub(r"\d+", "N", text)
