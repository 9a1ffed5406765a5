"""The sweep's cases: for each op in scope, a legal base call and its variations.

What is sampled (the full product of dtypes x ranks x argument values x operand forms x
targets is millions of lowerings; this keeps every dimension, one factor at a time, and
crosses the factors the catalogue shows interacting):

- *dtype*: the base call with its float operands in each of the nine dtypes (a pointwise
  op on integers, ``bitwise_and``, with its integer operands: they are its data);
- *variant*: each non-tensor argument, and each optional tensor, at up to eight other legal
  values of distinct value classes (the classes the table keys on), in float32 and float16:
  special scalars (0, 1, -1, negative, non-integral, past float16's range, tiny, past 2048,
  infinite), scale factors making fractional and whole output sizes, equations with
  ellipsis and repeated labels; a dtype, bool or string argument takes every value it has
  (a string: the words torch's error lists, and ATen's enum words the op takes);
- *defaults as floats*: every number argument whose default is an integer given as that
  float, as a module passes it (``nn.Hardtanh``: ``min_val=-1.0, max_val=1.0``), in
  float32 and float16;
- *pairs*: every two non-tensor arguments changed together (their first three other values
  and three more legal alone, crossed, legal calls only, four per pair; and a fixed-length
  list whose dims differ, ``[1, 0]`` or ``[2, 1]``, beside each other argument's values,
  one legal call each: an ``output_padding`` of ``[1, 0]`` is legal only beside a
  stride), in float32;
- *shape*: ranks 0, 1, 3 (with a size-1 dim), 3 (with an empty dim), 4 (with a size-1
  dim) and 5 besides the base call's, in float32, each with every value of a string
  argument too (required arguments are searched again for each shape);
- *rank*: each operand alone at rank 1 and rank 0 (a vector into ``matmul``); for an op
  whose operands' ranks choose its path together (``RANK_PAIRED``), every two ranks 1-4;
- *inside*: the base call per dtype with its outputs consumed inside the partition (keyed
  with context ``inside``): a crash the returned output alone causes is the boundary's;
- *origin*: the first operand made inside the program (a cast or comparison in Core ML)
  for every dtype but float32 and bfloat16 (which fails on any path), and the second
  operand a constant (a buffer Core ML owns, seeded random values, never one repeated
  value) in every dtype but bfloat16; for an op of three operands or more, every operand
  after the first constant too (``clamp(x, lo, hi)`` with both bounds buffers); and an
  index or mask after the first operand made inside the program (a gather of an
  ``argmax``, a ``masked_fill`` of a comparison), beside the base call and each variant;
- *mixed*: one of the first two float operands an int64 (made inside, or an input) or a
  bool made inside, beside float32 ones, as torch promotes them (``torch.outer`` of an int64
  ``arange`` and float frequencies);
- *scalar*: a pointwise op's operands after the first given as Python numbers of each
  class (``x * 0.5``, ``ids * 1000``: export keeps the number in the Tensor slot), on
  float32 and int32 inputs, on int64 inputs and int64 made inside Core ML, and on float16
  made inside;
- *context*: in float16, the op's output feeding ``linear``, ``addmm`` and ``matmul`` with
  constant weights (the base call and every variant);
- *model*: the op as a model calls it (``model_call``): its activation batched with a
  batch of one (``1xCxHxW``, ``1xCxDxHxW`` for a 3-d pool or convolution, ``1xSxH`` or
  ``1xCxHxW`` for an op whose base call is a matrix; then again with a batch of two, so a
  layer on a batch keys its constant weights without a size-1 dim; the base call's own
  argument values where they are legal there), its parameters (operands the schema
  names ``weight``, ``bias``, ``running_mean``, ``running_var``, optional ones included)
  constants with seeded non-uniform values; that call, each argument alone and every two
  together around it, in float32. A model's key has constant weights (and, at a batch of
  one, a size-1 dim), so the one-factor cases around a base call of inputs only never
  answer it (a transposed
  convolution's ``output_padding`` with constant weights and a bias, a 3-d pool's
  ``ceil_mode`` on a batched input);
- *module*: the calls ``torch.nn``'s own layers make (``modules.py``: each layer at its
  defaults, each flag flipped, every two together, a few common settings changed, on a
  batch of one and of two), with exactly the values export records and parameters and
  buffers constant;
- *target*: every case at iOS15 and iOS18; the runner adds iOS16 and iOS17 where the two
  disagree.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from coreml_lint.measured.case import Case
from coreml_lint.measured.key import IMMATERIAL
from coreml_lint.measured.values import RANK_PAIRED, value_text
from coreml_lint.sweep.build import CONSUMED
from coreml_lint.sweep.legal import (
    SIDE,
    Call,
    find_base,
    find_call,
    is_legal,
    layout_of,
    overflows,
    with_given,
    with_layout,
)
from coreml_lint.sweep.modules import module_calls
from coreml_lint.sweep.schema import EQUATIONS, Arg, OpInfo, mixed_lists, string_options
from coreml_lint.sweep.seeds import RECURRENT, seeded_base
from coreml_lint.sweep.values import (
    DTYPES,
    FLOATS,
    case_id,
    decode,
    encode_float,
    ordered_bounds,
)

SHAPES = ((), (5,), (3, 1, 4), (2, 0, 3), (2, 3, 1, 4), (2, 1, 3, 2, 2))
CONTEXTS = ("linear", "addmm", "matmul")
TARGETS = (15, 18)
# Values of distinct classes per argument: every class the lists below reach (a bool, an
# enum-like string and a dtype take every value they have).
VARIANTS_PER_ARG = 8
# A float or Scalar argument takes more: magnitude one is a class of its own (``values.ONE``),
# the classes it had before are still measured, and a float's negative whole class too.
VARIANTS_PER_KIND = {"float": 10, "scalar": 15}
# Special scalars: 0, 1, -1, negative, non-integral (both signs), past float16's range,
# below its smallest normal, past 2048 (not exact in float16), infinities.
INT_VARIANTS = [0, 1, -1, 2, -2, SIDE, 3001, -3001]
# float32's lowest (-3.4e38) is the masking sentinel models write (``finfo.min``): upstream
# coremltools fixed it becoming NaN in float16 after 9.0 (docs/upstream-mined.md).
F32_MIN = -3.4028234663852886e38
FLOAT_VARIANTS = [0.0, 1.0, -1.0, 0.5, -0.5, 1e-6, 7e4, F32_MIN, 3.0, -3.0]
FLOAT_VARIANTS += [float("inf"), float("-inf")]
SCALAR_VARIANTS = [2, 0.5, -0.5, 3.0, 1, -1, 3001, 7e4, 1.0, -3.0, F32_MIN, float("-inf"), 0]
# Zero and minus one as floats too (``x < 0.0``, ``masked_fill(m, -1.0)``), each a class of
# its own; before 37 the cap of ten classes per argument stopped before -inf and 0.
SCALAR_VARIANTS += [0.0, -1.0]
# Variants of these argument kinds are measured on integer operands too (a rounding mode
# on int64 kept its dtype only after coremltools 9.0: docs/upstream-mined.md); so is every
# dtype argument, also where the op takes integers only with one (``mean(x, dtype=float32)``
# of int64, whose result came back int32 in ExecuTorch's operator suite).
INTEGER_VARIANTS = ("str", "bool")
# Scale factors of a fractional output size (4 * 1.3 = 5.2) and of a whole one (4 * 1.5),
# above and below one.
FLOATS_VARIANTS = (2.0, 1.3, 0.5, 1.5, 0.7)  # 1.3 first: its class's riskier value


# Which generator made an op's cases: bumped when it makes other cases, so that a sweep
# folder generated before generates those ops again (the ids of unchanged cases are the
# same, so what is measured stays measured). 2: constants of every dtype (origin axis);
# 3: the model axis; 4: dtype arguments on int64 operands; 5: scale factors whose output
# size is whole (``values.scaled_text``), ATen's string words, legal pair values, the base
# call's values at the model shape; 6: a rank-4 shape, string values at every shape; 7:
# required string values at every shape too; 8: the model axis at a batch of two as well;
# 9: ``[3] * n`` for a fixed-length int list (a kernel of 3); 10: lists whose dims differ
# (``schema.mixed_lists``: ``[1, 0]``, ``[2, 1]``), alone and beside each other argument;
# 11: every operand after the first constant, for an op of three or more (origin axis);
# 12: a ``min`` and a ``max`` tensor that never cross (``BOUNDS``); 13: a pointwise op on
# integers (``bitwise_and``) with its operands as data, so dtypes, origins and shapes vary
# them (``_integer_data``); 14: a pointwise op's later operands as Python numbers
# (``_scalar_operands``); 15: those on small integers where typical ones overflow in eager;
# 16: every number argument of an integer default given as that float (``_float_defaults``);
# 17: a pair illegal on its own completed by the first value of a third argument that makes
# it legal (``output_padding`` and ``padding`` of 1 beside a stride of 2: a decoder's layer);
# and a call whose outputs pass ``legal.OUTPUT_LIMIT`` elements is not legal; 18: index
# operands constant (origin axis), negative pads (``[-1, -1]``: a crop), and for an op with no
# legal call, layouts whose last dim holds coordinates (``legal.coordinate_layouts``); 19: a
# negative pad of every dim too (a crop of a rank-2 call keyed beside a 4-element one), and
# attention with fewer key/value heads than query heads (``_grouped_heads``); 20: the model
# axis's call with its index operands constants too (``_index_buffers``: an ``index_add`` of
# a constant index at a batch of two, keyed as a model's node at rank 3); 21: a gather's or
# scatter's index narrower than its input off ``dim`` (``_along_dim``), and index operands
# shaped like the first operand reshaped with it on the shape axis (a gather at rank 3); 22:
# narrowed on ``dim`` too, a scatter's ``src`` left wider than its index, and both as the
# model axis calls them; 23: a Python integer past int32 as a pointwise op's later operand
# (``-2**32 + 1``, keyed ``-big64``); 24: floats of magnitude one keyed apart (``values.ONE``):
# 1.0 and -1.0 among the Scalar values and a pointwise op's number operands, and a float
# argument's whole class measured at 3.0 as well as at one; 25: the model axis tries the base
# call's shape behind a batch where ``N+2`` dims are not legal (``col2im``'s blocks, 3-d
# batched: an overlap-add of patches; reflection and replication pads of 1 and 3 dims); 26: a
# float or Scalar argument's negative whole class at -3.0 (``nn.Hardtanh(-2.0, 2.0)``: -1.0 is
# keyed apart now); 27: one of the first two float operands an int64 (made in Core ML or an
# input) or a bool made in Core ML beside float32 ones (``_mixed_dtypes``: an int64
# ``arange`` into ``outer``); 28: a ``RANK_PAIRED`` op's operands at every two ranks 1-4
# (``_rank_pairs``: a vector times a batch of matrices), and the module axis: the calls
# ``torch.nn``'s own layers make (``modules.module_calls``: ``InstanceNorm2d`` with its
# running statistics, on a 4-d input, at its default ``eps``); 29: the module axis with
# every two flags flipped together, a layer named for its dims at its batched rank first;
# 30: a resize's output size of each ratio class (``_output_sizes``), keyed by the ratio;
# 31: those calls without changing the base call's batch in place (30 had made the base
# call and its cases a batch of one); 32: output sizes one more than the input's and half
# of it (a nearest resize is keyed by whether its sizes are coprime); 33: seeded base calls
# for ops the generic search finds none for (``seeds.py``: ``index_fill`` with a 0-d value,
# ``affine_grid``, a recurrent layer's op as ``torch.nn`` calls it), and
# the module axis with recurrent layers and their zero initial states; a dtype argument on
# int32, int64 and bool data beside each other argument (``_dtype_on_integers``); 34: a
# time-major recurrent layer takes its batch second (33 had measured ``nn.LSTM()`` at
# sequence lengths 1 and 2), and a recurrent layer's settings beside each flag (two
# stacked bidirectional layers); 35: a recurrent op with only its first output read
# (``out, _ = self.lstm(x)``), which keys ``outputs=partly-unused``; 36: an index or mask
# operand after the first made inside Core ML (``_indices_made``: a gather of an ``argmax``,
# a ``masked_fill`` of a comparison), beside the base call and each variant; 37: a Scalar
# argument takes every class of ``SCALAR_VARIANTS`` (36 stopped at ten: ``x < 0`` was never
# measured), with 0.0 and -1.0 of their own, and a pointwise op's number operand 0.0.
GENERATOR = 37

# The model axis's batches: one (a size-1 dim in the key), and two, where a layer's call
# keys as its base call's rank without a size-1 dim but with constant weights (a transposed
# convolution's ``output_padding`` on a batch of four was answered by no measured cell).
MODEL_BATCHES = (1, 2)


def op_cases(info: OpInfo) -> tuple[list[Case], str | None]:
    """Every case of one op (at every sweep target), or why there is none."""
    if info.name in RECURRENT:
        cases = _at_targets(list(_recurrent_cases(info)))
        return cases, None if cases else "no torch.nn layer call recorded (modules.py)"
    found = seeded_base(info)
    seeded = found is not None
    found = found or find_base(info)
    if found is None:
        return [], "no legal call found by the generic search or a seed"
    base, shape, _ = found
    base = _integer_data(info, base)
    cases: list[dict[str, Any]] = [_case(info, base, "base", "float32")]
    dtype_calls = dict(_dtypes(info, base))
    cases += [_case(info, c, "dtype", d) for d, c in dtype_calls.items() if d != "float32"]
    variants = list(_variants(info, base))
    float16 = "float16" in dtype_calls
    for label, call in variants:
        cases.append(_case(info, call, "variant", label))
        made = _indices_made(call)
        if made is not None:
            cases.append(_case(info, made, "variant", f"{label}, {MADE_WORDS}"))
        if float16 and _has_float(call):
            half = _retyped(info, call, "float16", origin="op")
            if half is not None:
                cases.append(_case(info, half, "variant", f"{label} float16"))
        kind = _kind_of(info, label)
        if kind == "dtype" or (kind in INTEGER_VARIANTS and "int64" in dtype_calls):
            wide = _retyped(info, call, "int64")
            if wide is not None:
                cases.append(_case(info, wide, "variant", f"{label} int64"))
    cases += [_case(info, c, "variant", label) for label, c in _grouped_heads(info, base)]
    cases += [_case(info, c, "variant", label) for label, c in _along_dim(info, base)]
    for label, call in _float_defaults(info, base):
        cases.append(_case(info, call, "variant", label))
        half = _retyped(info, call, "float16", origin="op") if float16 else None
        if half is not None:
            cases.append(_case(info, half, "variant", f"{label} float16"))
    cases += [_case(info, c, "pairs", label) for label, c in _pairs(info, base)]
    cases += [_case(info, c, "pairs", label) for label, c in _dtype_on_integers(info, base)]
    if not seeded:  # a seed's operands are shaped for each other: not one at a time
        cases += [_case(info, c, "shape", s) for s, c in _shapes(info, base, shape)]
        cases += [_case(info, c, "rank", s) for s, c in _edge_ranks(info, base)]
    cases += [_case(info, c, "origin", s) for s, c in _origins(info, base, dtype_calls)]
    cases += [_case(info, c, "scalar", s) for s, c in _scalar_operands(info, dtype_calls)]
    cases += [_case(info, c, "mixed", s) for s, c in _mixed_dtypes(info, base)]
    for dtype, call in dtype_calls.items():  # the output consumed inside the partition
        if dtype not in ("bfloat16", "int8", "uint8"):
            cases.append(_case(info, call, CONSUMED, f"{dtype} consumed", CONSUMED))
    if float16:
        numeric = [(label, c) for label, c in variants if _numeric(info, label)]
        for label, call in [("base", base), *numeric]:
            half = _retyped(info, call, "float16", origin="op")
            for context in CONTEXTS if half is not None else ():
                if _fits_context(info, half, context):
                    cases.append(_case(info, half, "context", f"{label} -> {context}", context))
    for batch in MODEL_BATCHES:
        model = model_call(info, base, shape, batch)
        if model is None:
            continue
        name = "model" if batch == 1 else f"model batch {batch}"
        cases.append(_case(info, model, "model", name))
        buffered = _index_buffers(model)  # as a model holds them
        if buffered is not None:
            cases.append(_case(info, buffered, "model", f"{name} index operands constant"))
        cases += [_case(info, c, "model", f"{name} {label}") for label, c in _variants(info, model)]
        cases += [_case(info, c, "model", f"{name} {label}") for label, c in _pairs(info, model)]
        cases += [
            _case(info, c, "model", f"{name} {label}") for label, c in _along_dim(info, model)
        ]
    cases += [_case(info, c, "variant", label) for label, c in _output_sizes(info, base)]
    cases += [_case(info, c, "module", label) for label, c in module_calls(info)]
    return _at_targets(cases), None


def _recurrent_cases(info: OpInfo) -> Iterator[Case]:
    """A recurrent layer's op as ``torch.nn``'s layers call it (each flag, every two, two
    layers, a projection; a batch of one and of two), in float32 and in float16 made in
    the program, reading all its outputs and (as a model mostly does) its first alone.
    No other axis: eager torch does not check the weights against the sizes and flags,
    so a changed ``num_layers`` or ``bidirectional`` beside the same weights reads past
    them (and can end the process) rather than fail."""
    several = len(info.op._schema.returns) > 1
    for label, call in module_calls(info):
        made = [_case(info, call, "module", label)]
        half = _retyped(info, call, "float16", origin="op")
        if half is not None:
            made.append(_case(info, half, "module", f"{label} float16"))
        for case in made:
            yield case
            if several:  # ``out, _ = self.lstm(x)``: the states unread, keyed apart
                yield dict(case, returns=[0], label=f"{case['label']}, output only")


def base_case(info: OpInfo, target: int = TARGETS[0]) -> Case | None:
    """The op's base call at one target, or None where neither a seed nor the generic
    search finds a legal call (``edges.py`` asks ExecuTorch's edge verifier about ops the
    sweep leaves out)."""
    found = seeded_base(info) or find_base(info)
    if found is None:
        return None
    cases = _at_targets([_case(info, found[0], "base", "float32")], (target,))
    return cases[0] if cases else None


def _case(info: OpInfo, call: Call, axis: str, label: str, context: str = "") -> Case:
    return {
        "op": info.name,
        "args": call.args,
        "kwargs": call.kwargs,
        "tensors": ordered_bounds(
            call.tensors, [a.name for a in info.args], call.args, call.kwargs
        ),
        "context": context,
        "axis": axis,
        "label": label,
    }


def _at_targets(cases: list[dict[str, Any]], targets: tuple[int, ...] = TARGETS) -> list[dict]:
    out, seen = [], set()
    for case in cases:
        for target in targets:
            made = dict(case, target=target)
            made["id"] = case_id(made)
            if made["id"] not in seen:
                seen.add(made["id"])
                out.append(made)
    return out


def _integer_data(info: OpInfo, base: Call) -> Call:
    """A pointwise op whose base call takes integers (``bitwise_and``) with its int64
    operands as data (typical values) rather than indices, when that is legal: its values
    are the op's data, so the axes that vary data (dtypes, origins, shapes) apply to them."""
    if _data_operands(base) or not torch_tag(info.op, "pointwise"):
        return base
    made = base.copy()
    for spec in made.tensors:
        if spec["dtype"] == "int64" and spec.get("values") == "index":
            spec["values"] = "typical"
    return made if made.tensors != base.tensors and is_legal(info, made) else base


