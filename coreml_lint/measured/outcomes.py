"""What a measured cell can say: crash, wrong, ok, unverified, cpu (never delegated) or
mixed (its cases disagree); which crashes are the program boundary's rather than the op's;
which wrong values depend on the operands' values (seen only in the float16 pass), and in
what range.
"""

from __future__ import annotations

import re

from coreml_lint.measured.entry import Entry
from coreml_lint.measured.values import describe_variant

CRASH, WRONG, OK, UNVERIFIED, CPU, MIXED = "crash", "wrong", "ok", "unverified", "cpu", "mixed"
EDGE = "edge"  # right but for extreme values: wrong only in the oracle's float16 pass
# A crash in ExecuTorch's edge verifier: the op is neither core ATen nor kept whole for Core
# ML (``searchsorted``, ``cumprod``), so no backend, the CPU included, gets to run it.
EDGE_REFUSAL = "is not in Core ATen opset"
# Crashes of a converter that takes a constant only when its values are all one value
# (coremltools' PReLU at rank 3 and 5): the sweep's constants hold different values, as a
# trained layer's do; an untrained one (``nn.PReLU`` starts at 0.25 everywhere) converts.
ALIKE_VALUES_ONLY = ("all the values of alpha are same",)

BAD = frozenset({CRASH, WRONG})

# A crash the single-op program meets only because it returns the op's output straight
# from the delegate (ExecuTorch's emitter refuses a zero-stride output, as an expand or a
# meshgrid makes): the node crashes a model only when its output leaves its partition too.
BOUNDARY_CRASH = "boundary-crash"

BOUNDARY_CRASH_MESSAGES = ("0 in strides is not supported",)

# An op Core ML turns into its input var itself (an alias, a squeeze that removes no dim):
# the single-op program returned its own input, which ExecuTorch never fills on device.
# The node returns wrong values only where its output leaves the partition and its input
# enters it from outside or leaves it too (made inside Core ML, the output is that op's var).
BOUNDARY = "boundary"

# What range of values a float16-pass divergence needs, by the verify oracle's kind word.
VALUE_RANGES = {
    "inf": "results pass float16's largest value (|x| > 65504) and become inf",
    "nan": "float16 intermediates overflow and the result becomes NaN",
    "integer": "integers pass 2048 (not exact in float16)",
    "values": "values are too small or too large for float16 (below 6e-8 or past 65504)",
}


def boundary_crash(message: str) -> bool:
    """Whether a crash message is the program boundary's, not the op's."""
    return any(m in message for m in BOUNDARY_CRASH_MESSAGES)


# A wrong outcome in the dtype the partition hands back (``arange(8, dtype=float32)`` is
# made int32): the values are whole, only the output's dtype differs from eager's, which
# matters where the node's output leaves its partition. Consumed inside Core ML, a float
# op may refuse the int32 operand instead (CML315) or promote it.
INTERFACE_DTYPE = "interface dtype"


def interface_only(entry: Entry) -> bool:
    """Whether a measured wrong outcome is the partition output's dtype alone."""
    return entry.outcome == WRONG and entry.message.startswith(INTERFACE_DTYPE)


# A crash of the sweep's partition having no inputs, below iOS18 (an op that reads only its
# operand's shape, ``x.new_ones(8)``, leaves the single-op partition input-less): the
# partition's, which CML602 reads off the program's own placement, not the op's.
INPUT_LESS = "Deploying a model with no inputs"


def partition_crash(entry: Entry) -> bool:
    """Whether a measured crash is the sweep partition's lack of inputs, not the op's."""
    return entry.outcome == CRASH and INPUT_LESS in entry.message


# A crash of a float16 partition input below iOS16 (the iOS15 model format has none): the
# input's, which CML106 reads off the program's placement. Where the sweep made one operand
# in the program and another an input, it says nothing of the same call with no float16
# input (``x.half() @ w`` with a float16 weight).
FP16_INPUT = "To use fp16 input"


def needs_fp16_input(entry: Entry) -> bool:
    """Whether a measured crash is a float16 partition input's refusal, not the op's."""
    return entry.outcome == CRASH and FP16_INPUT in entry.message


def the_nodes(entry: Entry, leaves: bool) -> bool:
    """Whether a measured outcome is a node's own: not the sweep partition's lack of inputs,
    and a wrong dtype handed back only where the node's output ``leaves`` its partition."""
    return not partition_crash(entry) and (leaves or not interface_only(entry))


INT32_WRAP = "semantic integer"  # the float32 pass's integers: int64 computed as int32
INT32_RANGE = "integer results pass int32's range (|x| > 2**31 - 1; int64 is int32 there)"


def value_dependent(entry: Entry) -> bool:
    """Wrong values the verify oracle saw only in its float16 pass (overflow, underflow,
    integers past 2048), or integers that wrap past int32's range beside an argument the
    sweep picked past it (Core ML computes int64 as int32: ``ids * 10_000_000`` wraps only
    where the ids pass 214): they depend on the values the operands hold, which the sweep
    picked at their limits; a model's own values may never reach them."""
    if entry.outcome != WRONG:
        return False
    if entry.message.startswith(("float16 ", AT_ZERO)):
        return True
    return entry.message.startswith(INT32_WRAP) and bool(_big_values(entry.variant))


# A wrong measured only where an input is exactly zero (typical floats hold -0.0 first):
# the sweep measured the call again with the zeros made 0.5 and it was right. ``atan2`` is
# 0 in Core ML at ``y = 0, x < 0`` (pi in torch): a model whose values are never exactly
# zero there computes right, so the finding is a warning naming the zero.
AT_ZERO = "wrong only where an input is exactly 0: "


BIG_CLASSES = frozenset({"big", "-big", "huge", "-huge", "tiny", "-tiny", "inf", "-inf"})


def value_range(entry: Entry, names: list[str] | None = None) -> str:
    """The values a value-dependent outcome needs, in words (``names``: the schema's)."""
    kind = entry.message.split()[1] if len(entry.message.split()) > 1 else ""
    found = VALUE_RANGES.get(kind, "values reach float16's limits")
    if entry.message.startswith(INT32_WRAP):
        found = INT32_RANGE
    if entry.message.startswith(AT_ZERO):
        found = "an input is exactly 0"
    big = _big_values(entry.variant)
    said = describe_variant(";".join(big), names)
    return found + (f" (measured with {said})" if big else "")


def _big_values(variant: str) -> list[str]:
    """A variant's arguments at a value past float16's or int32's reach."""
    return [p for p in variant.split(";") if p.partition("=")[2] in BIG_CLASSES]


def normalized(message: str) -> str:
    """A message with its numbers (and their signs: the judge's worst value is as often
    negative) and quoted names blanked: two outcomes are the same when these agree."""
    text = re.sub(r'"[^"]*"', '"…"', message)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"(?<![\w)\]])-(?=\d)", "", text)
    return re.sub(r"\d+", "N", text)
