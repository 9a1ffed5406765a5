"""The reader of the measured table (``data/behaviour.json``), torch-free.

A node's key is answered (``BehaviourTable.answer``, which says how): measured at the key;
measured at other values of the key's classes that all agree; measured on this machine by
``check --measure`` (a table in the user's cache, per stack); measured at the same rank with
or without a size-1 dim (``r4u`` for ``r4``: a batch of one) where the op's family held out
that way; measured at another shape class where the op's base call behaves alike at every
shape measured at that target; or predicted, from crashes only (the base call's, every
variant's, one changed argument's measured alone, or one argument value's, read off two
measured calls differing in it alone; and one wrong outcome, a dtype argument every call
measured with it ignores alike), except in the op families where that way of answering
fell below 95 % precision on the table's own held-out cells (``data/prediction_gates.json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import Any

from coreml_lint.measured.entry import Entry
from coreml_lint.measured.families import family
from coreml_lint.measured.key import Key
from coreml_lint.measured.outcomes import (
    CRASH,
    EDGE,
    MIXED,
    OK,
    interface_only,
    needs_fp16_input,
    normalized,
)
from coreml_lint.measured.rows import ByOp, Entries, OpRows
from coreml_lint.measured.stack import cache_folder
from coreml_lint.measured.values import (
    FOLD_RANKS,
    class_of_text,
    class_variant,
    describe_variant,
    factors,
    is_exact_text,
    is_word,
    negative_list,
    ranks_of,
)

DATA = Path(__file__).with_name("data")

TABLE_PATH = DATA / "behaviour.json"

FORMAT = 1


def _same_value(mine: str | None, measured: str | None) -> bool:
    """Whether a node's argument value is the measured one: equal, or the measured one is
    a class (a table keyed by classes) the node's exact value falls in."""
    if mine == measured or mine is None or measured is None:
        return mine == measured
    return class_of_text(measured) == measured and class_of_text(mine) == measured


def _distance(a: dict[str, str], b: dict[str, str]) -> int:
    return sum(a.get(f) != b.get(f) for f in a.keys() | b.keys())


def _empty_values(variant: str, names: list[str] | None) -> int:
    """How many size or count arguments a variant sets to 0 or ``[]``: between calls as
    near, the advice keeps ``k=1``, not a ``k=0`` whose output is empty (an axis or a
    padding of 0 is no empty output: arguments named ``dim``/``pad`` are not counted)."""
    count = 0
    for name, value in factors(variant).items():
        if name.startswith("a") and name[1:].isdigit() and names and int(name[1:]) < len(names):
            name = names[int(name[1:])]
        count += value in ("0", "[]") and "dim" not in name and "pad" not in name
    return count


# How an answer was reached: measured at the key, at another shape class of a key whose
# op behaves alike at every shape measured, or predicted (from the base call's crash, from
# every measured variant crashing alike, from one changed argument's crash).
MEASURED, SHAPE, BASE, EVERY, FACTOR = "measured", "shape", "base", "every", "factor"

# Predicted from a crash one argument value causes, read off two measured calls that differ
# in that value alone at the key's shape class (``_contrast_crashes``). The same reading at
# another shape class held out at 0 of 32 bad answers right (a crash one value causes at one
# rank is not that value's at another): it is not made.
CONTRAST = "contrast"

# Predicted from a word (a mode string: ``circular``) that crashes the op in every cell
# measured with it, at two shape classes or more, while other values convert
# (``_word_crashes``): a converter that refuses a mode refuses it at any rank and beside any
# other value, which a changed number or list does not promise. Held out on its own, so its
# gates are its own (``benchmarks/optable_holdout.py``).
WORD = "word"
WORD_SUPPORT = 3  # cells measured with the word, all crashing alike

# Predicted from every operand origin measured with the key's dtypes, two or more, crashing
# for one reason (``_every_origin_crashes``): ``&`` of int64 crashes as an input, beside a
# constant and made in the program, so an int64 made in the program beside a constant does.
ORIGIN = "origin"

# Predicted from every call of the op measured at the target crashing for one reason, with
# two operand dtypes or more at two shape classes or more (``_op_crashes``): the op itself
# is refused whatever its operands, arguments or shape (``searchsorted`` is neither kept
# whole by the partitioner nor core ATen, so ExecuTorch's edge verifier stops).
ALWAYS = "always"
ALWAYS_SUPPORT = 8  # cells measured at the target, all crashing alike

