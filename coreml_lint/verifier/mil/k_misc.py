"""State, quantisation and attention kernels.

- ``read_state`` / ``coreml_update_state``: a Core ML state is a cell the program reads
  and overwrites; ``coreml_update_state`` returns the value it wrote.
- ``constexpr_*``: weight decompression; coremltools' ``materialized_val_inference`` is
  used (each decompress formula was read, and ``constexpr_affine_dequantize`` is tested
  against torch's ``dequantize_per_channel``).
- ``dequantize`` / ``quantize`` (iOS17 ops): affine (de)quantisation per tensor or axis.
- ``scaled_dot_product_attention`` (iOS18): coremltools' value_inference drops a mask that
  is not a compile-time constant (coremltools#2802); written here with the documented
  semantics: a bool mask keeps the True positions, a float mask is added.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, WRAPPED, kernel


@kernel("read_state", how=OWN)
def _read_state(op: Any, a: dict[str, Any]) -> np.ndarray:
    return a["input"].value


@kernel("coreml_update_state", how=OWN)
def _update_state(op: Any, a: dict[str, Any]) -> np.ndarray:
    a["state"].value = np.array(a["value"])
    return a["value"]


def materialise_constexpr(op: Any) -> tuple[np.ndarray, ...]:
    """The decompressed value(s) of a ``constexpr_*`` op (its inputs are constants)."""
    infer = getattr(op, "materialized_val_inference", None)
    if infer is None:
        raise NotImplementedError(op.op_type)
    value = infer()
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _along(param: Any, rank: int, axis: int | None) -> np.ndarray:
    param = np.asarray(param, dtype=np.float64)
    if param.ndim == 0 or axis is None:
        return param
    shape = [1] * rank
    shape[axis % rank] = -1
    return param.reshape(shape)


@kernel("dequantize", how=OWN)
def _dequantize(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["input"], dtype=np.float64)
    axis = None if a.get("axis") is None else int(a["axis"])
    zero = a.get("zero_point")
    if zero is not None:
        x = x - _along(zero, x.ndim, axis)
    return x * _along(a["scale"], x.ndim, axis)


@kernel("quantize", how=OWN)
def _quantize(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["input"], dtype=np.float64)
    axis = None if a.get("axis") is None else int(a["axis"])
    q = np.round(x / _along(a["scale"], x.ndim, axis))
    if a.get("zero_point") is not None:
        q = q + _along(a["zero_point"], x.ndim, axis)
    info = np.iinfo(np.int8 if a["output_dtype"] == "int8" else np.uint8)
    return np.clip(q, info.min, info.max)


def softmax_last(x: np.ndarray) -> np.ndarray:
    shifted = x - np.max(x, axis=-1, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=-1, keepdims=True)


@kernel("scaled_dot_product_attention", how=WRAPPED, note="value_inference drops a variable mask")
def _sdpa(op: Any, a: dict[str, Any]) -> np.ndarray:
    q, k, v = (np.asarray(a[n], dtype=np.float32) for n in ("query", "key", "value"))
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(np.float32(q.shape[-1]))
    mask = a.get("attn_mask")
    if mask is not None:
        mask = np.asarray(mask)
        is_bool = mask.dtype == np.bool_
        scores = np.where(mask, scores, -np.inf) if is_bool else scores + mask
    return np.matmul(softmax_last(scores), v)
