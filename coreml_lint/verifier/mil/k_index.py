"""Gather and scatter kernels.

coremltools has no ``value_inference`` for ``gather_nd``, ``scatter`` and ``scatter_nd``;
its ``scatter_along_axis`` one ignores ``mode`` (every mode behaves as ``update``), so it
is replaced. Repeated indices accumulate with numpy's unbuffered ``ufunc.at`` for the
arithmetic modes; for ``update`` the last write wins, as torch's CPU kernels do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreml_lint.verifier.mil.registry import OWN, WRAPPED, kernel

_AT = {
    "add": np.add.at,
    "sub": np.subtract.at,
    "mul": np.multiply.at,
    "max": np.maximum.at,
    "min": np.minimum.at,
}


def _apply(out: np.ndarray, index: Any, updates: np.ndarray, mode: str) -> np.ndarray:
    if mode == "update":
        out[index] = updates
    elif mode == "div":
        if not np.issubdtype(out.dtype, np.floating):
            raise NotImplementedError("integer scatter div")
        np.divide.at(out, index, updates)
    elif mode in _AT:
        _AT[mode](out, index, updates)
    else:
        raise NotImplementedError(f"scatter mode {mode}")
    return out


@kernel("gather_nd", how=OWN)
def _gather_nd(op: Any, a: dict[str, Any]) -> np.ndarray:
    x, indices = np.asarray(a["x"]), np.asarray(a["indices"]).astype(np.int64)
    batch = int(a.get("batch_dims", 0))
    depth = indices.shape[-1]
    if batch == 0:
        return x[tuple(np.moveaxis(indices, -1, 0))]
    lead = x.shape[:batch]
    flat_x = x.reshape((-1, *x.shape[batch:]))
    flat_i = indices.reshape((-1, *indices.shape[batch:]))
    rows = [xi[tuple(np.moveaxis(ii, -1, 0))] for xi, ii in zip(flat_x, flat_i, strict=True)]
    out = np.stack(rows)
    return out.reshape((*lead, *indices.shape[batch:-1], *x.shape[batch + depth :]))


@kernel("scatter", how=OWN)
def _scatter(op: Any, a: dict[str, Any]) -> np.ndarray:
    data = np.array(a["data"])
    indices = np.asarray(a["indices"]).astype(np.int64)
    axis = int(a.get("axis", 0)) % data.ndim
    index = (slice(None),) * axis + (indices,)
    return _apply(data, index, np.asarray(a["updates"]), str(a.get("mode", "add")))


@kernel("scatter_along_axis", how=WRAPPED, note="value_inference ignores mode")
def _scatter_along_axis(op: Any, a: dict[str, Any]) -> np.ndarray:
    data = np.array(a["data"])
    indices = np.asarray(a["indices"]).astype(np.int64)
    axis = int(a.get("axis", 0)) % data.ndim
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    grids = list(np.indices(indices.shape, sparse=True))
    grids[axis] = indices
    return _apply(data, tuple(grids), np.asarray(a["updates"]), str(a.get("mode", "add")))


@kernel("scatter_nd", how=OWN)
def _scatter_nd(op: Any, a: dict[str, Any]) -> np.ndarray:
    data = np.array(a["data"])
    indices = np.asarray(a["indices"]).astype(np.int64)
    index = tuple(np.moveaxis(indices, -1, 0))
    return _apply(data, index, np.asarray(a["updates"]), str(a.get("mode", "add")))
