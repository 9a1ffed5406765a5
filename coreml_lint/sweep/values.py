"""Case specs as JSON, and the tensors and arguments they stand for.

A case is plain JSON so the generator, the worker processes and the resumable result file
share one form. Tensor operands are described (shape, dtype, the values they hold, where
they come from) and referenced from the arguments as ``{"t": i}``; a dtype argument is
``{"dtype": "float16"}`` and a non-finite float ``{"float": "inf"}``.

Values are deterministic (seeded by the case id) and chosen to expose precision limits:

- *typical*: floats are normal samples rounded to float16 (so float16 rounding of the inputs
  cannot make a result differ), with ``-0.0`` first; integers reach past 2048 (``2049``,
  ``3001``, ``-2049``: not exact in float16) in int32 and int64 (*small* ones when those
  overflow the dtype in eager); bool tensors have a True in every row;
- *index*: integers in ``[0, side)``, for operands that index another one;
- *extreme* (a second run on the same lowering): NaN, +-inf, tiny (1e-7, a float16
  subnormal) and huge (6e4, near the float16 maximum) floats, int64 values past int32,
  int16 values whose products overflow int16, and an all-False (all-masked) bool row.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
FLOATS = ("float32", "float16", "bfloat16")
# int16 stays small on typical values (a product of two values past 2048 overflows int16,
# which eager wraps and Core ML's int32 does not: that is overflow, not the op); its values
# past 2048 are extreme ones.
INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-100, 100)}
EXTREME_INTS = {"int64": (2**40, -(2**40)), "int16": (3001, -3001)}
BIG_INTS = (2049, 3001, -2049, -3001)


# Tensor arguments that bound another from below and above (``clamp(x, min, max)``): a
# model's lower bound never exceeds its upper one, and where the two cross torch and Core
# ML answer differently by definition (torch returns ``max``), so random bounds made every
# such call "wrong". Cases hold them as models do: ``min`` at most 0, ``max`` at least 0.
BOUNDS = {"min": "-", "max": "+"}


def ordered_bounds(
    tensors: list[dict[str, Any]], names: list[str], args: list[Any], kwargs: dict[str, Any]
) -> list[dict[str, Any]]:
    """Copies of a call's tensor specs, its ``min`` and ``max`` operands (by the op's
    schema ``names``; positional ``args`` first) given one sign each, where both are
    tensors of the call."""
    given = {**dict(zip(names, args, strict=False)), **kwargs}
    refs = {name: given.get(name) for name in BOUNDS}
    copies = [dict(t) for t in tensors]
    if all(isinstance(r, dict) and isinstance(r.get("t"), int) for r in refs.values()):
        for name, ref in refs.items():
            copies[ref["t"]]["sign"] = BOUNDS[name]
    return copies


def case_id(spec: dict[str, Any]) -> str:
    """A stable id: the hash of everything that defines the case."""
    body = {k: v for k, v in spec.items() if k not in ("id", "axis", "label")}
    return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def make_tensor(spec: dict[str, Any], seed: int, extreme: bool = False) -> Any:
    """The tensor a spec describes (``values``: typical, index, mask; ``sign``: ``-`` or
    ``+`` for values of one sign, a lower and an upper bound that never cross)."""
    made = _make_tensor(spec, seed, extreme)
    sign = spec.get("sign")
    if sign is None or made.dtype.is_complex or str(made.dtype) == "torch.bool":
        return made
    if not made.dtype.is_signed:  # unsigned: a lower bound of 0 (at most 0), any upper
        return made * 0 if sign == "-" else made
    return -made.abs() if sign == "-" else made.abs()


def _make_tensor(spec: dict[str, Any], seed: int, extreme: bool = False) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    shape, dtype = list(spec["shape"]), spec["dtype"]
    kind = spec.get("values", "typical")
    if kind == "index":
        high = max(int(spec.get("high", 4)), 1)
        return torch.randint(0, high, shape, generator=gen).to(torch_dtype(dtype))
    if dtype == "bool":
        return _mask(shape, gen, extreme)
    if dtype in FLOATS:
        return _floats(shape, gen, extreme, spec.get("range")).to(torch_dtype(dtype))
    if kind == "small":
        return _small(shape, dtype, gen, extreme)
    return _ints(shape, dtype, gen, extreme and not spec.get("range"), spec.get("range"))


FLOAT_SCALE = {"uint8": 60.0, "int8": 40.0, "bool": 1.0}


def _floats(shape: list[int], gen: Any, extreme: bool, ranged: str | None = None) -> Any:
    """Normal floats on the float16 grid; with ``ranged`` (an integer dtype the op casts
    them to), spread over and clamped to that dtype's range (a cast of an out-of-range
    float is undefined in C++, and torch's answer is not a reference)."""
    import torch

    value = torch.randn(shape, generator=gen)
    if ranged is not None and ranged != "bool" and ranged not in FLOATS:
        low, high = INT_RANGES.get(ranged, (-3001, 3001))
        value = (value * FLOAT_SCALE.get(ranged, 1000.0)).clamp(low, high)
        value = value.abs() if low == 0 else value
    value = value.half().float()
    flat = value.view(-1)
    if flat.numel() >= 1:
        flat[0] = -0.0
    if extreme:
        special = [math.nan, math.inf, -math.inf, 1e-7, 6e4, -6e4]
        for i, v in enumerate(special[: max(flat.numel() - 1, 0)]):
            flat[1 + i] = v
    return value