# Predicted from the key's shape class, where every call measured crashes for one reason and
# each of those calls converts at another shape class (``_rank_crashes``): the shape causes
# it (a group norm or a pixel shuffle of a 5-d input: Core ML's rank limit inside the
# converter, a converter written for 4-d), whatever the arguments.
RANK = "rank"

# Predicted, as a word is (``_word_crashes``), from an int list argument's negative values:
# every call measured with a negative value of that argument crashes for one reason, at two
# shape classes or more, while non-negative values convert (a crop by a negative pad, which
# coremltools refuses at every rank and length: ``[-2, -2, -2, -2]`` of a 4-d input when
# ``[-1, -1]`` of 2-d and 3-d ones were measured).
SIGN = "sign"

# Predicted, for a call with a dtype argument, from every call measured with the key's
# operands (dtypes and origins) and the same dtype value computing the same wrong
# partition-output dtype (``_interface_wrong``), at two variants or more, where no crash
# reading holds: a converter that ignores the dtype argument ignores it whatever the dims,
# ``keepdim`` or rank (``ids.sum((1, 2),
# keepdim=True, dtype=torch.float32)`` of int32 ids comes back int32, measured at other dims).
INTERFACE = "interface"
INTERFACE_SUPPORT = 3  # cells measured with the dtype value, all wrong alike

# Predicted from the base call measured with the key's operands crashing, for one reason,
# where the base call with the same dtypes at other origins converts
# (``_operands_crash``): the operands' origins cause it (a convolution's bias made in the
# program: ``Input bias must be const``), whatever the key's other arguments.
OPERANDS = "operands"

# Predicted from the key's call measured crashing, for one reason, with the same operand
# dtypes at other origins, where the base call with the key's own operands converts
# (``_variant_crashes``): the arguments cause it whatever the operands' origins (a matmul
# of a matrix by a vector crashes with the vector an input; so it does with a weight).
VARIANT = "variant"

HERE = "here"  # measured on this machine by ``check --measure``

# Measured at other values of the same classes, which all agree (``_lookup_class``).
CLASS = "class"

# Measured at the key's rank with a size-1 dim where the key has none, or without one where
# it has (``unit_twin``): a model's batch of one against the sweep's batch of four.
UNIT = "unit"

# The ways of answering that read a measured call (its own, or one of its classes, shape
# class or size-1 twin), as against predicting one no measured call made.
READ_OFF = frozenset({MEASURED, HERE, CLASS, SHAPE, UNIT})


def _word(value: str) -> str | None:
    """A string argument's word is its own kind (``_word_crashes``)."""
    return value if is_word(value) else None


def _negative(value: str) -> str | None:
    """Every int list holding a negative value is one kind (``SIGN``)."""
    return "negative" if negative_list(value) else None


def unit_twin(shape: str) -> str | None:
    """``r4`` <-> ``r4u``: the shape class differing from ``shape`` only by a size-1 dim;
    None for a rank below 2 (a size-1 dim is then most of the tensor), an empty dim or an
    unknown rank."""
    rank = shape[1:].rstrip("u")
    if not shape.startswith("r") or not rank.isdigit() or int(rank) < 2 or "e" in shape:
        return None
    return f"r{rank}" if shape.endswith("u") else f"r{rank}u"


def _dtypes_of(operands: str) -> list[str]:
    """``"int64:op,int64:const"`` -> ``["int64", "int64"]``."""
    return [o.partition(":")[0] for o in operands.split(",")] if operands else []


def same_call(entry: Entry, key: Key) -> bool:
    """Whether an entry measured the key's own call: its exact variant, or the variant's
    classes in a table keyed by classes."""
    return entry.variant in (key.variant, class_variant(key.variant)) and (
        entry.variant == key.variant or entry.variant == class_variant(entry.variant)
    )


