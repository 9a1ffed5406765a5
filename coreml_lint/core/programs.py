"""The programs a project declares for ``coreml-lint --export``: how its models are built.

Two spellings in ``[tool.coreml-lint]``, checked here so a typo is one line at load time,
not an error after a minute of export::

    programs = ["models/export.py:make_programs"]   # callables returning
                                # {name: (module, example_inputs[, dynamic_shapes])}
                                # or {name: ExportedProgram} (exported by the factory itself)
    [[tool.coreml-lint.program]]
    module = "models/lm.py:TinyLM"     # a class or a zero-argument callable: the nn.Module
    inputs = ["int64[1, 8]", "int64[1]"]  # example inputs, dtype[shape]
    dynamic-shapes = [{ 1 = [1, 64] }, {}]  # per input: dimension -> [min, max]
    ios = 18                             # this program's deployment target
    name = "lm"                          # optional; the class or callable's name by default

Only data lives here (layer 0); ``coreml_lint/exporting`` builds and exports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coreml_lint.core.errors import InputError
from coreml_lint.core.settings import SUPPORTED_IOS

_TARGET = re.compile(r"^(?P<file>[^:]+\.py):(?P<attr>[A-Za-z_][A-Za-z0-9_.]*)$")
_INPUT = re.compile(r"^\s*(?P<dtype>[a-z][a-z0-9]*)\s*\[(?P<shape>[0-9,\s]*)\]\s*$")
DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)
TABLE_KEYS = {"module", "inputs", "dynamic-shapes", "ios", "name"}


@dataclass(frozen=True)
class InputSpec:
    """One example input of a table-declared program: zeros of this dtype and shape."""

    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ProgramDecl:
    """One declaration: a factory of programs (``kind="programs"``) or one module
    (``kind="module"``). ``path`` is the file, absolute; ``attr`` the name in it."""

    kind: str
    path: Path
    attr: str
    spelling: str  # as written, for messages and the cache key
    root: Path  # the folder of the pyproject.toml: paths are relative to it, the cache is in it
    inputs: tuple[InputSpec, ...] = ()
    dynamic_shapes: tuple[tuple[tuple[int, int, int], ...], ...] = ()  # (dim, min, max)
    ios: int | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        return self.spelling if self.kind == "programs" else (self.name or self.attr)

    def identity(self) -> str:
        """What the export depends on, as one stable string (part of the cache key); not
        ``ios``, which changes the lint of the program and not the program."""
        return repr((self.kind, self.spelling, self.inputs, self.dynamic_shapes, self.name))


def declared_programs(table: dict[str, Any], label: str, root: Path) -> tuple[ProgramDecl, ...]:
    """The ``programs`` list and the ``program`` tables of ``[tool.coreml-lint]``; paths are
    relative to ``root``, the folder of the pyproject.toml."""
    found: list[ProgramDecl] = []
    factories = table.get("programs", [])
    if not isinstance(factories, list) or not all(isinstance(v, str) for v in factories):
        raise InputError(f"{label}: [tool.coreml-lint] programs must be a list of strings")
    for spelling in factories:
        path, attr = _target(spelling, root, label, "programs")
        found.append(ProgramDecl("programs", path, attr, spelling, root))
    tables = table.get("program", [])
    if not isinstance(tables, list) or not all(isinstance(v, dict) for v in tables):
        raise InputError(f"{label}: [[tool.coreml-lint.program]] must be tables")
    found.extend(_module_decl(entry, root, label) for entry in tables)
    names = [decl.label for decl in found]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InputError(f"{label}: more than one declared program named {duplicated[0]!r}")
    return tuple(found)


def _target(spelling: str, root: Path, label: str, key: str) -> tuple[Path, str]:
    match = _TARGET.match(spelling.strip())
    if not match:
        raise InputError(
            f"{label}: [tool.coreml-lint] {key}: {spelling!r} is not 'path/to/file.py:name'"
        )
    return (root / match.group("file")).resolve(), match.group("attr")


def _module_decl(entry: dict[str, Any], root: Path, label: str) -> ProgramDecl:
    where = f"{label}: [[tool.coreml-lint.program]]"
    unknown = sorted(set(entry) - TABLE_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s): {', '.join(unknown)}")
    module = entry.get("module")
    if not isinstance(module, str):
        raise InputError(f"{where}: module must be a string 'path/to/file.py:Name'")
    path, attr = _target(module, root, label, "program module")
    raw_inputs = entry.get("inputs")
    if not isinstance(raw_inputs, list) or not all(isinstance(v, str) for v in raw_inputs):
        raise InputError(f'{where} {module}: inputs must be a list like ["float32[1, 3, 8]"]')
    inputs = tuple(_input(v, f"{where} {module}") for v in raw_inputs)
    ios = entry.get("ios")
    if ios is not None and (isinstance(ios, bool) or ios not in SUPPORTED_IOS):
        choices = ", ".join(map(str, SUPPORTED_IOS))
        raise InputError(f"{where} {module}: ios must be one of {choices}")
    name = entry.get("name")
    if name is not None and not isinstance(name, str):
        raise InputError(f"{where} {module}: name must be a string")
    dynamic = _dynamic_shapes(entry.get("dynamic-shapes"), len(inputs), f"{where} {module}")
    return ProgramDecl("module", path, attr, module, root, inputs, dynamic, ios, name)


def _input(text: str, where: str) -> InputSpec:
    match = _INPUT.match(text)
    if not match or match.group("dtype") not in DTYPES:
        raise InputError(
            f"{where}: input {text!r} is not dtype[shape] with a dtype among {', '.join(DTYPES)}"
        )
    shape = tuple(int(p) for p in match.group("shape").replace(" ", "").split(",") if p)
    return InputSpec(match.group("dtype"), shape)


def _dynamic_shapes(
    value: Any, count: int, where: str
) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """Per input, the dynamic dimensions as (dim, min, max)."""
    if value is None:
        return ()
    message = f"{where}: dynamic-shapes must be one table per input, like [{{ 1 = [1, 64] }}, {{}}]"
    if not isinstance(value, list) or len(value) != count:
        raise InputError(message)
    result = []
    for per_input in value:
        if not isinstance(per_input, dict):
            raise InputError(message)
        dims = []
        for dim, bounds in per_input.items():
            valid = (
                str(dim).isdigit()
                and isinstance(bounds, list)
                and len(bounds) == 2
                and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
                and 0 <= bounds[0] <= bounds[1]
            )
            if not valid:
                raise InputError(message)
            dims.append((int(dim), bounds[0], bounds[1]))
        result.append(tuple(sorted(dims)))
    return tuple(result)