def _ints(shape: list[int], dtype: str, gen: Any, extreme: bool, ranged: str | None) -> Any:
    import torch

    low, high = INT_RANGES.get(dtype, (-3001, 3001))
    if ranged is not None:
        low, high = (
            max(low, INT_RANGES.get(ranged, (low, high))[0]),
            min(high, INT_RANGES.get(ranged, (low, high))[1]),
        )
    value = torch.randint(low, high + 1, shape, generator=gen, dtype=torch.int64)
    flat = value.view(-1)
    specials = [v for v in BIG_INTS if low <= v <= high] or [high, low]
    if extreme and dtype in EXTREME_INTS:
        specials = list(EXTREME_INTS[dtype])
    for i, v in enumerate(specials[: flat.numel()]):
        flat[i] = v
    return value.to(torch_dtype(dtype))


def _small(shape: list[int], dtype: str, gen: Any, extreme: bool) -> Any:
    """Integers whose products stay in range (for an op whose typical values overflow the
    dtype in eager: torch wraps around, Core ML computes in int32; that is overflow)."""
    import torch

    low = 0 if dtype == "uint8" else -11
    value = torch.randint(low, 12, shape, generator=gen, dtype=torch.int64)
    if extreme:
        return _ints(shape, dtype, gen, False, None)
    return value.to(torch_dtype(dtype))


def _mask(shape: list[int], gen: Any, extreme: bool) -> Any:
    """Random with a True in every row; the extreme values add an all-False (all-masked)
    row and an all-True one."""
    import torch

    value = torch.randint(0, 2, shape, generator=gen).bool()
    if len(shape) >= 1 and shape[-1] >= 1:
        value[..., 0] = True
    if extreme and len(shape) >= 2 and shape[0] >= 2:
        value[0] = False
        value[1] = True
    return value


def decode(value: Any, tensors: list[Any]) -> Any:
    """An encoded argument with its tensors put in."""
    if isinstance(value, dict):
        if "t" in value:
            return tensors[value["t"]]
        if "dtype" in value:
            return torch_dtype(value["dtype"])
        if "float" in value:
            return float(value["float"])
        if "opaque" in value:
            return _opaque(value["opaque"], value.get("value"))
    if isinstance(value, list):
        return [decode(v, tensors) for v in value]
    return value


# The export schema's memory formats (a node read from a .pt2 keeps only the number).
MEMORY_FORMATS = {1: "contiguous_format", 2: "channels_last", 3: "channels_last_3d"}


def _opaque(kind: str, value: Any) -> Any:
    """A device, layout or memory format argument a program recorded: the CPU, strided,
    the format it names (what an exported program on this stack holds)."""
    import torch

    if kind == "as_device":
        return torch.device("cpu")
    if kind == "as_layout":
        return torch.strided
    if kind == "as_memory_format":
        return getattr(torch, MEMORY_FORMATS.get(value, "preserve_format"))
    raise ValueError(f"an argument of kind {kind} cannot be rebuilt")


def encode_float(value: float) -> Any:
    return value if math.isfinite(value) else {"float": str(value)}


def seed_of(case: dict[str, Any], index: int) -> int:
    return int(case.get("id", "0")[:8] or "0", 16) % (2**31) + index


def flat_outputs(value: Any) -> list[Any]:
    """An op's result as a flat list of its tensors (nested tuples and lists unpacked)."""
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in flat_outputs(item)]
    return [value]
