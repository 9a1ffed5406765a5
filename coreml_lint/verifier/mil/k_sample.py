"""``resample`` (torch's ``grid_sample``) and ``affine`` (``affine_grid`` then
``grid_sample``): sampling an image at coordinates, as the op documentation specifies it
(no value_inference in coremltools).

Coordinates come in ``(x, y)`` order and are mapped to pixel indices by
``coordinates_mode`` and ``align_corners`` (aligned: the extrema are the corner pixels'
centres; not aligned: their outer edges). Out-of-image samples follow ``padding_mode``:
``constant`` reads ``padding_value``, ``border`` clamps, ``reflection`` reflects about the
edge pixels' centres (``|1, 2, 3| -> |2, 3, 2, 1, 2, 3, 2, 1, 2|``) and ``symmetric`` about
their outer edges (``|3, 2, 1, 1, 2, 3, 3, 2, 1|``). ``nearest`` rounds half to even, as
torch does (the documentation does not say; eager is the check).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, Unsupported, kernel


def _pixels(c: np.ndarray, size: int, mode: str, align: bool) -> np.ndarray:
    """Coordinates along one axis as (fractional) pixel indices."""
    if mode == "unnormalized":
        return c
    if mode == "normalized_minus_one_to_one":
        return (c + 1) / 2 * (size - 1) if align else ((c + 1) * size - 1) / 2
    if mode == "normalized_zero_to_one":
        return c * (size - 1) if align else c * size - 0.5
    raise Unsupported(f"resample coordinates_mode {mode}")


def _reflect(p: np.ndarray, low: float, high: float) -> np.ndarray:
    """Reflect ``p`` into ``[low, high]`` as often as it takes."""
    span = high - low
    if span <= 0:
        return np.zeros_like(p)
    p = np.abs(p - low)
    flips = np.floor(p / span)
    extra = np.fmod(p, span)
    return np.where(flips % 2 == 0, low + extra, high - extra)


def _padded(p: np.ndarray, size: int, padding: str) -> np.ndarray:
    if padding == "border":
        return np.clip(p, 0, size - 1)
    if padding == "reflection":
        return np.clip(_reflect(p, 0.0, size - 1.0), 0, size - 1)
    if padding == "symmetric":
        return np.clip(_reflect(p, -0.5, size - 0.5), 0, size - 1)
    if padding == "constant":
        return p
    raise Unsupported(f"resample padding_mode {padding}")


def _taps(x: np.ndarray, rows: np.ndarray, cols: np.ndarray, fill: float) -> np.ndarray:
    """x[b, :, rows[b, h, w], cols[b, h, w]] as [B, C, H2, W2]; ``fill`` off the image."""
    h, w = x.shape[-2:]
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    r, c = np.clip(rows, 0, h - 1), np.clip(cols, 0, w - 1)
    batch = np.arange(x.shape[0])[:, None, None]
    picked = x[batch, :, r, c]  # [B, H2, W2, C]
    picked = np.where(inside[..., None], picked, fill)
    return np.moveaxis(picked, -1, 1)


@kernel("resample", how=OWN)
def _resample(op: Any, a: dict[str, Any]) -> np.ndarray:
    return sample(
        np.asarray(a["x"], dtype=np.float64),
        np.asarray(a["coordinates"], dtype=np.float64),
        str(a.get("coordinates_mode", "normalized_minus_one_to_one")),
        bool(a.get("align_corners", False)),
        str(a.get("padding_mode", "constant")),
        float(a.get("padding_value", 0.0)),
        str(a.get("sampling_mode", "bilinear")),
    )


def sample(x, grid, mode: str, align: bool, padding: str, fill: float, how: str) -> np.ndarray:
    """``x`` [B, C, H, W] sampled at ``grid`` [B, H2, W2, 2] ((x, y) order)."""
    h, w = x.shape[-2:]
    px = _padded(_pixels(grid[..., 0], w, mode, align), w, padding)
    py = _padded(_pixels(grid[..., 1], h, mode, align), h, padding)
    if how == "nearest":
        return _taps(x, np.rint(py).astype(np.int64), np.rint(px).astype(np.int64), fill)
    x0, y0 = np.floor(px).astype(np.int64), np.floor(py).astype(np.int64)
    fx, fy = (px - x0)[:, None], (py - y0)[:, None]
    top = _taps(x, y0, x0, fill) * (1 - fx) + _taps(x, y0, x0 + 1, fill) * fx
    bottom = _taps(x, y0 + 1, x0, fill) * (1 - fx) + _taps(x, y0 + 1, x0 + 1, fill) * fx
    return top * (1 - fy) + bottom * fy


def _axis(size: int, align: bool) -> np.ndarray:
    """Normalised coordinates of an output axis's samples (torch's ``affine_grid``)."""
    if align:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    return (np.arange(size) * 2.0 + 1.0) / size - 1.0


@kernel("affine", how=OWN)
def _affine(op: Any, a: dict[str, Any]) -> np.ndarray:
    """``x' = a0 x + a1 y + a2``, ``y' = b0 x + b1 y + b2`` over the output's normalised
    grid, then sampled as ``resample`` samples (the op documentation)."""
    x = np.asarray(a["x"], dtype=np.float64)
    theta = np.asarray(a["transform_matrix"], dtype=np.float64).reshape(-1, 2, 3)
    theta = np.broadcast_to(theta, (x.shape[0], 2, 3))
    align = bool(a.get("align_corners", True))
    out_h, out_w = int(a["output_height"]), int(a["output_width"])
    gx, gy = np.meshgrid(_axis(out_w, align), _axis(out_h, align))
    base = np.stack([gx, gy, np.ones_like(gx)], -1)  # [H2, W2, 3]
    grid = np.einsum("hwk,bjk->bhwj", base, theta)
    mode = str(a.get("coordinates_mode", "normalized_minus_one_to_one"))
    padding, fill = str(a.get("padding_mode", "constant")), float(a.get("padding_value", 0.0))
    return sample(x, grid, mode, align, padding, fill, str(a.get("sampling_mode", "bilinear")))
