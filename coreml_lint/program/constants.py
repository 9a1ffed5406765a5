"""The values of a program's small integer tensors, read from the ``.pt2`` without torch.

``torch.export.save`` writes each weight and tensor constant as its raw storage bytes
(``<prefix>/data/weights/<name>``, ``<prefix>/data/constants/<name>``), described in
``<prefix>/data/{weights,constants}/<method>_{weights,constants}_config.json`` by dtype,
sizes, strides and storage offset, with the archive's byte order in ``<prefix>/byteorder``.
For an int64 tensor laid out contiguously, that is enough to read its values with the
standard library; this module reads only those (at most :data:`MAX_ELEMENTS` elements
each) and reports the ones that pass int32: what Core AI narrows and wraps. It also reads
the small float32 and float64 constants (at most :data:`SMALL_FLOATS` elements) an op of
:data:`ALIKE_OPS` takes and reports the ones holding one repeated value: that converter
takes a constant only when its values are all alike (coremltools' PReLU at rank 3), which
an untrained layer's are (``nn.PReLU`` starts at 0.25 everywhere) and a trained one's are
not. Pickled entries, other dtypes and
strided views are never read.
"""

from __future__ import annotations

import json
import sys
import zipfile
from array import array
from collections.abc import Iterator
from typing import Any

from coreml_lint.program.graph import Graph

# torch._export.serde.schema.ScalarType -> the array module's typecode of its elements
LONG, FLOAT, DOUBLE = 5, 7, 8
TYPECODES = {LONG: "q", FLOAT: "f", DOUBLE: "d"}
MAX_ELEMENTS = 1 << 20
SMALL_FLOATS = 1 << 12  # a per-channel parameter, not a weight matrix: cheap to read
INT32 = (-(2**31), 2**31 - 1)
KINDS = (("constants", "constants"), ("weights", "weights"))


def int64_past_int32(archive: zipfile.ZipFile, prefix: str, method: str) -> dict[str, list[int]]:
    """Target name (``lifted_tensor_0``, ``cache``) -> ``[min, max]`` of each contiguous
    int64 tensor of the method whose values pass int32."""
    found: dict[str, list[int]] = {}
    for name, values in _tensors(archive, prefix, method, (LONG,), MAX_ELEMENTS):
        low, high = min(values), max(values)
        if low < INT32[0] or high > INT32[1]:
            found[name] = [low, high]
    return found


# Ops whose converter takes a constant operand only when its values are all alike
# (coremltools' prelu at rank 3 and 5): only their constants are read.
ALIKE_OPS = frozenset({"aten.prelu.default", "aten._prelu_kernel.default"})
CONSTANT_KINDS = ("parameter", "buffer", "constant")


def alike_operands(graph: Graph) -> set[str]:
    """The targets (``prelu.weight``) of the constants an op of ``ALIKE_OPS`` takes."""
    constant = {s.name: s.target for s in graph.inputs if s.kind in CONSTANT_KINDS}
    return {
        constant[ref]
        for node in graph.nodes
        if node.target in ALIKE_OPS
        for ref in node.tensor_inputs()
        if ref in constant
    }


def uniform_floats(
    archive: zipfile.ZipFile, prefix: str, method: str, wanted: set[str]
) -> dict[str, float]:
    """Target name (``prelu.weight``) -> the one value of each of the ``wanted`` small
    contiguous float32 or float64 tensors of two elements or more whose values are all
    that value."""
    return {
        name: values[0]
        for name, values in _tensors(archive, prefix, method, (FLOAT, DOUBLE), SMALL_FLOATS, wanted)
        if len(values) > 1 and all(v == values[0] for v in values)
    }


def _tensors(
    archive: zipfile.ZipFile,
    prefix: str,
    method: str,
    dtypes: tuple[int, ...],
    limit: int,
    wanted: set[str] | None = None,
) -> Iterator[tuple[str, list[Any]]]:
    """(target name, values) of each weight and constant of the method (of ``wanted``
    ones, when given) of one of ``dtypes`` and at most ``limit`` elements that can be read
    (:func:`_values`)."""
    order = _byteorder(archive, prefix)
    for folder, kind in KINDS:
        config = _json(archive, f"{prefix}/data/{folder}/{method}_{kind}_config.json")
        entries = config.get("config") if isinstance(config, dict) else None
        for name, entry in (entries if isinstance(entries, dict) else {}).items():
            if wanted is not None and name not in wanted:
                continue
            try:
                values = _values(archive, f"{prefix}/data/{folder}", entry, order, dtypes, limit)
            except Exception:  # a damaged member or entry is not read (the graph still is)
                continue
            if values:
                yield name, values


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


def _values(
    archive: zipfile.ZipFile,
    folder: str,
    entry: Any,
    order: str,
    dtypes: tuple[int, ...],
    limit: int,
) -> list[Any] | None:
    """The values of one contiguous, unpickled tensor entry of one of ``dtypes`` and at
    most ``limit`` elements (None: not read)."""
    meta = entry.get("tensor_meta") if isinstance(entry, dict) else None
    if not meta or entry.get("use_pickle") or meta.get("dtype") not in dtypes:
        return None
    typecode = TYPECODES[meta["dtype"]]
    width = array(typecode).itemsize
    sizes = [d.get("as_int") for d in meta.get("sizes", [])]
    strides = [d.get("as_int") for d in meta.get("strides", [])]
    offset = (meta.get("storage_offset") or {}).get("as_int", 0)
    if any(not isinstance(v, int) for v in [*sizes, *strides, offset]):
        return None  # a symbolic size: not a constant's
    count = 1
    for size in sizes:
        count *= size
    if count > limit or strides != _contiguous(sizes):
        return None
    try:  # only the view's bytes: views of one storage share a member (a tied weight's)
        with archive.open(f"{folder}/{entry['path_name']}") as member:
            member.seek(offset * width)
            data = member.read(count * width)
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return None
    if len(data) != count * width:
        return None
    values = array(typecode)
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
