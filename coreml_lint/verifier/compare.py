"""How a Core ML value is judged against the eager value it should equal.

Both passes measure the same numbers; they differ in what they forgive.

*Semantic pass* (the partition converted at float32 compute precision): an element
diverges when ``|mil - eager| > SEMANTIC_RTOL * |eager| + SEMANTIC_ATOL * scale``, where
``scale`` is the largest finite ``|eager|`` of the tensor. Both tolerances are 1e-5:
float32 numpy and float32 torch differ by a few ulps per op (about 1e-7 relative), and what
this pass exists to catch is larger by orders of magnitude (tanh GELU run as exact GELU:
4.7e-4; ``inverse(x, epsilon=1e-4)``: 1e-1 at x = 1e-3). The scale term keeps values that
cancel to nearly zero (residual sums, ``x - mean``) from being judged by their own tiny
magnitude.

*Float16 pass* (the fp16 program ExecuTorch embeds, fp16 emulated): fp16 has an 11-bit
significand, so rounding alone is 4.9e-4 relative per op and grows with depth; what it
cannot excuse is judged: NaN or inf where eager is finite, any integer (or bool) that is not
exact, and a float error above ``FLOAT16_TOL`` (5e-2) of the tensor's scale, which rounding
does not reach in the suite's models (measured: at most a few 1e-3) but a wrong constant,
an overflowed intermediate or a lost mask does. The comparison is relative to what float16
can hold: an error no larger than float16's smallest normal number (``FLOAT16_TINY``,
6.1e-5) is not a divergence, because a value that small is subnormal or zero in fp16 (the
classifier logits of a randomly initialised conv net, 7.8e-9 in eager, are 0 in Core ML).
A value pushed out of fp16's range *inside* the model (a row scaled by 1e-7, then normalised)
still shows, at the output's scale.

A partition whose eager module itself computes in float16 (a ``.half()`` model) cannot be
held to float32 agreement: torch's half kernels round where MIL rounds differently (a fused
attention rounds once, its MIL decomposition after each op). Its semantic pass uses
``SEMANTIC_HALF_TOL`` (4e-3 of the scale, 8 fp16 ulps; measured differences stay below
4e-4) instead.

In both passes, positions where eager itself is NaN or inf are left out (nothing to agree
with), and an eager integer tensor must match exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SEMANTIC_RTOL = 1e-5
SEMANTIC_ATOL = 1e-5
FLOAT16_TOL = 5e-2
SEMANTIC_HALF_TOL = 4e-3
FLOAT16_TINY = 2.0**-14  # float16's smallest normal number
SEMANTIC = "semantic"
SEMANTIC_HALF = "semantic-half"  # the semantic pass of a partition that computes in fp16
FLOAT16 = "float16"


@dataclass
class Numbers:
    """What a comparison measured; ``kind`` is None when the values agree."""

    kind: str | None  # None | "values" | "nan" | "inf" | "integer" | "shape"
    max_abs: float = 0.0
    max_rel: float = 0.0  # max |mil - eager| / scale
    mismatched: int = 0
    nan: int = 0  # NaN in Core ML where eager is finite
    inf: int = 0  # inf in Core ML where eager is finite
    size: int = 0
    index: tuple[int, ...] | None = None  # one diverging element
    expected: float | None = None
    actual: float | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None

    def describe(self) -> str:
        where = ""
        if self.index is not None:
            where = f"; at {list(self.index)}: eager {self.expected:.6g}, Core ML {self.actual:.6g}"
        counts = f"{self.mismatched}/{self.size} elements"
        extra = f", {self.nan} NaN" if self.nan else ""
        extra += f", {self.inf} inf" if self.inf else ""
        return (
            f"max abs error {self.max_abs:.3g}, max error / scale {self.max_rel:.3g}, "
            f"{counts} differ{extra}{where}"
        )


def as_numpy(value: Any) -> np.ndarray:
    try:
        import torch

        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.dtype == torch.bfloat16:
                value = value.float()
            return value.numpy()
    except ImportError:  # pragma: no cover
        pass
    return np.asarray(value)


def compare(actual: Any, expected: Any, mode: str, input_scale: float = 0.0) -> Numbers:
    """Judge the Core ML value ``actual`` against the eager value ``expected``.

    ``input_scale`` is the largest magnitude among the inputs of the op that produced the
    value: a result that cancels to almost nothing (the mean of normalised values) carries
    rounding error of the size of its inputs, not of itself, so the scale is never taken
    smaller than that."""
    a, e = np.asarray(actual), as_numpy(expected)
    if a.shape != e.shape:
        if a.size != e.size:
            return Numbers("shape", size=int(e.size))
        a = a.reshape(e.shape)
    if e.size == 0:
        return Numbers(None)
    if not np.issubdtype(e.dtype, np.floating):
        return _exact(a, e)
    return _floats(a.astype(np.float64), e.astype(np.float64), mode, input_scale)


def _exact(a: np.ndarray, e: np.ndarray) -> Numbers:
    """An eager integer or bool tensor: every element must match exactly."""
    af, ef = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(all="ignore"):
        wrong = af != ef
        diff = np.where(np.isfinite(af), np.abs(af - ef), 0.0)
    numbers = Numbers(None, size=int(e.size), mismatched=int(wrong.sum()))
    numbers.nan, numbers.inf = int(np.isnan(af).sum()), int(np.isinf(af).sum())
    numbers.max_abs = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(ef).max()) if ef.size else 0.0
    numbers.max_rel = numbers.max_abs / scale if scale > 0 else numbers.max_abs
    if numbers.nan:
        numbers.kind = "nan"
        _example(numbers, np.argmax(np.isnan(af)), a, e)
    elif numbers.inf:
        numbers.kind = "inf"
        _example(numbers, np.argmax(np.isinf(af)), a, e)
    elif numbers.mismatched:
        numbers.kind = "integer"
        _example(numbers, np.argmax(wrong), a, e)
    return numbers


def _floats(a: np.ndarray, e: np.ndarray, mode: str, input_scale: float) -> Numbers:
    finite = np.isfinite(e)
    numbers = Numbers(None, size=int(e.size))
    numbers.nan = int((np.isnan(a) & finite).sum())
    numbers.inf = int((np.isinf(a) & finite).sum())
    scale = float(np.max(np.abs(e[finite]))) if finite.any() else 0.0
    scale = max(scale, input_scale)
    with np.errstate(all="ignore"):
        diff = np.where(finite, np.abs(a - e), 0.0)
        diff = np.where(np.isnan(diff), np.inf, diff)
    if mode == SEMANTIC:
        limit = SEMANTIC_RTOL * np.abs(e) + SEMANTIC_ATOL * scale
    elif mode == SEMANTIC_HALF:
        limit = np.full(e.shape, max(SEMANTIC_HALF_TOL * scale, FLOAT16_TINY))
    else:
        limit = np.full(e.shape, max(FLOAT16_TOL * scale, FLOAT16_TINY))
    bad = finite & (diff > limit)
    numbers.mismatched = int(bad.sum())
    finite_diff = diff[np.isfinite(diff)]
    numbers.max_abs = float(finite_diff.max()) if finite_diff.size else 0.0
    numbers.max_rel = numbers.max_abs / scale if scale > 0 else numbers.max_abs
    if numbers.nan:
        numbers.kind = "nan"
        _example(numbers, np.argmax(np.isnan(a) & finite), a, e)
    elif numbers.inf:
        numbers.kind = "inf"
        _example(numbers, np.argmax(np.isinf(a) & finite), a, e)
    elif numbers.mismatched:
        numbers.kind = "values"
        _example(numbers, np.argmax(np.where(bad, diff, -1.0)), a, e)
    return numbers


def value_scale(values: Any) -> float:
    """Largest finite magnitude among float arrays (0 when there are none)."""
    best = 0.0
    for value in values:
        array = np.asarray(value)
        if array.size and np.issubdtype(array.dtype, np.floating):
            finite = array[np.isfinite(array)]
            if finite.size:
                best = max(best, float(np.max(np.abs(finite))))
    return best


def _example(numbers: Numbers, flat_index: Any, a: np.ndarray, e: np.ndarray) -> None:
    index = np.unravel_index(int(flat_index), e.shape) if e.ndim else ()
    numbers.index = tuple(int(i) for i in index)
    numbers.expected = float(e[index])
    numbers.actual = float(a[index])
