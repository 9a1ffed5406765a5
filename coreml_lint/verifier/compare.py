"""How a Core ML value is judged against the eager value it should equal.

Both passes measure the same numbers; they differ in what they forgive.

*Semantic pass* (the partition converted at float32 compute precision), judged against the
float64 reference (:mod:`coreml_lint.verifier.reference`): each element of a float output is
judged by what float32 arithmetic can do *there*. With ``x`` the float64 value, ``e`` eager
float32's and ``d`` the float64 spread of the perturbed runs (float32-sized rounding at every
op), Core ML's ``c`` is wrong at an element when

    |c - x| > max(EXACT_RTOL * |x|,  EXACT_FACTOR * max(|e - x|, d),  FLOAT32_TINY)

that is, when its error both matters to a user (``EXACT_RTOL`` = 1e-4 of the element: the
fourth significant digit) and is many times what float32 itself commits there
(``EXACT_FACTOR`` = 100 times eager float32's own error or the perturbed runs' spread, the
larger). An ill-conditioned element (a difference of nearly equal values, a long cumulative
product) is judged by how hard it is, a well-conditioned one by its own digits, and a tiny
element next to large ones is judged as strictly as they are (``log(1 + x)`` for
``x = 1e-5`` loses 3 digits, which no absolute floor at the output's scale sees). Below
float32's smallest normal number (``FLOAT32_TINY``) float32 holds no relative precision.

Why these constants: measured with ``benchmarks/verify_ground_truth.py`` (results in
``benchmarks/results/verify_ground_truth.json``: ``hard_ratio`` is, per model, the largest
error in units of float32's own error among elements whose error is above 1e-4; the float32
verdict is "wrong" exactly when it exceeds ``EXACT_FACTOR``). On the 154 clean models it is
at most 17 (one element of a transformer block's residual sum, 1.1e-4 off; next 7.5,
Gemma; every other model below 2); on the wrong models judged by this pass it is at least
4,010 (``inverse(x, epsilon=1e-4)``; tanh GELU run as exact 9,600; ``log(x + 1)`` 2.5e5).
100 sits 6 times above the clean maximum and 40 times below the wrong minimum. 1e-4 is the
issue's bound that matters to a user; the wrong values are 3e-4 of the element or more.
Without a float64 reference (the float64 run failed), the partition is judged as before:
``|c - e| <= 1e-5 * |e| + 1e-5 * scale``, ``scale`` the largest finite ``|e|``.

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

EXACT_RTOL = 1e-4  # relative error at an element that matters to a user (4th digit)
EXACT_FACTOR = 100.0  # times float32's own error at the element (eager's, the spread's)
FLOAT32_TINY = 2.0**-126  # float32's smallest normal number
SEMANTIC_RTOL = 1e-5  # without a float64 reference (fallback)
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
    exact: float | None = None  # the float64 value there (judged against float64)
    rel_error: float | None = None  # |Core ML - float64| / |float64| there
    ulps: float | None = None  # the same error in float32 ulps of the float64 value
    own_rel: float | None = None  # eager float32's own relative error there
    over: float | None = None  # the error / what float32 allows there (> 1: wrong)
    # among elements whose error matters (above EXACT_RTOL), the largest error in units of
    # float32's own error there: the output is wrong exactly when this exceeds EXACT_FACTOR
    hard_ratio: float | None = None

    @property
    def ok(self) -> bool:
        return self.kind is None

    def describe(self) -> str:
        if self.exact is not None and self.kind == "values":
            return self._describe_exact()
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

    def _describe_exact(self) -> str:
        index = list(self.index or ())
        return (
            f"{self.mismatched}/{self.size} elements off by more than float32 allows; worst "
            f"at {index}: Core ML {self.actual:.7g}, float64 {self.exact:.7g} (eager float32 "
            f"{self.expected:.7g}): relative error {self.rel_error:.2g} "
            f"({_ulps(self.ulps)} float32 ulps), eager's own {self.own_rel:.2g}, "
            f"{self.over:.3g}x what float32 allows there"
        )


def _ulps(value: float | None) -> str:
    if value is None or not np.isfinite(value):
        return "?"
    return f"{value:.0f}" if value < 1e6 else f"{value:.2g}"


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


def compare(
    actual: Any,
    expected: Any,
    mode: str,
    input_scale: float = 0.0,
    reference: tuple[Any, Any] | None = None,
) -> Numbers:
    """Judge the Core ML value ``actual`` against the eager value ``expected``: the one
    judge of verify, ``lower --verify``, the sweep and ``--measure``.

    ``reference`` is ``(float64 value, float64 spread)`` from
    :func:`coreml_lint.verifier.reference.float64_reference`; with it, a float32 value of the
    semantic pass is judged element by element against float64 (see the module docstring).
    ``input_scale`` (the fallback and the float16 pass) is the largest magnitude among the
    inputs of the op that produced the value: a result that cancels to almost nothing
    carries rounding error of the size of its inputs, so the scale is never taken smaller."""
    a, e = np.asarray(actual), as_numpy(expected)
    if a.shape != e.shape:
        if a.size != e.size:
            return Numbers("shape", size=int(e.size))
        a = a.reshape(e.shape)
    if e.size == 0:
        return Numbers(None)
    if not np.issubdtype(e.dtype, np.floating):
        return _exact(a, e)
    if mode == SEMANTIC and reference is not None and e.dtype == np.float32:
        exact, spread = (as_numpy(r).astype(np.float64) for r in reference)
        if exact.size == e.size and spread.size == e.size:
            x, d = exact.reshape(e.shape), spread.reshape(e.shape)
            return _against_float64(a.astype(np.float64), e.astype(np.float64), x, d)
    return _floats(a.astype(np.float64), e.astype(np.float64), mode, input_scale)


def _against_float64(a: np.ndarray, e: np.ndarray, x: np.ndarray, d: np.ndarray) -> Numbers:
    """Each element against float64, forgiving what float32 commits there (module doc)."""
    numbers, finite = _counted(a, e)
    with np.errstate(all="ignore"):
        x = np.where(np.isfinite(x.astype(np.float32)), x, e)  # float64 past float32's range
        own = np.where(finite, np.abs(e - x), 0.0)
        diff = np.where(finite, np.abs(a - x), 0.0)
        diff = np.where(np.isnan(diff), np.inf, diff)
        hard = np.maximum(own, np.nan_to_num(d, nan=0.0, posinf=0.0))
        limit = np.maximum(np.maximum(EXACT_RTOL * np.abs(x), EXACT_FACTOR * hard), FLOAT32_TINY)
        over = np.where(finite, diff / limit, 0.0)
        matters = finite & (diff > np.maximum(EXACT_RTOL * np.abs(x), FLOAT32_TINY))
        ratio = np.where(matters, diff / np.where(hard > 0, hard, 1e-200), 0.0)
    numbers.hard_ratio = float(np.max(ratio)) if ratio.size else 0.0
    bad = finite & (over > 1.0)
    numbers.mismatched = int(bad.sum())
    if not _non_finite(numbers, a, e, diff, _scale(e, finite)):
        worst = int(np.argmax(np.where(np.isfinite(over), over, -1.0)))
        numbers.kind = "values" if numbers.mismatched else None
        _example(numbers, worst, a, e)
        _element(numbers, worst, diff, own, x, over)
    return numbers


def _element(numbers: Numbers, flat: int, diff, own, x, over) -> None:
    """The worst element in the units a user reads: relative error, float32 ulps."""
    exact = float(x.reshape(-1)[flat])
    error = float(diff.reshape(-1)[flat])
    magnitude = abs(exact)
    numbers.exact = exact
    numbers.over = float(over.reshape(-1)[flat])
    numbers.rel_error = error / magnitude if magnitude > 0 else float("inf") if error else 0.0
    own_error = float(own.reshape(-1)[flat])
    numbers.own_rel = own_error / magnitude if magnitude > 0 else 0.0
    ulp = float(np.spacing(np.float32(max(magnitude, FLOAT32_TINY))))
    numbers.ulps = error / ulp


def _exact(a: np.ndarray, e: np.ndarray) -> Numbers:
    """An eager integer or bool tensor: every element must match exactly."""
    af, ef = a.astype(np.float64), e.astype(np.float64)
    numbers, finite = _counted(af, ef)  # an integer is always finite
    with np.errstate(all="ignore"):
        wrong = af != ef
        diff = np.where(np.isfinite(af), np.abs(af - ef), 0.0)
    numbers.mismatched = int(wrong.sum())
    if not _non_finite(numbers, af, ef, diff, _scale(ef, finite)) and numbers.mismatched:
        numbers.kind = "integer"
        _example(numbers, np.argmax(wrong), a, e)
    return numbers


def _floats(a: np.ndarray, e: np.ndarray, mode: str, input_scale: float) -> Numbers:
    """Against eager float32 at the tensor's scale (the float16 pass, the fallback)."""
    numbers, finite = _counted(a, e)
    scale = max(_scale(e, finite), input_scale)
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
    if not _non_finite(numbers, a, e, diff, scale) and numbers.mismatched:
        numbers.kind = "values"
        _example(numbers, np.argmax(np.where(bad, diff, -1.0)), a, e)
    return numbers


