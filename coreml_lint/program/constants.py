"""The values of a program's small integer tensors, read from the ``.pt2`` without torch.

``torch.export.save`` writes each weight and tensor constant as its raw storage bytes
(``<prefix>/data/weights/<name>``, ``<prefix>/data/constants/<name>``), described in
``<prefix>/data/{weights,constants}/<method>_{weights,constants}_config.json`` by dtype,
sizes, strides and storage offset, with the archive's byte order in ``<prefix>/byteorder``.
For an int64 tensor laid out contiguously, that is enough to read its values with the
standard library; this module reads only those (at most :data:`MAX_ELEMENTS` elements
each) and reports the ones that pass int32: what Core AI narrows and wraps. Pickled
entries, other dtypes and strided views are never read.
"""

from __future__ import annotations

import json
import sys
import zipfile
from array import array
from typing import Any

LONG = 5  # torch._export.serde.schema.ScalarType.LONG (int64)
MAX_ELEMENTS = 1 << 20
INT32 = (-(2**31), 2**31 - 1)
KINDS = (("constants", "constants"), ("weights", "weights"))


def int64_past_int32(archive: zipfile.ZipFile, prefix: str, method: str) -> dict[str, list[int]]:
    """Target name (``lifted_tensor_0``, ``cache``) -> ``[min, max]`` of each contiguous
    int64 tensor of the method whose values pass int32."""
    order = _byteorder(archive, prefix)
    found: dict[str, list[int]] = {}
    for folder, kind in KINDS:
        config = _json(archive, f"{prefix}/data/{folder}/{method}_{kind}_config.json")
        entries = config.get("config") if isinstance(config, dict) else None
        for name, entry in (entries if isinstance(entries, dict) else {}).items():
            try:
                values = _values(archive, f"{prefix}/data/{folder}", entry, order)
            except Exception:  # a damaged member or entry is not read (the graph still is)
                continue
            if values is None or not values:
                continue
            low, high = min(values), max(values)
            if low < INT32[0] or high > INT32[1]:
                found[name] = [low, high]
    return found


def _json(archive: zipfile.ZipFile, name: str) -> Any:
    try:
        return json.loads(archive.read(name))
    except Exception:  # absent, damaged or not JSON: nothing to read
        return None


def _byteorder(archive: zipfile.ZipFile, prefix: str) -> str:
    try:
        order = archive.read(f"{prefix}/byteorder").decode().strip()
    except Exception:  # absent or damaged: torch's default
        return "little"
    return order if order in ("little", "big") else "little"


def _values(archive: zipfile.ZipFile, folder: str, entry: Any, order: str) -> list[int] | None:
    """The int64 values of one contiguous, unpickled tensor entry (None: not read)."""
    meta = entry.get("tensor_meta") if isinstance(entry, dict) else None
    if not meta or entry.get("use_pickle") or meta.get("dtype") != LONG:
        return None
    sizes = [d.get("as_int") for d in meta.get("sizes", [])]
    strides = [d.get("as_int") for d in meta.get("strides", [])]
    offset = (meta.get("storage_offset") or {}).get("as_int", 0)
    if any(not isinstance(v, int) for v in [*sizes, *strides, offset]):
        return None  # a symbolic size: not a constant's
    count = 1
    for size in sizes:
        count *= size
    if count > MAX_ELEMENTS or strides != _contiguous(sizes):
        return None
    try:
        raw = archive.read(f"{folder}/{entry['path_name']}")
    except (KeyError, zipfile.BadZipFile, OSError):
        return None
    data = raw[offset * 8 : (offset + count) * 8]
    if len(data) != count * 8:
        return None
    values = array("q")
    values.frombytes(data)
    if order != sys.byteorder:
        values.byteswap()
    return values.tolist()


def _contiguous(sizes: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))
