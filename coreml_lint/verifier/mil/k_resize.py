"""Upsampling, resizing and cropping of the last two dims (no value_inference in coremltools).

Bilinear sampling grids follow the op documentation (``align_corners`` /
``half_pixel_centers`` for ``upsample_bilinear``, ``sampling_mode`` for
``resize_bilinear``). ``upsample_nearest_neighbor`` is specified by its scale factors:
the output is ``floor(H * scale)`` high, and an upsample by ``scale`` reads, for output row
``i``, input row ``floor(i / scale)`` (the definition of nearest upsampling the op's integer
form is, extended to a fractional scale as the op allows; it is also torch's nearest rule
for a given scale factor, so where torch computes it eager is the check). A scale stored as
float32 (``2/3`` from an output size) denotes the ratio it rounds: a quotient within 1e-6 of
an integer is that integer, so rounding at an exact boundary is not guessed. Without the
scale factors (a symbolic output size), the ratio of the sizes is the scale.
``resize_nearest_neighbor`` (a target size, never emitted by the torch frontend) has no
documented source rule; it answers only when every convention in use agrees on the values
and raises :class:`Unsupported` otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, Unsupported, kernel


def _nearest(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    h, w = x.shape[-2:]
    if out_h % h == 0 and out_w % w == 0:
        rows = np.arange(out_h) // (out_h // h)
        cols = np.arange(out_w) // (out_w // w)
        return x[..., rows, :][..., cols]
    results = [
        x[..., _sources(h, out_h, mode), :][..., _sources(w, out_w, mode)] for mode in _CONVENTIONS
    ]
    if all(np.array_equal(results[0], r, equal_nan=True) for r in results[1:]):
        return results[0]
    raise Unsupported(f"nearest resize {h}x{w} -> {out_h}x{out_w} (fractional scale)")


_CONVENTIONS = ("asymmetric", "half_pixel", "align_corners")


def _sources(size_in: int, size_out: int, mode: str) -> np.ndarray:
    """The source index of each output sample along one axis under one convention."""
    i = np.arange(size_out, dtype=np.float64)
    if mode == "asymmetric":
        g = np.floor(i * size_in / size_out)
    elif mode == "half_pixel":
        g = np.floor((i + 0.5) * size_in / size_out)
    else:
        g = np.round(i * (size_in - 1) / max(size_out - 1, 1))
    return np.clip(g, 0, size_in - 1).astype(np.int64)


def _upsampled_size(op: Any, a: dict[str, Any]) -> tuple[int, int]:
    """The output's height and width: the program's declared ones, or, when they are
    symbolic (a program exported with dynamic sizes), ``floor(size * scale_factor)`` of the
    input at hand, as the op's specification computes them."""
    declared = op.outputs[0].shape[-2:]
    if all(isinstance(d, int | np.integer) for d in declared):
        return int(declared[0]), int(declared[1])
    h, w = np.shape(a["x"])[-2:]
    return (
        int(np.floor(h * float(a.get("scale_factor_height", 1)))),
        int(np.floor(w * float(a.get("scale_factor_width", 1)))),
    )


def scaled_sources(size_in: int, size_out: int, scale: float | None) -> np.ndarray:
    """Input index of each output index of a nearest upsample by ``scale``:
    ``floor(i / scale)``, clamped; a quotient within 1e-6 of an integer is that integer."""
    if not scale or scale <= 0:
        scale = size_out / size_in
    g = np.arange(size_out, dtype=np.float64) / float(scale)
    near = np.round(g)
    g = np.where(np.abs(g - near) <= 1e-6 * np.maximum(1.0, np.abs(g)), near, g)
    return np.clip(np.floor(g), 0, size_in - 1).astype(np.int64)


def _scale(a: dict[str, Any], name: str) -> float | None:
    value = a.get(name)
    return None if value is None else float(np.asarray(value).reshape(-1)[0])


@kernel("upsample_nearest_neighbor", how=OWN)
def _upsample_nearest(op: Any, a: dict[str, Any]) -> np.ndarray:
    out_h, out_w = _upsampled_size(op, a)
    x = np.asarray(a["x"])
    h, w = x.shape[-2:]
    rows = scaled_sources(h, out_h, _scale(a, "scale_factor_height"))
    cols = scaled_sources(w, out_w, _scale(a, "scale_factor_width"))
    return x[..., rows, :][..., cols]


@kernel("resize_nearest_neighbor", how=OWN)
def _resize_nearest(op: Any, a: dict[str, Any]) -> np.ndarray:
    return _nearest(np.asarray(a["x"]), int(a["target_size_height"]), int(a["target_size_width"]))


def grid(size_in: int, size_out: int, mode: str) -> np.ndarray:
    """Source coordinates of each output sample along one axis, clamped to [0, size_in-1]."""
    i = np.arange(size_out, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if size_out == 1:
            g = np.full(1, (size_in - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0)
        else:
            g = i * (size_in - 1) / (size_out - 1)
    elif mode == "DEFAULT":
        spacing = (size_in - size_in / size_out) / (size_out - 1) if size_out > 1 else 0.0
        g = i * spacing
    elif mode == "OFFSET_CORNERS":
        delta = max(1, size_in - 1) / size_out
        g = 0.5 * delta + i * delta
    elif mode == "UNALIGN_CORNERS":
        spacing = size_in / size_out
        g = i * spacing + 0.5 * spacing - 0.5
    elif mode == "ASYMMETRIC":
        g = i * size_in / size_out
    else:
        raise Unsupported(f"sampling mode {mode}")
    return np.clip(g, 0, size_in - 1)


def _lerp(x: np.ndarray, coords: np.ndarray, axis: int) -> np.ndarray:
    low = np.floor(coords).astype(np.int64)
    high = np.minimum(low + 1, x.shape[axis] - 1)
    frac = (coords - low).reshape([-1 if d == axis % x.ndim else 1 for d in range(x.ndim)])
    return np.take(x, low, axis=axis) * (1 - frac) + np.take(x, high, axis=axis) * frac


def bilinear(x: np.ndarray, out_h: int, out_w: int, mode: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    y = _lerp(x, grid(x.shape[-2], out_h, mode), -2)
    return _lerp(y, grid(x.shape[-1], out_w, mode), -1)


@kernel("upsample_bilinear", how=OWN)
def _upsample_bilinear(op: Any, a: dict[str, Any]) -> np.ndarray:
    out_h, out_w = _upsampled_size(op, a)
    align = bool(a.get("align_corners", True))
    half_pixel = bool(a.get("half_pixel_centers", not align))
    mode = "UNALIGN_CORNERS" if half_pixel else "ASYMMETRIC"
    if align:
        mode = "STRICT_ALIGN_CORNERS"
    return bilinear(a["x"], out_h, out_w, mode)


@kernel("crop", how=OWN)
def _crop(op: Any, a: dict[str, Any]) -> np.ndarray:
    x = np.asarray(a["x"])
    top, bottom = (int(v) for v in np.atleast_1d(a["crop_height"]))
    left, right = (int(v) for v in np.atleast_1d(a["crop_width"]))
    return x[..., top : x.shape[-2] - bottom, left : x.shape[-1] - right]


@kernel("resize_bilinear", how=OWN)
def _resize_bilinear(op: Any, a: dict[str, Any]) -> np.ndarray:
    out_h, out_w = (int(d) for d in op.outputs[0].shape[-2:])
    return bilinear(a["x"], out_h, out_w, str(a.get("sampling_mode", "DEFAULT")))