def torch_tag(op: Any, tag: str) -> bool:
    """Whether the ATen op carries torch's tag ``tag`` (``pointwise``)."""
    import torch

    return getattr(torch.Tag, tag) in getattr(op, "tags", ())


def _data_operands(call: Call) -> list[int]:
    """The operands a retyping changes: the float32 ones, or, in a call of integer data
    (``bitwise_and`` on int64), its typical-valued integer operands."""
    floats = [i for i, t in enumerate(call.tensors) if t["dtype"] == "float32"]
    if floats:
        return floats
    return [
        i
        for i, t in enumerate(call.tensors)
        if t.get("values") == "typical" and t["dtype"] not in (*FLOATS, "bool")
    ]


def _by_data_dtype(dtype_calls: dict[str, Call]) -> dict[str, Call]:
    """``_dtypes``'s calls by the dtype their data operands have: their labels, except for
    the base call of integer data (``bitwise_and`` on int64), labelled float32."""
    found = {}
    for label, call in dtype_calls.items():
        operands = _data_operands(call) if label == "float32" else []
        found[call.tensors[operands[0]]["dtype"] if operands else label] = call
    return found


def _has_float(call: Call) -> bool:
    return any(t["dtype"] in FLOATS and t.get("values") == "typical" for t in call.tensors)