def _single_causes(
    cells: list[tuple[Entry, dict[str, str]]], given: frozenset[str]
) -> list[tuple[str, str, Entry]]:
    """(argument, value, crash) for each crashing cell and argument value of it where a
    cell that converts differs from it in that argument alone, and every cell measured with
    that value crashes (a value that crashes only beside another one, a stride beside
    ``ceil_mode``, is no cause of its own): every cell that changes no other argument
    beyond ``given``, those the key changes, where there is one (an avg_pool3d's
    ``ceil_mode=True`` crashes beside the default ``count_include_pad=True`` a key keeps,
    whatever it does beside ``False``), else every cell."""
    outcomes: dict[tuple[str, str], set[str]] = {}
    beside: dict[tuple[str, str], set[str]] = {}  # only beside arguments the key changes
    for entry, changed in cells:
        for item in changed.items():
            outcomes.setdefault(item, set()).add(entry.outcome)
            if changed.keys() - {item[0]} <= given:
                beside.setdefault(item, set()).add(entry.outcome)
    names = {n for _, changed in cells for n in changed}
    fine: dict[tuple[str, frozenset], set[str | None]] = {}  # values beside the same others
    for entry, changed in cells:
        if entry.outcome == OK:
            for name in names:
                rest = frozenset((f, v) for f, v in changed.items() if f != name)
                fine.setdefault((name, rest), set()).add(changed.get(name))
    found = []
    for entry, changed in cells:
        if entry.outcome != CRASH:
            continue
        for name, value in changed.items():
            if beside.get((name, value), outcomes[(name, value)]) != {CRASH}:
                continue
            rest = frozenset((f, v) for f, v in changed.items() if f != name)
            if fine.get((name, rest), set()) - {value}:
                found.append((name, value, entry))
    return found


@dataclass(frozen=True)
class Answer:
    entry: Entry
    basis: str
    cause: str = ""  # the argument value a contrast or word prediction blames ("a4=[2,2]")

    @property
    def predicted(self) -> bool:
        return self.basis in (
            BASE,
            EVERY,
            FACTOR,
            WORD,
            SIGN,
            CONTRAST,
            ORIGIN,
            OPERANDS,
            VARIANT,
            ALWAYS,
            RANK,
            INTERFACE,
        )