def _counted(a: np.ndarray, e: np.ndarray) -> tuple[Numbers, np.ndarray]:
    """Where eager is finite (the only places there is something to agree with), and a
    comparison's Numbers counting the NaN and inf Core ML gives there."""
    finite = np.isfinite(e)
    numbers = Numbers(None, size=int(e.size))
    numbers.nan = int((np.isnan(a) & finite).sum())
    numbers.inf = int((np.isinf(a) & finite).sum())
    return numbers, finite


def _scale(e: np.ndarray, finite: np.ndarray) -> float:
    """The largest finite magnitude of the eager value (0 when there is none)."""
    return float(np.max(np.abs(e[finite]))) if finite.any() else 0.0


def _non_finite(numbers: Numbers, a: np.ndarray, e: np.ndarray, diff: Any, scale: float) -> bool:
    """The tail every judge shares: the largest finite error, absolute and against
    ``scale``, then NaN before inf as the comparison's kind, with an example where Core ML
    gave it and eager is finite. Whether NaN or inf decided the kind (a judge then stops)."""
    finite_diff = diff[np.isfinite(diff)]
    numbers.max_abs = float(finite_diff.max()) if finite_diff.size else 0.0
    numbers.max_rel = numbers.max_abs / scale if scale > 0 else numbers.max_abs
    for kind, count, where in (
        ("nan", numbers.nan, np.isnan(a)),
        ("inf", numbers.inf, np.isinf(a)),
    ):
        if count:
            numbers.kind = kind
            _example(numbers, np.argmax(where & np.isfinite(e)), a, e)
            return True
    return False


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
