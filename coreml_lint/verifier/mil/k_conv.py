"""``conv`` and ``conv_transpose`` (1-3 spatial dims, groups, dilations, every pad type).

``conv`` gathers the (dilated, strided) windows with ``sliding_window_view`` and contracts
them with one batched matmul per group: numpy's BLAS, no Python loop over pixels.
``conv_transpose`` scatters each kernel tap's contribution with strided slices (a loop over
the kernel taps only) and then crops the padding, which is the definition of the op.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, kernel


def same_pads(size: int, kernel_size: int, stride: int, dilation: int, lower: bool) -> tuple:
    """(before, after) padding of ``same``/``same_lower``: output = ceil(size / stride)."""
    out = math.ceil(size / stride)
    effective = (kernel_size - 1) * dilation + 1
    total = max((out - 1) * stride + effective - size, 0)
    small = total // 2
    return (total - small, small) if lower else (small, total - small)


def pads_of(a: dict[str, Any], spatial: tuple, kernel: tuple, strides: tuple, dil: tuple) -> list:
    pad_type = str(a.get("pad_type", "valid")).lower()
    if pad_type == "valid":
        return [(0, 0)] * len(spatial)
    if pad_type == "custom":
        pad = [int(p) for p in np.atleast_1d(a.get("pad", [0] * 2 * len(spatial)))]
        return [(pad[2 * i], pad[2 * i + 1]) for i in range(len(spatial))]
    if pad_type in ("same", "same_lower"):
        lower = pad_type == "same_lower"
        return [same_pads(*args, lower) for args in zip(spatial, kernel, strides, dil, strict=True)]
    raise NotImplementedError(f"pad_type {pad_type}")


def _ints(value: Any, n: int, default: int = 1) -> tuple[int, ...]:
    if value is None:
        return (default,) * n
    return tuple(int(v) for v in np.atleast_1d(value))


def windows(x: np.ndarray, kernel: tuple, strides: tuple, dil: tuple, out: tuple) -> np.ndarray:
    """(N, C, *out, *kernel) view of the windows of an already padded ``x``."""
    nd = len(kernel)
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True))
    view = np.lib.stride_tricks.sliding_window_view(x, span, axis=tuple(range(2, 2 + nd)))
    index = [slice(None), slice(None)]
    index += [slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides, strict=True)]
    index += [slice(None, None, d) for d in dil]
    return view[tuple(index)]


@kernel("conv", how=OWN)
def _conv(op: Any, a: dict[str, Any]) -> np.ndarray:
    x, w = np.asarray(a["x"], dtype=np.float32), np.asarray(a["weight"], dtype=np.float32)
    nd = x.ndim - 2
    groups = int(a.get("groups", 1))
    kernel = w.shape[2:]
    strides, dil = _ints(a.get("strides"), nd), _ints(a.get("dilations"), nd)
    pads = pads_of(a, x.shape[2:], kernel, strides, dil)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    out = tuple(
        (xp.shape[2 + i] - (kernel[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nd)
    )
    win = windows(xp, kernel, strides, dil, out)  # N, C, *out, *k
    n, c = x.shape[:2]
    cg, og = c // groups, w.shape[0] // groups
    taps = int(np.prod(kernel))
    pixels = int(np.prod(out))
    # N, G, cg, *out, *k -> N, G, pixels, cg*taps
    win = win.reshape(n, groups, cg, pixels, taps).transpose(0, 1, 3, 2, 4)
    win = win.reshape(n, groups, pixels, cg * taps)
    wg = w.reshape(groups, og, cg * taps).transpose(0, 2, 1)  # G, cg*taps, og
    y = np.matmul(win, wg)  # N, G, pixels, og
    y = y.transpose(0, 1, 3, 2).reshape(n, groups * og, *out)
    if a.get("bias") is not None:
        y = y + np.asarray(a["bias"], dtype=np.float32).reshape((-1,) + (1,) * nd)
    return y


@kernel("conv_transpose", how=OWN)
def _conv_transpose(op: Any, a: dict[str, Any]) -> np.ndarray:
    x, w = np.asarray(a["x"], dtype=np.float32), np.asarray(a["weight"], dtype=np.float32)
    nd = x.ndim - 2
    groups = int(a.get("groups", 1))
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    cg, og = c // groups, w.shape[1]  # weight: (C_in, C_out / groups, *k)
    strides, dil = _ints(a.get("strides"), nd), _ints(a.get("dilations"), nd)
    full = tuple(
        (x.shape[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(nd)
    )
    y = np.zeros((n, groups, og, *full), dtype=np.float32)
    xg = x.reshape(n, groups, cg, -1)  # N, G, cg, pixels
    wg = w.reshape(groups, cg, og, -1)  # G, cg, og, taps
    contrib = np.einsum("ngcp,gcot->ngotp", xg, wg, optimize=True)
    contrib = contrib.reshape(n, groups, og, int(np.prod(kernel)), *x.shape[2:])
    for t, tap in enumerate(np.ndindex(*kernel)):
        index = [slice(None)] * 3
        index += [
            slice(
                tap[i] * dil[i], tap[i] * dil[i] + (x.shape[2 + i] - 1) * strides[i] + 1, strides[i]
            )
            for i in range(nd)
        ]
        y[tuple(index)] += contrib[:, :, :, t]
    y = y.reshape(n, groups * og, *full)
    out_shape = tuple(int(d) for d in op.outputs[0].shape[2:])
    pads = _transpose_pads(a, x.shape[2:], full, out_shape, strides)
    crop = [slice(None), slice(None)]
    for i in range(nd):
        begin = pads[i][0]
        crop.append(slice(begin, min(begin + out_shape[i], full[i])))
    y = y[tuple(crop)]
    short = [(0, 0), (0, 0)] + [(0, out_shape[i] - y.shape[2 + i]) for i in range(nd)]
    y = np.pad(y, short)  # output_shape beyond the full result (output_padding): zeros
    if a.get("bias") is not None:
        y = y + np.asarray(a["bias"], dtype=np.float32).reshape((-1,) + (1,) * nd)
    return y


def _transpose_pads(a: dict, spatial: tuple, full: tuple, out: tuple, strides: tuple) -> list:
    pad_type = str(a.get("pad_type", "valid")).lower()
    if pad_type == "custom":
        pad = [int(p) for p in np.atleast_1d(a.get("pad", [0] * 2 * len(spatial)))]
        return [(pad[2 * i], pad[2 * i + 1]) for i in range(len(spatial))]
    if pad_type in ("same", "same_lower"):
        pads = []
        for size, total in zip(out, full, strict=True):
            extra = max(total - size, 0)
            small = extra // 2
            pads.append(
                (extra - small, small) if pad_type == "same_lower" else (small, extra - small)
            )
        return pads
    return [(0, 0)] * len(spatial)