@dataclass
class BehaviourTable:
    measured_with: dict[str, str]
    sweep: dict[str, Any]
    entries: Mapping[tuple[str, str, str, str], list[Entry]]
    path: Path
    by_op: Mapping[str, list[Entry]] = field(default_factory=dict)
    bases: dict[str, str] = field(default_factory=dict)  # op -> the base call's variant
    arg_names: dict[str, list[str]] = field(default_factory=dict)  # op -> schema names
    # op -> each defaulted argument as keys record it ("a4" -> "[1,1]")
    arg_defaults: dict[str, dict[str, str]] = field(default_factory=dict)
    # op -> its dtype arguments as keys name them ("dtype", "a2"): from the schema
    dtype_args: dict[str, list[str]] = field(default_factory=dict)
    # basis -> the op families where it did not hold out (None: no hold-out measured)
    refused: dict[str, frozenset[str]] | None = None
    # ops measured as users write them though ``to_edge`` decomposes them (``nn.Hardshrink``):
    # a node of one is answered by its own key, as a delegated op's is
    measured_decomposed: frozenset[str] = frozenset()
    # answers worked out once; never carried over by ``dataclasses.replace`` (a table with
    # other entries or gates answers afresh)
    _free: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def lookup(self, key: Key, target: int, context: str = "") -> Entry | None:
        """The measured outcome for a node key at a target, or None when unmeasured."""
        key = self.spelled(key, context)
        return self._lookup(key.op, key.operands, key.variant, key.shape, target, context)

    def spelled(self, key: Key, context: str = "") -> Key:
        """The key with its variant as the table spells the same call: a call that spells
        out an argument at its default (``dilation=[1,1]``) is the call that leaves it out,
        and the reverse (:meth:`_spelling`). The key itself when the table spells it so, or
        has no such call."""
        if not self.arg_defaults.get(key.op):
            return key
        if (key.op, key.operands, key.variant, context) in self.entries:
            return key
        changed = self._spelling(key.op, key.variant)
        for variant in self._spellings(key.op).get((key.operands, context, changed), ()):
            return replace(key, variant=variant)
        return key

    def _spelling(self, op: str, variant: str) -> str:
        """A variant less the arguments at a default keys record exactly (an integer, a
        list of them, a bool or None). Not a float's class: ``elu``'s default alpha is the
        integer 1, and ``nn.ELU`` passes 1.0, keyed ``1.0``, which coremltools converts
        where the integer crashes; and a class holds other values than the default."""
        defaults = self.arg_defaults.get(op, {})
        kept = {
            f: v
            for f, v in factors(variant).items()
            if not (defaults.get(f) == v and is_exact_text(v))
        }
        return ";".join(f"{name}={value}" for name, value in sorted(kept.items()))

    def _spellings(self, op: str) -> dict[tuple[str, str, str], list[str]]:
        """(operands, context, what a variant changes) -> the variants of ``op`` measured
        so; built per op, once."""
        memo = ("spellings", op)
        if memo not in self._free:
            index: dict[tuple[str, str, str], set[str]] = {}
            for e in self.by_op.get(op, ()):
                changed = self._spelling(op, e.variant)
                index.setdefault((e.operands, e.context, changed), set()).add(e.variant)
            self._free[memo] = {k: sorted(v, key=len) for k, v in index.items()}
        return self._free[memo]

    def answer(self, key: Key, target: int, context: str = "") -> Answer | None:
        """The measured outcome for a node key, else one measured on this machine
        (``--measure``), else the predicted one, saying which; once per key and set of
        local measurements and gates (a model repeats its blocks: few keys, many nodes)."""
        gates = tuple(sorted((self.refused or {}).items()))
        memo = ("answer", key, target, context, _LOCAL.get("generation"), gates)
        if memo not in self._free:
            self._free[memo] = self._answer(key, target, context)
        return self._free[memo]

    def _answer(self, key: Key, target: int, context: str) -> Answer | None:
        spelled = self.spelled(key, context)
        entry = self._lookup(*astuple(spelled), target, context)
        if entry is not None and entry.shape in ("*", key.shape):
            basis = MEASURED if same_call(entry, spelled) else CLASS
            if basis == CLASS and entry.outcome != CRASH:
                # other values of the class convert, but one of the key's own values is
                # measured to crash wherever it is given (``dilation=[2,2]``, where the
                # class answered from ``[1,1]`` beside a ``ceil_mode`` never measured
                # with it): the measured cause outranks the class
                cause = self._contrast_crashes(spelled, target, context)
                if cause is not None and self.holds(CONTRAST, key.op):
                    return Answer(cause[1], CONTRAST, cause[0])
            if self.holds(basis, key.op):
                return Answer(entry, basis)
        local = local_table()  # measured here with the node's own spelling
        here = local._lookup(*astuple(key), target, context) if local is not None else None
        key = spelled
        if here is not None:
            return Answer(here, HERE)
        twin = unit_twin(key.shape)
        if twin is not None and self.holds(UNIT, key.op):
            found = self._lookup(key.op, key.operands, key.variant, twin, target, context)
            if found is not None and found.shape == twin:
                return Answer(found, UNIT)
        if entry is not None and entry.shape not in ("*", key.shape):
            return Answer(entry, SHAPE) if self.holds(SHAPE, key.op) else None
        found = self.predicted(key, target, context)
        if found is None and twin is not None and self.holds(UNIT, key.op):
            # predicted from the cells of the size-1 twin (``r5u`` from ``r5``), as a
            # measurement is read there: a prediction's cells are measured at one batch
            found = self.predicted(replace(key, shape=twin), target, context)
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
        word = self._word_crashes(key, target, context)
        if word is not None:
            return Answer(word[1], WORD, word[0])
        sign = self._word_crashes(key, target, context, _negative)
        if sign is not None:
            return Answer(sign[1], SIGN, sign[0])
        found = self._factor_crashes(key, target, context)
        if found is not None:
            return Answer(found, FACTOR)
        cause = self._contrast_crashes(key, target, context)
        if cause is not None:
            return Answer(cause[1], CONTRAST, cause[0])
        found = self._every_origin_crashes(key, target, context)
        if found is not None:
            return Answer(found, ORIGIN)
        found = self._operands_crash(key, target, context)
        if found is not None:
            return Answer(found, OPERANDS)
        found = self._variant_crashes(key, target, context)
        if found is not None:
            return Answer(found, VARIANT)
        found = self._op_crashes(key, target)
        if found is not None:
            return Answer(found, ALWAYS)
        found = self._rank_crashes(key, target)
        if found is not None:
            return Answer(found, RANK)
        wrong = self._interface_wrong(key, target, context)  # last: no crash reading holds
        return None if wrong is None else Answer(wrong[1], INTERFACE, wrong[0])

    def _rank_crashes(self, key: Key, target: int) -> Entry | None:
        """The crash every call measured at the key's shape class shows at the target, for
        one reason, where each of those calls was also measured converting at another shape
        class; None otherwise."""
        cells = [e for e in self.by_op.get(key.op, ()) if target in e.targets]
        here = [e for e in cells if e.shape == key.shape]
        if not here or here[0].outcome != CRASH:
            return None
        if len({(e.outcome, normalized(e.message)) for e in here}) != 1:
            return None
        converts = {
            (e.operands, e.variant, e.context)
            for e in cells
            if e.outcome == OK and e.shape not in ("*", key.shape)
        }
        if all((e.operands, e.variant, e.context) in converts for e in here):
            return here[0]
        return None

    def _op_crashes(self, key: Key, target: int) -> Entry | None:
        """The crash every call of the op measured at the target shows, for one reason,
        where ``ALWAYS_SUPPORT`` cells or more of two operand dtypes or more at two shape
        classes or more (a ``*`` entry holds several) were measured; None otherwise."""
        found = [e for e in self.by_op.get(key.op, ()) if target in e.targets]
        if len(found) < ALWAYS_SUPPORT or found[0].outcome != CRASH:
            return None
        if len({(e.outcome, normalized(e.message)) for e in found}) != 1:
            return None
        shapes = {e.shape for e in found}
        dtypes = {tuple(_dtypes_of(e.operands)) for e in found}
        if len(dtypes) < 2 or (len(shapes) < 2 and "*" not in shapes):
            return None
        return found[0]

    def _at_other_origins(self, key: Key, variant: str, target: int, context: str) -> list[Entry]:
        """The cells of ``variant`` measured at the key's shape class, target and context
        with the key's operand dtypes at other origins."""
        dtypes = _dtypes_of(key.operands)
        return [
            e
            for e in self.by_op.get(key.op, ())
            if e.variant == variant
            and e.context == context
            and target in e.targets
            and e.shape in ("*", key.shape)
            and e.operands != key.operands
            and _dtypes_of(e.operands) == dtypes
        ]

    def _every_origin_crashes(self, key: Key, target: int, context: str) -> Entry | None:
        """The crash every measured combination of operand origins with the key's dtypes
        shows for its call at its shape class and target, for one reason, where two
        combinations or more were measured and each of the key's operands was measured
        crashing with its origin in its place; None otherwise."""
        found = self._at_other_origins(key, key.variant, target, context)
        reasons = {(e.outcome, normalized(e.message)) for e in found}
        if len(reasons) != 1 or found[0].outcome != CRASH or len({e.operands for e in found}) < 2:
            return None
        if needs_fp16_input(found[0]) and "float16:in" not in key.operands.split(","):
            return None  # every measured combination had a float16 input; the key has none
        # each operand's origin measured crashing in its place: a crash of int8 or float16
        # partition inputs says nothing of the same dtype made in the program beside another
        seen = {(i, o) for e in found for i, o in enumerate(e.operands.split(","))}
        mine = set(enumerate(key.operands.split(",")))
        return found[0] if mine <= seen else None

    def _operands_crash(self, key: Key, target: int, context: str) -> Entry | None:
        """The crash the base call measured with the key's operands (dtypes and origins)
        shows at its shape class and target, where the base call with the same dtypes at
        other origins converts there: the origins cause the crash, predicted for the key's
        other arguments as a changed argument's crash is (``_factor_crashes``)."""
        base = self.bases.get(key.op)
        if base is None or base == key.variant:
            return None
        crash = self._lookup(key.op, key.operands, base, key.shape, target, context)
        if crash is None or crash.outcome != CRASH or needs_fp16_input(crash):
            return None
        controls = self._at_other_origins(key, base, target, context)
        return crash if any(_converts(e) for e in controls) else None

    def _variant_crashes(self, key: Key, target: int, context: str) -> Entry | None:
        """The crash every cell of the key's call measured at its shape class and target
        with the same dtypes at other origins shows, for one reason, where the base call
        with the key's operands converts there: the call's arguments cause it, whatever
        the operands' origins (``_operands_crash`` read the other way)."""
        base = self.bases.get(key.op)
        if base is None or base == key.variant:
            return None
        control = self._lookup(key.op, key.operands, base, key.shape, target, context)
        if control is None or not _converts(control):
            return None
        found = self._at_other_origins(key, key.variant, target, context)
        reasons = {(e.outcome, normalized(e.message)) for e in found}
        if len(reasons) != 1 or found[0].outcome != CRASH or needs_fp16_input(found[0]):
            return None
        return found[0]

    def _interface_wrong(self, key: Key, target: int, context: str) -> tuple[str, Entry] | None:
        """(the dtype value, as ``dtype=float32``, and the wrong) every call measured at the
        target with the key's operands (dtypes and origins) and its dtype argument's value
        shows, one message exactly, at ``INTERFACE_SUPPORT`` cells or more of two variants
        or more; None otherwise (see ``INTERFACE``)."""
        names = self.dtype_args.get(key.op, ())
        chosen = {f: v for f, v in factors(key.variant).items() if f in names and v != "None"}
        if not chosen:
            return None
        found = [
            e
            for e in self.by_op.get(key.op, ())
            if target in e.targets
            and e.context == context
            and e.operands == key.operands
            and all(factors(e.variant).get(f) == v for f, v in chosen.items())
        ]
        if len(found) < INTERFACE_SUPPORT or len({e.variant for e in found}) < 2:
            return None
        if not all(interface_only(e) for e in found) or len({e.message for e in found}) != 1:
            return None
        return ";".join(f"{f}={v}" for f, v in chosen.items()), found[0]

    def changes(self, op: str, variant: str) -> dict[str, str]:
        """A variant's arguments less those at their schema default (export spells out
        ``padding=[0,0]`` before a given dilation: no change)."""
        defaults = self.arg_defaults.get(op, {})
        return {f: v for f, v in factors(variant).items() if defaults.get(f) != v}

    def _contrast_crashes(self, key: Key, target: int, context: str) -> tuple[str, Entry] | None:
        """The crash of a measured call whose one argument value the key has too, where a
        measured call differing from it in that value alone converts (``dilation=[2,2]``
        crashes where ``[1,1]`` with the same kernel and stride does not): the value
        causes the crash, predicted whatever the key's other arguments. At the key's
        operands, shape class, target and context only; (the value, as ``a4=[2,2]``, and
        the crash), or None."""
        mine = self.changes(key.op, key.variant)
        causes = self._causes(key.op, key.operands, key.shape, target, context, frozenset(mine))
        for name, value, entry in causes:
            if _same_value(mine.get(name), value):
                return f"{name}={value}", entry
        return None

    def _causes(
        self, op, operands, shape, target, context, given: frozenset[str]
    ) -> list[tuple[str, str, Entry]]:
        """(argument, value, crash) for each crash a single argument value explains at a
        shape class among calls changing only ``given`` arguments (see
        :meth:`_contrast_crashes`), worked out once per cell group."""
        memo = ("causes", op, operands, shape, target, context, given)
        if memo not in self._free:
            cells = [
                (e, self.changes(op, e.variant))
                for e in self.by_op.get(op, ())
                if e.operands == operands
                and e.context == context
                and target in e.targets
                and e.shape in ("*", shape)
            ]
            self._free[memo] = _single_causes(cells, given)
        return self._free[memo]

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
        if control is None or control.outcome == CRASH:
            return None  # a base call that crashes is no control for what a change causes
        if control.outcome == MIXED and not _converts(control):
            return None  # "2 ok; 1 edge" converts every time: a control, as an ok one is
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

    def _word_crashes(
        self, key: Key, target: int, context: str, kind: Callable[[str], str | None] = _word
    ) -> tuple[str, Entry] | None:
        """(argument=word, crash) where the key gives a string argument a word that crashes
        the op for one reason in every cell measured with it and these operands at the
        target, ``WORD_SUPPORT`` cells or more at two shape classes or more, while at one of
        those shape classes a cell with another value of the argument converts and no cell
        without the word crashes for that reason (the word is the cause, not the op or the
        rank): a converter that refuses a mode (``circular``) refuses it at a rank and
        beside values it was never measured with. The crash cited is the one measured at
        the key's shape class where there is one. ``kind`` says which values are alike: a
        word is its own kind; ``_negative`` makes every list holding a negative one (SIGN)."""
        for name, value in self.changes(key.op, key.variant).items():
            mine = kind(value)
            if mine is None:
                continue
            cells, others = [], []
            for e in self.by_op.get(key.op, ()):
                if e.operands == key.operands and e.context == context and target in e.targets:
                    # an argument left out is at its default, never the word (``changes``)
                    theirs = factors(e.variant).get(name)
                    (cells if theirs is not None and kind(theirs) == mine else others).append(e)
            reasons = {(e.outcome, normalized(e.message)) for e in cells}
            shapes = {e.shape for e in cells}
            if len(cells) < WORD_SUPPORT or len(shapes) < 2 or len(reasons) != 1:
                continue
            ((outcome, reason),) = reasons
            if outcome != CRASH or any(normalized(e.message) == reason for e in others):
                continue
            if any(e.outcome == OK and e.shape in shapes for e in others):
                twin = unit_twin(key.shape)
                cells.sort(key=lambda e: (e.shape != key.shape, e.shape != twin))
                return f"{name}={value}", cells[0]
        return None

    def converting_values(self, key: Key, name: str, target: int, context: str) -> list[str]:
        """The other values of argument ``name`` measured converting with the key's operands
        at the target, at the key's shape class (or every shape, or its size-1 twin)."""
        shapes = {key.shape, "*", unit_twin(key.shape)}
        found = {
            factors(e.variant).get(name, self.arg_defaults.get(key.op, {}).get(name, ""))
            for e in self.by_op.get(key.op, ())
            if e.outcome == OK
            and e.operands == key.operands
            and e.context == context
            and target in e.targets
            and e.shape in shapes
        }
        mine = factors(key.variant).get(name)
        return sorted(v for v in found if v and v != mine and v != "None")

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
        """Whether every variant measured on the op's data has one outcome, for one reason:
        float32 inputs, or for an op of integer data (``x & 0xFF``) the inputs its base call
        was measured with."""
        if op not in self._free:
            reference = self._float32(op) or self._base_inputs(op)
            variants = {e.variant for e in reference}
            reasons = {(e.outcome, normalized(e.message)) for e in reference}
            self._free[op] = len(variants) > 1 and len(reasons) == 1
        return self._free[op]

    def shape_free(self, op: str) -> bool:
        """Whether the op's base call converts and computes right at every shape class
        measured, at three ranks or more (right but for extreme values counts: a float16
        overflow on the sweep's largest values is the values', met more often by more
        elements): then what a dtype or an argument does, measured at one shape, is taken
        for every shape. Where the base call itself fails (a pool without stride), it is no
        control for the other cases, and they answer only for their own shape."""
        key = ("shape", op)
        if key not in self._free:
            base = [e for e in self._float32(op) if e.variant == self.bases.get(op)]
            self._free[key] = bool(base) and all(_converts(e) for e in base)
            shapes = {e.shape for e in base}  # "*": agreeing classes of enough ranks
            self._free[key] &= "*" in shapes or len(ranks_of(shapes)) >= FOLD_RANKS
        return self._free[key]

    def _base_inputs(self, op: str) -> list[Entry]:
        """The context-free entries of the inputs the op's base call takes (all inputs,
        measured with the base variant): of those spellings, the one measured with the most
        variants, as the base call's own dtype is (the dtype axis measures each other dtype
        at the base variant alone)."""
        base = self.bases.get(op)
        variants: dict[str, set[str]] = {}
        for e in self.by_op.get(op, ()):
            if not e.context and e.operands:
                variants.setdefault(e.operands, set()).add(e.variant)
        spellings = [
            (len(found), operands)
            for operands, found in variants.items()
            if base in found and all(o.endswith(":in") for o in operands.split(","))
        ]
        if not spellings:
            return []
        chosen = max(spellings)[1]
        return [e for e in self.by_op.get(op, ()) if not e.context and e.operands == chosen]

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
        members = self._by_class(op).get((operands, class_variant(variant), context), ())
        found = [
            entry
            for other in sorted(members)
            if other != variant
            for entry in [self._lookup_exact(op, operands, other, shape, target, context)]
            if entry is not None
        ]
        reasons = {(e.outcome, normalized(e.message)) for e in found}
        return found[0] if len(reasons) == 1 else None

    def _by_class(self, op: str) -> dict[tuple[str, str, str], set[str]]:
        """(operands, class variant, context) -> the variants of ``op`` measured in it:
        built per op, so a lint makes the entries of its program's ops only."""
        memo = ("by_class", op)
        if memo not in self._free:
            index: dict[tuple[str, str, str], set[str]] = {}
            for e in self.by_op.get(op, ()):
                group = (e.operands, class_variant(e.variant), e.context)
                index.setdefault(group, set()).add(e.variant)
            self._free[memo] = index
        return self._free[memo]

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


