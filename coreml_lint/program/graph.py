"""The light graph model every program rule reads.

It is deliberately torch-free: the `.pt2` reader and the in-memory `ExportedProgram`
adapter both produce these plain dataclasses, so the rules never care where a graph came
from and the pre-commit hook's venv (no torch, no coremltools) can run them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

# torch/_export/serde/schema.py MemoryFormat, as an ``Opaque("as_memory_format", value)``.
CONTIGUOUS_FORMAT, CHANNELS_LAST = 1, 2

FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16"})
INTEGER_DTYPES = frozenset({"uint8", "int8", "int16", "int32", "int64"})
EIGHT_BIT_DTYPES = frozenset({"uint8", "int8"})


class _computed_once:
    """``functools.cached_property`` without its per-access lock (Python 3.11 takes one on
    every read, a third of canonicalisation's time). The value is stored in the
    instance's ``__dict__``, where later reads find it without calling anything."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value


@dataclass(frozen=True)
class TensorRef:
    """A reference, inside a node's arguments, to a tensor value by name."""

    name: str


@dataclass(frozen=True)
class SymRef:
    """A symbolic int/bool/float value (dynamic shapes)."""

    name: str


@dataclass(frozen=True)
class DType:
    """A ``torch.dtype`` argument, by its torch name (``"float32"``)."""

    name: str


@dataclass(frozen=True)
class Opaque:
    """An argument kind the rules never look into (devices, layouts, subgraphs)."""

    kind: str
    value: Any = None


@dataclass
class TensorInfo:
    dtype: str
    shape: tuple[int | str, ...]
    strides: tuple[int | str, ...] | None = None
    # A value that requires grad as a leaf (a buffer written from parameters that require
    # grad inherits it when the program is exported outside torch.no_grad(); a saved
    # archive's values are all leaves once loaded).
    requires_grad: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class Node:
    """One ``call_function`` node.

    ``target`` is the op in edge spelling without the ``torch.ops.`` prefix, e.g.
    ``aten.add.Tensor``; ``args`` are the positional arguments and ``kwargs`` the keyword
    ones, kept apart exactly as export recorded them (coremltools reads only positional
    arguments, docs/background.md#keyword-arguments).
    """

    name: str
    target: str
    args: list[Any]
    kwargs: dict[str, Any]
    outputs: list[str]
    stack_trace: str | None = None
    # Set by canonicalisation: the node stands for an op whose decomposition we do not
    # model (a CompositeImplicit op torch always decomposes).
    opaque_decomposition: bool = False
    # The saved-graph node this one came from, when canonicalisation renamed it.
    origin: str | None = None
    # The modules whose forward made the node, as export records them
    # (``key,path,class;key,path,class``): see :meth:`modules`.
    module_stack: str | None = None

    # The tensor names the arguments read, worked out once (``tensor_inputs``): rules,
    # placement and canonicalisation ask for them over and over. Nodes are never edited
    # in place (``dataclasses.replace`` makes a new one, which starts without it).
    _refs: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @_computed_once
    def namespace(self) -> str:
        return self.target.split(".", 1)[0]

    @_computed_once
    def aten_name(self) -> str:
        """The name the partitioner sees in the ATen graph (``OpOverload.__name__``): the op
        and overload without the namespace, ``add.Tensor``."""
        parts = self.target.split(".")
        return ".".join(parts[1:]) if len(parts) >= 3 else self.target

    @_computed_once
    def op_base(self) -> str:
        """``aten.add.Tensor`` -> ``add``."""
        parts = self.target.split(".")
        return parts[1] if len(parts) > 2 else parts[-1]

    def modules(self) -> list[tuple[str, str]]:
        """(attribute path from the root module, qualified class) of each module whose
        forward made the node, outermost first: ``[("", "m.Top"), ("block", "m.Norm"),
        ("block.norm", "torch.nn.modules.normalization.RMSNorm")]``."""
        found = []
        for entry in (self.module_stack or "").split(";"):
            parts = entry.split(",")
            if len(parts) >= 3:
                found.append((parts[1], parts[-1]))
        return found

    def tensor_inputs(self) -> list[str]:
        refs = self._refs
        if refs is None:
            names: list[str] = []
            for value in self.args:
                _collect_refs(value, names)
            for value in self.kwargs.values():
                _collect_refs(value, names)
            refs = self._refs = tuple(names)
        return list(refs)

    def replaced(self, **changes: Any) -> Node:
        """``dataclasses.replace(self, **changes)`` without its per-call introspection
        (canonicalisation makes one per node)."""
        values = {name: getattr(self, name) for name in _NODE_FIELDS}
        values.update(changes)
        return Node(**values)

    def arg(self, index: int, keyword: str, default: Any = None) -> Any:
        """An argument by position or keyword, whichever export used."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(keyword, default)


_NODE_FIELDS = tuple(f.name for f in fields(Node) if f.init)


def _collect_refs(value: Any, into: list[str]) -> None:
    if isinstance(value, TensorRef):
        into.append(value.name)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_refs(item, into)


@dataclass
class InputSpec:
    """A graph input: ``kind`` is parameter, buffer, constant, user_input, token or custom."""

    name: str
    kind: str
    target: str | None = None
    persistent: bool | None = None


@dataclass
class OutputSpec:
    """A graph output: ``kind`` is user_output, buffer_mutation, user_input_mutation, ..."""

    name: str | None
    kind: str
    target: str | None = None


@dataclass
class Graph:
    """A whole exported method: inputs, nodes in topological order, outputs."""

    inputs: list[InputSpec]
    nodes: list[Node]
    outputs: list[OutputSpec]
    tensors: dict[str, TensorInfo]
    source: str = "<memory>"
    method: str = "forward"
    meta: dict[str, Any] = field(default_factory=dict)

    def producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    def users(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in dict.fromkeys(node.tensor_inputs()):
                entry = users.get(name)
                if entry is None:
                    users[name] = [node]
                else:
                    entry.append(node)
        return users

    def dtype(self, name: str) -> str | None:
        info = self.tensors.get(name)
        return info.dtype if info else None