def _retyped(
    info: OpInfo, call: Call, dtype: str, only_first: bool = False, origin: str = "in"
) -> Call | None:
    """The call with its float (typical-valued) operands in ``dtype``, if torch accepts it.
    ``origin="op"`` makes them inside the program, as a float16 model does (a float16
    *input* fails below iOS16 whatever the op, which would hide what the op does)."""
    made = call.copy()
    floats = _data_operands(made)
    if not floats or made.tensors[floats[0]]["dtype"] == dtype:
        return None
    chosen = floats[:1] if only_first else floats
    for i in chosen:
        made.tensors[i]["dtype"] = dtype
        if dtype not in FLOATS:
            made.tensors[i]["values"] = "typical"
        if made.tensors[i].get("origin", "in") == "in":
            made.tensors[i]["origin"] = origin
    if not is_legal(info, made):
        return None
    if dtype not in FLOATS and dtype != "bool" and overflows(info, made):
        for i in chosen:
            made.tensors[i]["values"] = "small"
    return made


def _dtypes(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    yield "float32", base
    for dtype in DTYPES[1:]:
        made = _retyped(info, base, dtype) or _retyped(info, base, dtype, only_first=True)
        if made is not None:
            yield dtype, made


# ---------------------------------------------------------------- variants
def _variants(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """Each argument alone at other legal values of distinct classes."""
    import torch

    given = _named(info, base)
    shape = _first_shape(base)
    for arg in info.args:
        if arg.kind in ("fixed", "unknown", "tensor", "tensors", "tensors?"):
            continue
        if arg.kind == "tensor?":
            yield from _optional_tensors(info, base, arg)
            continue
        current = given.get(arg.name, arg.default)
        seen = {_class(current, shape)}
        made = 0
        for value in _variant_values(info, base, arg, given):
            if _class(value, shape) in seen or _equal_default(arg, value):
                continue
            call = with_given(info, base, {**given, arg.name: value})
            if arg.kind == "dtype" and value is not None:
                _cast_range(call, value["dtype"])
            with torch.no_grad():
                if not is_legal(info, call):
                    continue
            seen.add(_class(value, shape))
            made += 1
            yield f"{arg.name}={_class(value, shape)}", call
            cap = VARIANTS_PER_KIND.get(arg.kind, VARIANTS_PER_ARG)
            if arg.kind not in ("dtype", "bool", "str") and made >= cap:
                break


# The pairwise axis: for each two non-tensor arguments, their first values of distinct
# classes crossed (legal calls only, a few per pair). One factor at a time never reaches a
# value legal only beside another non-default one (a padding bounded by the kernel size, a
# ceil_mode that matters only with a stride), nor a crash two changes cause together.
PAIR_VALUES = 3
PAIRS_PER_ARGS = 4
MIXED_PAIRS = 1  # legal calls per list of differing dims and other argument


def _pairs(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """Two arguments changed together, each to one of its first ``PAIR_VALUES`` other
    values (distinct key texts, legal or not alone: the pair is searched), then its first
    ``PAIR_VALUES`` values legal alone (a pad mode pairs with a pad narrower than the
    input, where the first values are odd-length pads), at most ``PAIRS_PER_ARGS`` legal
    calls per pair of arguments; and each list whose dims differ (``mixed_lists``) beside
    each value of the other argument, ``MIXED_PAIRS`` legal calls each."""
    import torch

    given = _named(info, base)
    shape = _first_shape(base)
    options = {}
    for arg in info.args:
        if arg.kind in ("fixed", "unknown", "tensor", "tensors", "tensors?", "tensor?", "dtype"):
            continue
        current = _class(given.get(arg.name, arg.default), shape)
        leading, legal, seen = [], [], {current}
        for value in _variant_values(info, base, arg, given):
            if _class(value, shape) in seen or _equal_default(arg, value):
                continue
            seen.add(_class(value, shape))
            if len(leading) < PAIR_VALUES:
                leading.append(value)
            elif len(legal) < PAIR_VALUES:
                with torch.no_grad():
                    if is_legal(info, with_given(info, base, {**given, arg.name: value})):
                        legal.append(value)
            else:
                break
        values = leading + legal
        if values:
            options[arg.name] = values
    names = list(options)
    mixed = {  # beyond the values already crossed
        a.name: [m for m in mixed_lists(a.length or 0) if m not in options[a.name]]
        for a in info.args
        if a.name in options
    }

    def crossed(first: str, a_values: list, second: str, b_values: list, cap: int) -> Iterator:
        made = 0
        for a in a_values:
            for b in b_values:
                if made >= cap:
                    return
                pair = {first: a, second: b}
                label = f"{first}={_class(a, shape)} {second}={_class(b, shape)}"
                call = with_given(info, base, {**given, **pair})
                with torch.no_grad():
                    if not is_legal(info, call):
                        third = _completed(pair)
                        if third is None:
                            continue
                        name, value = third
                        call = with_given(info, base, {**given, **pair, name: value})
                        label += f" with {name}={_class(value, shape)}"
                made += 1
                yield label, call

    def _completed(pair: dict[str, Any]) -> tuple[str, Any] | None:
        """The first other argument value that makes an illegal pair legal: an
        ``output_padding`` of 1 beside a padding of 1 needs a stride of 2."""
        for name in names:
            if name in pair:
                continue
            for value in options[name]:
                if is_legal(info, with_given(info, base, {**given, **pair, name: value})):
                    return name, value
        return None

    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            yield from crossed(first, options[first], second, options[second], PAIRS_PER_ARGS)
            # A list whose dims differ, beside each other argument (one legal call each
            # way): an ``output_padding`` of ``[1, 0]`` is legal only beside a stride.
            for value in mixed[first]:
                yield from crossed(first, [value], second, options[second], MIXED_PAIRS)
            for value in mixed[second]:
                yield from crossed(first, options[first], second, [value], MIXED_PAIRS)


# A dtype argument on integer data, alone and beside each other argument's first values:
# ``ids.sum(0, dtype=torch.float32)`` of int32 ids came back int32, measured until then on
# int64 data and ``dim=None`` only. The pairwise axis leaves dtype arguments out (each takes
# nine values), so these are its dtype pairs, at the dtypes models ask for.
DTYPE_ARG_VALUES = ("float32", "float16", "int32", "int64")
INTEGER_DATA = ("int32", "int64", "bool")
DTYPE_PARTNERS = 2  # values of each other argument, beside each dtype value


def _dtype_on_integers(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """The call with a dtype argument at each of ``DTYPE_ARG_VALUES`` on each of
    ``INTEGER_DATA``, alone and beside each other non-tensor argument at its first
    ``DTYPE_PARTNERS`` other legal values."""
    dtype_args = [a for a in info.args if a.kind == "dtype"]
    if not dtype_args:
        return
    given = _named(info, base)
    shape = _first_shape(base)
    partners: list[tuple[str, Any]] = [("", None)]
    for arg in info.args:
        if arg.kind in ("fixed", "unknown", "dtype") or arg.is_tensor or arg.name in IMMATERIAL:
            continue
        seen = {_class(given.get(arg.name, arg.default), shape)}
        for value in _variant_values(info, base, arg, given):
            if len(seen) > DTYPE_PARTNERS:
                break
            if _class(value, shape) in seen or _equal_default(arg, value):
                continue
            if is_legal(info, with_given(info, base, {**given, arg.name: value})):
                seen.add(_class(value, shape))
                partners.append((arg.name, value))
    for arg in dtype_args:
        for dtype in DTYPE_ARG_VALUES:
            for name, value in partners:
                changed = {arg.name: {"dtype": dtype}, **({name: value} if name else {})}
                call = with_given(info, base, {**given, **changed})
                label = " ".join(f"{k}={_class(v, shape)}" for k, v in changed.items())
                for data in INTEGER_DATA:
                    made = _retyped(info, call, data)
                    if made is not None:
                        yield f"{label} {data}", made


def _grouped_heads(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """Attention whose key and value have half the query's heads with ``enable_gqa=True``
    (a Llama or Qwen decoder's grouped-query attention), at a batch of one and of two,
    alone and beside each other bool argument set (``is_causal``). At equal heads the flag
    changes nothing, so no variant reaches what it is for; ``values.grouped_text`` keys the
    two apart."""
    import torch

    if not any(a.name == "enable_gqa" for a in info.args) or len(base.tensors) < 3:
        return
    given = _named(info, base)
    flags = [a.name for a in info.args if a.kind == "bool" and a.name != "enable_gqa"]
    for batch in MODEL_BATCHES:
        query = [batch, 4, SIDE, SIDE]  # (batch, heads, tokens, features)
        grouped = base.copy()
        for i, spec in enumerate(grouped.tensors[:3]):  # the query, the key, the value
            spec["shape"] = query if i == 0 else [batch, 2, SIDE, SIDE]
        for label, extra in [("", {}), *((f" {f}=True", {f: True}) for f in flags)]:
            call = with_given(info, grouped, {**given, "enable_gqa": True, **extra})
            with torch.no_grad():
                if is_legal(info, call):
                    yield f"grouped heads batch {batch}{label}", call


def _along_dim(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """A gather or scatter whose index is half the input's size on a dim: on ``dim`` (K of
    N, the ordinary call), and on another dim (the x and y of keypoints holding a score
    too); a scatter's ``src`` narrowed with the index, and kept at the input's shape (wider
    than the index: only its index-shaped corner is written); each with the index a
    partition input and a constant (a model's buffer). torch takes all of these,
    coremltools' converters want some equal, and the base call (every operand one cube)
    reaches none; ``values.along_dim_texts`` keys them apart."""
    positional = [a for a in info.args if not a.kwarg_only]
    slots = {a.name: v for a, v in zip(positional, base.args, strict=False)}
    index, dim, src = slots.get("index"), slots.get("dim"), slots.get("src")
    if not (_ref(index) and isinstance(dim, int)) or isinstance(dim, bool):
        return
    shape = base.tensors[index["t"]]["shape"]
    if len(shape) < 2 or len(shape) != len(base.tensors[0]["shape"]):
        return
    along = dim % len(shape)
    other = max(d for d in range(len(shape)) if d != along)
    for axis, where in ((along, "on dim"), (other, "off dim")):
        narrow = list(shape)
        narrow[axis] = max(1, shape[axis] // 2)
        made = base.copy()
        made.tensors[index["t"]]["shape"] = narrow
        calls = [(f"index narrower {where}", made)]
        if _ref(src):
            both = made.copy()
            both.tensors[src["t"]]["shape"] = list(narrow)
            calls = [
                (f"index narrower {where}, src wider", made),
                (f"index and src narrower {where}", both),
            ]
        for label, call in calls:
            for name, found in ((label, call), (f"{label}, index constant", _index_buffers(call))):
                if found is not None and is_legal(info, found):
                    yield name, found


# A resize's output size per dim of each class ``values.sized_text`` keys: a 4-wide dim the
# same, doubled, 1.5 times (6: sharing a divisor), one more (5: coprime), halved (a divisor)
# and shrunk by one (3: coprime); 1 is among the generic values.
SIZE_CLASSES = (
    ("same", lambda d: d),
    ("up", lambda d: 2 * d),
    ("up(frac)", lambda d: d + d // 2),
    ("up(frac) by one", lambda d: d + 1),
    ("down", lambda d: d // 2),
    ("down(frac)", lambda d: d - 1),
)


def _output_sizes(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """A resize (``upsample_*``) given an output size of each ratio class in place of its
    scale factors, with each ``align_corners``, on the base call's input and on a batch of
    one: a model's ``F.interpolate(x, size=...)`` is keyed by the ratio (a nearest one by
    whether its sizes are coprime), and the generic search only tried sizes below the
    input's."""
    names = [a.name for a in info.args]
    if "upsample" not in info.name or len(names) < 2 or names[1] != "output_size":
        return
    spatial = int(re.search(r"(\d)d", info.name).group(1))  # upsample_bilinear2d_aa -> 2
    named = _named(info, base)
    scales = {n: None for n in names[2:] if n.startswith("scale")}
    corners = (False, True) if "align_corners" in names else (None,)
    for word, size_of in SIZE_CLASSES:
        for flag in corners:
            for batch in (None, 1):
                made = base.copy()
                if batch is not None:
                    made.tensors[0]["shape"][0] = batch
                dims = made.tensors[0]["shape"][-spatial:]
                given = {**named, **scales, "output_size": [size_of(d) for d in dims]}
                if flag is not None:
                    given["align_corners"] = flag
                call = with_given(info, made, given)
                if is_legal(info, call):
                    extra = f" align_corners={flag}" * bool(flag) + " batch 1" * bool(batch)
                    yield f"output_size={word}{extra}", call


def _ref(value: Any) -> bool:
    """Whether an encoded argument names a tensor operand (``{"t": 1}``)."""
    return isinstance(value, dict) and isinstance(value.get("t"), int)


def _cast_range(call: Call, dtype: str) -> None:
    """Float operands of a call that makes ``dtype`` hold values that dtype can hold."""
    for spec in call.tensors:
        if spec["dtype"] in FLOATS and spec.get("values") == "typical":
            spec["range"] = dtype


def _named(info: OpInfo, call: Call) -> dict[str, Any]:
    positional = [a for a in info.args if not a.kwarg_only]
    found = {a.name: v for a, v in zip(positional, call.args, strict=False) if not a.is_tensor}
    found.update({k: v for k, v in call.kwargs.items()})
    return {k: v for k, v in found.items() if not _tensor_arg(info, k)}


def _tensor_arg(info: OpInfo, name: str) -> bool:
    return any(a.name == name and a.is_tensor for a in info.args)


def _class(value: Any, shape: tuple[Any, ...] | None = None) -> str:
    """A value's key text (``values.value_text``), scale factors against ``shape``."""
    if isinstance(value, dict) and "dtype" in value:
        return value["dtype"]
    return value_text(decode(value, []), shape)


def _first_shape(call: Call) -> tuple[Any, ...] | None:
    return tuple(call.tensors[0]["shape"]) if call.tensors else None


def _float_defaults(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """The call as a module spells it: every number argument whose schema default is an
    integer given as that float (``nn.Hardtanh`` passes ``min_val=-1.0, max_val=1.0``,
    ``nn.ELU`` ``alpha=1.0``). A float reaches another conversion than the integer the
    base call leaves out (``elu``'s default alpha crashes in coremltools, 1.0 converts),
    and no one-value-at-a-time variant gives them all."""
    numbers = [
        a
        for a in info.args
        if a.kind == "scalar" and type(a.default) is int and a.name not in _named(info, base)
    ]
    if not numbers:
        return
    given = {**_named(info, base), **{a.name: float(a.default) for a in numbers}}
    call = with_given(info, base, given)
    if is_legal(info, call):
        yield "defaults as floats", call


def _equal_default(arg: Arg, value: Any) -> bool:
    if not arg.has_default:
        return False
    return decode(value, []) == arg.default and type(decode(value, [])) is type(arg.default)


def _variant_values(info: OpInfo, base: Call, arg: Arg, given: dict[str, Any]) -> list[Any]:
    shape = tuple(base.tensors[0]["shape"]) if base.tensors else (SIDE, SIDE)
    kind = arg.kind
    values: list[Any]
    if kind == "bool":
        values = [True, False]
    elif kind == "int":
        values = list(INT_VARIANTS)
    elif kind == "ints":
        from coreml_lint.sweep.schema import ints_candidates

        values = [[2] * (arg.length or max(len(shape) - 2, 1)), *ints_candidates(arg, shape)]
        if not arg.length:  # a negative pad crops (a U-Net's skip connection), one dim,
            spatial = max(len(shape) - 2, 1)  # the spatial dims or every dim (any int list
            # takes them; the legal-call check drops them where they mean nothing)
            values += [[-1, -1], [-1] * 2 * spatial, [-1] * 2 * len(shape)]
    elif kind == "float":
        values = [encode_float(v) for v in FLOAT_VARIANTS]
    elif kind == "floats":
        n = max(len(shape) - 2, 1)
        values = [[f] * n for f in FLOATS_VARIANTS]
    elif kind == "scalar":
        values = [encode_float(v) if isinstance(v, float) else v for v in SCALAR_VARIANTS]
    elif kind == "dtype":
        values = [{"dtype": d} for d in DTYPES]
    elif kind == "str":
        values = _string_values(info, base, arg, given)
    else:
        values = []
    if arg.optional:
        values = [None, *values]
    return values


def _string_values(info: OpInfo, base: Call, arg: Arg, given: dict[str, Any]) -> list[str]:
    if arg.name == "equation":
        return [e for n in EQUATIONS.values() for e in n]
    from coreml_lint.sweep.values import make_tensor

    tensors = [make_tensor(t, i) for i, t in enumerate(base.tensors)]
    args = [decode(a, tensors) for a in base.args]
    kwargs = {k: decode(v, tensors) for k, v in base.kwargs.items()}
    positional = [a for a in info.args if not a.kwarg_only]
    index = next((i for i, a in enumerate(positional) if a.name == arg.name), None)
    if index is not None:
        args = args[:index]
    kwargs.pop(arg.name, None)
    return string_options(info.op, args, kwargs, arg)


def _optional_tensors(info: OpInfo, base: Call, arg: Arg) -> Iterator[tuple[str, Call]]:
    from coreml_lint.sweep.legal import tensor_spec

    slots = [a for a in info.args if a.is_tensor]
    index = slots.index(arg)
    layout = layout_of(info, base)
    main = tuple(base.tensors[0]["shape"]) if base.tensors else (SIDE, SIDE)
    options = [tensor_spec(main), tensor_spec(main, "bool"), tensor_spec((main or (SIDE,))[-1:])]
    options += [tensor_spec((SIDE,)), tensor_spec(())]
    seen: set[str] = set()
    for spec in options if layout[index] is None else [None]:
        made = list(layout)
        made[index] = spec
        call = with_layout(info, base, made)
        dtype = spec["dtype"] if spec else "None"
        if dtype in seen or not is_legal(info, call):
            continue
        seen.add(dtype)
        yield f"{arg.name}={dtype if spec else 'None'}", call


# ---------------------------------------------------------------- shapes, origins, contexts
def _edge_ranks(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """Each operand alone at rank 1 (a vector into ``matmul``, a 1-D weight) and at rank 0,
    the others as in the base call: the ranks an op accepts at its edges."""
    typical = [i for i, t in enumerate(base.tensors) if t.get("values") == "typical"]
    if len(typical) < 2:
        return
    for i in typical:
        for shape in ((SIDE,), ()):
            made = base.copy()
            made.tensors[i]["shape"] = list(shape)
            if list(shape) != base.tensors[i]["shape"] and is_legal(info, made):
                yield f"operand {i} at rank {len(shape)}", made
    if info.edge_name in RANK_PAIRED:
        yield from _rank_pairs(info, base, typical[:2])


def _rank_pairs(info: OpInfo, base: Call, pair: list[int]) -> Iterator[tuple[str, Call]]:
    """Every two ranks 1-4 of the first two operands that differ, beyond a vector beside a
    matrix (above): the ranks that choose a ``RANK_PAIRED`` op's path together (a vector
    times a batch of matrices). Batch dims are 2, the contracted dim ``SIDE``."""
    for first, second in itertools.product(range(1, 5), repeat=2):
        if first == second or {first, second} == {1, 2}:
            continue
        made = base.copy()
        made.tensors[pair[0]]["shape"] = _ranked(first, (3, SIDE))
        made.tensors[pair[1]]["shape"] = _ranked(second, (SIDE, 5))
        if is_legal(info, made):
            yield f"operands at ranks {first} and {second}", made


def _ranked(rank: int, matrix: tuple[int, int]) -> list[int]:
    """A matrix operand at ``rank``: the contracted dim (``SIDE``) alone at rank 1, else
    the matrix behind batch dims of 2."""
    return [SIDE] if rank == 1 else [2] * (rank - 2) + list(matrix)


def _shapes(info: OpInfo, base: Call, cube: tuple[int, ...]) -> Iterator[tuple[str, Call]]:
    """The base call with every operand shaped like the first one reshaped (ranks 0-5, a
    size-1 dim, an empty dim); required arguments are searched again for the shape. Each
    value of a string argument is measured at every shape too: a mode is a converter's
    branch, and its path can depend on the rank (a circular pad of a 4-d input)."""
    if not base.tensors:
        return
    required = {a.name for a in info.args if not a.is_tensor and not a.has_default}
    named = _named(info, base)
    given = {k: v for k, v in named.items() if k not in required}
    layout = layout_of(info, base)
    words = [  # a required one too (a rounding mode): its first legal word is searched
        (arg.name, value)
        for arg in info.args
        if arg.kind == "str"
        for value in _variant_values(info, base, arg, named)
        if value is not None and not _equal_default(arg, value)
    ]
    for shape in SHAPES:
        made = [_reshaped(spec, cube, shape) for spec in layout]
        name = "x".join(map(str, shape)) or "scalar"
        call = find_call(info, shape, made, given, cap=24)
        if call is not None and call.tensors[0]["shape"] != list(cube):
            yield name, call
        for arg, value in words:
            call = find_call(info, shape, made, {**given, arg: value}, cap=24)
            if call is not None and call.tensors[0]["shape"] != list(cube):
                yield f"{name} {arg}={value}", call


def _reshaped(spec: Any, cube: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    if spec is None:
        return None
    if isinstance(spec, list):
        return [_reshaped(s, cube, shape) for s in spec]
    if tuple(spec["shape"]) == cube and spec.get("values") in ("typical", "index"):
        return dict(spec, shape=list(shape))
    return spec


def _origins(info: OpInfo, base: Call, dtype_calls: dict[str, Call]) -> Iterator[tuple[str, Call]]:
    dtype_calls = _by_data_dtype(dtype_calls)
    for dtype, call in dtype_calls.items():
        if dtype in ("float32", "bfloat16") or not call.tensors:
            continue
        made = call.copy()
        made.tensors[0]["origin"] = "op"
        yield f"{dtype} made in Core ML", made
    for dtype, call in dtype_calls.items():  # a constant of each dtype (a bool buffer can
        if dtype == "bfloat16":  # take another conversion path than a bool input)
            continue
        operands = [
            i
            for i, t in enumerate(call.tensors)
            if (t.get("values") == "typical" if dtype == "float32" else t["dtype"] == dtype)
        ]
        name = "" if dtype == "float32" else f" {dtype}"
        if len(operands) >= 2:  # the second: an op on constants alone is folded away
            made = call.copy()
            made.tensors[operands[1]]["origin"] = "const"
            yield f"second operand{name} constant", made
        if len(operands) >= 3:  # every one after the first: a layer's bounds, scales, masks
            made = call.copy()
            for i in operands[1:]:
                made.tensors[i]["origin"] = "const"
            yield f"operands after the first{name} constant", made
    buffered = _index_buffers(dtype_calls["float32"]) if "float32" in dtype_calls else None
    if buffered is not None:
        yield "index operands constant", buffered
    made = _indices_made(dtype_calls["float32"]) if "float32" in dtype_calls else None
    if made is not None:
        yield MADE_WORDS, made


# An integer or bool operand beside float ones, as torch promotes it (``x * mask`` of a
# comparison, ``torch.outer(positions, inv_freq)`` of an int64 ``arange``): Core ML makes the
# integers int32, and a converter may pair them with the fp32 operand unpromoted (``matmul``:
# "y has dtype fp32 whereas x has dtype int32"). (dtype, origin) of the one operand changed.
MIXED_OPERANDS = (("int64", "op"), ("int64", "in"), ("bool", "op"))


def _mixed_dtypes(info: OpInfo, base: Call) -> Iterator[tuple[str, Call]]:
    """The base call with one of its first two float operands an integer or a bool, made
    inside Core ML (an ``arange``, a comparison) or a partition input, the others float32."""
    floats = [
        i
        for i, t in enumerate(base.tensors)
        if t["dtype"] == "float32" and t.get("values") == "typical"
    ]
    if len(floats) < 2:
        return
    for i in floats[:2]:
        for dtype, origin in MIXED_OPERANDS:
            made = base.copy()
            made.tensors[i] = dict(made.tensors[i], dtype=dtype, values="typical", origin=origin)
            if not is_legal(info, made):
                continue
            if dtype != "bool" and overflows(info, made):
                made.tensors[i]["values"] = "small"
            where = " made in Core ML" if origin == "op" else ""
            yield f"operand {i} {dtype}{where} beside float32", made


# An index or a mask after the first operand as a model mostly makes it: in the program
# (``x.gather(1, scores.argmax(1, keepdim=True))``, ``x.masked_fill(x < 0, 0.0)``), so
# Core ML receives the op that makes it, not an input; keyed ``int64:op``, ``bool:op``.
MADE_WORDS = "index and mask operands made in Core ML"


def _indices_made(call: Call) -> Call | None:
    """The call with its index and bool operands after the first made inside the program
    (a cast of an int32 input, a comparison of a float one), or None when it has none."""
    later = [
        i
        for i, t in enumerate(call.tensors)
        if i > 0
        and t.get("origin", "in") == "in"
        and (t.get("values") == "index" or t["dtype"] == "bool")
    ]
    return _with_origin(call, later, "op")


def _index_buffers(call: Call) -> Call | None:
    """The call with its index operands constants (a relative position index, the columns
    an ``index_add`` writes: buffers of the model), or None when it has none."""
    indices = [i for i, t in enumerate(call.tensors) if t.get("values") == "index"]
    return _with_origin(call, indices, "const")


def _with_origin(call: Call, operands: list[int], origin: str) -> Call | None:
    """The call with those operands given ``origin``, or None when there are none."""
    if not operands:
        return None
    made = call.copy()
    for i in operands:
        made.tensors[i] = dict(made.tensors[i], origin=origin)
    return made


# The numbers a pointwise op's later operand takes as a Python number (``x * 0.5``,
# ``ids * 1000``, ``x % 7``), one per class the keys record, and the dtypes (and origins)
# of the first operand beside them.
# ``-2**32 + 1`` is a padding constant attention code writes (``ones_like(s) * (-2**32 + 1)``):
# past int32, which Core ML's integers are, it wraps to 1 whatever the operand.
SCALAR_OPERANDS = (2, 7, -1, 0, 1000, 10_000_000, 0.5, -0.5, 3.0, 1.0, -1.0, 7e4, -(2**32) + 1, 0.0)
SCALAR_OPERAND_ORIGINS = {  # dtype -> where its first operand comes from
    "float32": ("in",),
    "float16": ("op",),  # a float16 input fails below iOS16 whatever the op
    "int64": ("in", "op"),
    "int32": ("in",),
}


def _scalar_operands(info: OpInfo, dtype_calls: dict[str, Call]) -> Iterator[tuple[str, Call]]:
    """A pointwise op's operands after the first, each given as a Python number: export
    keeps the number in the Tensor slot (``mul.Tensor(x, 1000)``) and ExecuTorch makes it a
    constant of the promoted dtype, a call no tensor operand measures; in float32, in
    float16 and int64 made inside Core ML (``(x.abs() * 1000).long() * 10_000_000``), and
    on int64 and int32 inputs."""
    if not torch_tag(info.op, "pointwise"):
        return
    calls = _by_data_dtype(dtype_calls)
    for dtype, origins in SCALAR_OPERAND_ORIGINS.items():
        call = calls.get(dtype)
        if call is None:
            continue
        for origin in origins:
            for index in _later_operands(call):
                for value in SCALAR_OPERANDS:
                    made = _with_number(call, index, value, origin)
                    if dtype not in FLOATS and overflows(info, made):
                        made.tensors[0]["values"] = "small"  # eager's overflow is not the op
                    if is_legal(info, made):
                        where = " made in Core ML" if origin == "op" else ""
                        label = f"{dtype}{where} operand {index} = {value_text(value)}"
                        yield label, made


def _later_operands(call: Call) -> list[int]:
    """The tensor operands after the first that an argument holds alone (not in a list)."""
    alone = [
        a["t"] for a in [*call.args, *call.kwargs.values()] if isinstance(a, dict) and "t" in a
    ]
    return sorted(i for i in alone if i > 0 and call.tensors[i].get("values") == "typical")


def _with_number(call: Call, index: int, value: Any, origin: str) -> Call:
    """The call with tensor operand ``index`` (one an argument holds alone:
    ``_later_operands``) replaced by the number ``value``, the other operands renumbered,
    its first operand made with ``origin``."""
    made = call.copy()

    def put(argument: Any) -> Any:
        if isinstance(argument, dict) and "t" in argument:
            t = argument["t"]
            return encode_float(value) if t == index else {"t": t - (t > index)}
        if isinstance(argument, list):
            return [put(a) for a in argument]
        return argument

    made.args = [put(a) for a in made.args]
    made.kwargs = {k: put(v) for k, v in made.kwargs.items()}
    del made.tensors[index]
    if made.tensors and made.tensors[0].get("origin", "in") == "in":
        made.tensors[0]["origin"] = origin
    return made


# ---------------------------------------------------------------- the model axis
# Schema names of a layer's parameters: what a model holds as constants Core ML owns.
PARAMETERS = frozenset({"weight", "bias", "running_mean", "running_var"})


def model_call(info: OpInfo, base: Call, cube: tuple[int, ...], batch: int = 1) -> Call | None:
    """The base call as a model makes it: the activation (each operand shaped like the base
    call's first) at a model's shape with a batch of ``batch``, parameters constant
    (optional ones given), the base call's own required values where legal (a pad of
    ``[4, 4]``), else searched again; None when no such call is legal or it is the base
    call itself."""
    slots = [a for a in info.args if a.is_tensor]
    layout = layout_of(info, base)
    if len(cube) < 2 or len(layout) != len(slots):
        return None
    required = {a.name for a in info.args if not a.is_tensor and not a.has_default}
    named = _named(info, base)
    given = {k: v for k, v in named.items() if k not in required}
    for shape in _model_shapes(info, cube, batch):
        made = [
            _constant(spec) if arg.name in PARAMETERS else _reshaped(spec, cube, shape)
            for arg, spec in zip(slots, layout, strict=True)
        ]
        for options in _parameter_options(slots, made, shape):
            # The base call's own values first (a pad of [4, 4], not the first legal []).
            call = find_call(info, shape, options, named, cap=1) or find_call(
                info, shape, options, given, cap=24
            )
            if call is not None:
                return call if call.tensors != base.tensors else None
    return None


def _model_shapes(info: OpInfo, cube: tuple[int, ...], batch: int) -> list[tuple[int, ...]]:
    """Where a model's activation is batched: ``N+2`` dims for an op of ``int[N]`` windows
    (an unbatched base call gains its batch), then the base call's shape behind a batch
    (``col2im``'s blocks, ``(C*kh*kw, L)``, batched are 3-d, not 4); else the base call's
    rank with the batch; a matrix base call tries a sequence, then an image."""
    windows = [a.length for a in info.args if a.kind == "ints" and a.length]
    if windows:
        return [(batch, *(SIDE,) * (windows[0] + 1)), (batch, *cube)]
    if len(cube) >= 3:
        return [(batch, *cube[1:])]
    return [(batch, SIDE, SIDE), (batch, SIDE, SIDE, SIDE)]


def _constant(spec: Any) -> Any:
    """A parameter slot's operand as a constant (an optional one left out stays out here:
    ``_parameter_options`` fills it in)."""
    if isinstance(spec, dict):
        return dict(spec, origin="const") if spec.get("values") == "typical" else spec
    return spec


def _parameter_options(
    slots: list[Any], made: list[Any], shape: tuple[int, ...]
) -> Iterator[list[Any]]:
    """The layout with the optional parameters given (a channel vector, then the last
    dims), then without them."""
    from coreml_lint.sweep.legal import tensor_spec

    empty = [
        i
        for i, (arg, spec) in enumerate(zip(slots, made, strict=True))
        if spec is None and arg.kind == "tensor?" and arg.name in PARAMETERS
    ]
    if empty:
        for form in ((SIDE,), shape[-1:], shape[1:]):
            spec = dict(tensor_spec(form), origin="const")
            yield [spec if i in empty else s for i, s in enumerate(made)]
    yield made


def _kind_of(info: OpInfo, label: str) -> str | None:
    name = label.split("=")[0]
    return next((a.kind for a in info.args if a.name == name), None)


def _numeric(info: OpInfo, label: str) -> bool:
    """A variant setting a float or Scalar argument: a constant coremltools may keep in
    float32 next to float16 values (the contexts are measured for these)."""
    name = label.split("=")[0]
    return any(a.name == name and a.kind in ("float", "scalar") for a in info.args)


def _fits_context(info: OpInfo, call: Call, context: str) -> bool:
    """Whether the op's (first) output can feed ``context`` with a 4-wide weight."""
    import torch

    from coreml_lint.sweep.legal import run_eager
    from coreml_lint.sweep.values import flat_outputs

    try:
        with torch.no_grad():
            out = flat_outputs(run_eager(info.op, call))[0]
    except Exception:
        return False
    if not out.is_floating_point() or out.dim() == 0 or out.shape[-1] != SIDE:
        return False
    return out.dim() == 2 if context == "addmm" else True