def _converts(entry: Entry) -> bool:
    """Whether a cell converts and computes right, but for extreme values (``edge``): alone,
    or as every case of a mixed cell ("2 ok; 1 edge")."""
    if entry.outcome == MIXED:
        return all(part.split()[-1] in (OK, EDGE) for part in entry.message.split("; "))
    return entry.outcome in (OK, EDGE)


def _dtype_kind(dtype: str) -> str:
    """float, int or bool: what a value of the dtype means to a model."""
    return "float" if "float" in dtype else dtype if dtype == "bool" else "int"


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
    kinds = [_dtype_kind(o.partition(":")[0]) for o in bad.operands.split(",")]
    for e in others:
        theirs = [o.partition(":")[2] for o in e.operands.split(",")]
        # the same kind of values: float16 ids, integer activations or bool bits are another
        # model (a float's truth is a bool: ``(x != 0).any(dim)`` for ``x.any(dim)``)
        theirs_kinds = [_dtype_kind(o.partition(":")[0]) for o in e.operands.split(",")]
        swaps = zip(kinds, theirs_kinds, strict=False)
        same_kind = all(a == b or {a, b} == {"float", "bool"} for a, b in swaps)
        if (
            e.variant == bad.variant
            and theirs == origins
            and e.operands != bad.operands
            and same_kind
        ):
            dtypes = ", ".join(o.partition(":")[0] for o in e.operands.split(","))
            yield f"operands of dtype {dtypes} (measured ok)"
            break
    near = factors(key.variant if key is not None else bad.variant)
    names = table.arg_names.get(bad.op)
    others.sort(
        key=lambda e: (_distance(near, factors(e.variant)), _empty_values(e.variant, names))
    )
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
    rows = OpRows(data["ops"], data["messages"])  # entries made per op as asked
    entries, by_op = Entries(rows), ByOp(rows)
    return BehaviourTable(
        data["measured_with"],
        data.get("sweep", {}),
        entries,
        path,
        by_op,
        dict(data.get("bases", {})),
        dict(data.get("arg_names", {})),
        dict(data.get("arg_defaults", {})),
        dict(data.get("dtype_args", {})),
        refused=load_gates(path) if gated else None,
        measured_decomposed=frozenset(data.get("measured_decomposed", ())),
    )


# ``check --measure`` measures the keys the shipped table lacks on this machine's stack and
# keeps them per stack version in the user's cache: a second run reads them back, torch-free.
_LOCAL: dict[str, Any] = {"on": False, "generation": 0}


def use_local_measurements(on: bool) -> None:
    """Whether CML801 also answers from what ``--measure`` measured on this machine (read
    again: its ``generation`` tells answers worked out before from those after)."""
    generation = _LOCAL.get("generation", 0) + 1
    _LOCAL.clear()
    _LOCAL.update(on=on, generation=generation)


def local_table() -> BehaviourTable | None:
    """The table of this machine's measurements, when in use and present."""
    if not _LOCAL.get("on"):
        return None
    if "table" not in _LOCAL:
        path = cache_folder() / TABLE_PATH.name
        _LOCAL["table"] = load_table(path) if path.exists() else None
    return _LOCAL["table"]
