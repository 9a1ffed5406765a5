"""MIL dtypes as numpy dtypes, and the float16 storage rule of the emulation.

Every float value is held as a float32 array. A var the program types ``fp16`` is rounded
to float16 and widened back, so each op computes in float32 from fp16-rounded inputs and its
fp16 outputs are rounded again: fp16 storage with fp32 arithmetic, the emulation
mil-oracle.md describes. Computing in numpy's own float16 would be slower (software
arithmetic) and would accumulate in fp16, which Core ML does not document either.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NUMPY = {
    "fp16": np.float32,  # stored widened; rounded by ``store``
    "fp32": np.float32,
    "fp64": np.float64,
    "int32": np.int32,
    "int64": np.int64,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "bool": np.bool_,
}
# Sub-byte integers (quantized weights of constexpr ops: int4 blockwise, uint4 LUT indices):
# coremltools holds them unpacked, one value per numpy element of the next wider type.
NUMPY.update({f"int{bits}": np.int8 for bits in range(1, 8)})
NUMPY.update({f"uint{bits}": np.uint8 for bits in range(1, 8)})


def mil_dtype(var: Any) -> str | None:
    """The MIL dtype name of a var ('fp16', 'int32', ...), or None for lists/strings."""
    from coremltools.converters.mil.mil import types

    dtype = var.dtype
    try:
        return types.builtin_to_string(dtype)
    except KeyError:
        return None


def round_fp16(value: np.ndarray) -> np.ndarray:
    """Round float values to float16 (overflow becomes inf, as in fp16) and widen back."""
    with np.errstate(all="ignore"):
        return np.asarray(value, dtype=np.float32).astype(np.float16).astype(np.float32)


def store(value: Any, dtype: str | None) -> Any:
    """A kernel result as the interpreter holds a var of MIL dtype ``dtype``."""
    if dtype is None or dtype == "string":
        return value
    target = NUMPY.get(dtype)
    if target is None:
        raise TypeError(f"unsupported MIL dtype {dtype}")
    with np.errstate(all="ignore"):
        array = np.asarray(value)
        if dtype == "fp16":
            return round_fp16(array)
        if array.dtype != target:
            if np.issubdtype(array.dtype, np.floating) and np.issubdtype(target, np.integer):
                array = _float_to_int(array, target)
            else:
                array = array.astype(target)
        return array


def _float_to_int(array: np.ndarray, target: Any) -> np.ndarray:
    """Truncation toward zero, as torch's ``.to(int)`` and coremltools' own cast fold do;
    NaN and out-of-range values are saturated rather than left to the C undefined cast."""
    info = np.iinfo(target)
    clean = np.nan_to_num(array, nan=0.0, posinf=info.max, neginf=info.min)
    return np.clip(np.trunc(clean), info.min, info.max).astype(target)
