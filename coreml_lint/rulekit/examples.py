"""Examples that are tests, declared beside the rule they exercise (Fixit's VALID/INVALID).

Two kinds:

- :class:`Valid` / :class:`Invalid` source snippets in a rule's ``examples``: an invalid one
  must get the rule's finding where its ``at`` says (line and column, as Fixit's ``range``)
  and, when ``fixed`` is given, fix to exactly that text; a
  valid one must get no finding of the rule. ``tests/test_rule_examples.py`` runs them all.
- :class:`ProgramCase`, registered with ``@case(...)`` in the rule's module: a small model,
  the error codes the linter must report on its exported program, and what the *stock*
  ``CoreMLPartitioner`` really does with it (a crash matching ``crash``, or a lowering
  whose MIL shows the wrong-value signature ``silent``, or a clean lowering). The oracle
  tests lower every case; ``coreml-lint lower`` must turn every failing one into a correct
  ``.pte``.

Model builders run only in tests: ``torch``, ``nn`` and ``F`` here are lazy stand-ins that
import torch on first use, so registering a case costs nothing on the light linting path.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Imports every snippet gets unless it brings its own.
SNIPPET_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


@dataclass(frozen=True)
class SourceExample:
    code: str
    fixed: str | None = None  # the expected text after --fix --unsafe-fixes (Invalid only)
    flagged: bool = True
    # Where the rule's first finding points, as (line, column) in ``code`` (1-based, as a
    # report prints them; Fixit's ``range``): an Invalid example pins what it flags.
    at: tuple[int, int] | None = None

    def source(self) -> str:
        """The snippet as a file: the standard imports unless it has its own."""
        return _as_file(self.code)

    def position(self, line: int, column: int) -> tuple[int, int]:
        """A position in :meth:`source` as a position in ``code``."""
        header = self.source().count("\n") - (self.code.strip("\n") + "\n").count("\n")
        leading = len(self.code) - len(self.code.lstrip("\n"))
        return line - header + leading, column

    def expected_fix(self) -> str | None:
        """The whole file ``--fix --unsafe-fixes`` must make of :meth:`source` (the standard
        imports are added to it the same way)."""
        return None if self.fixed is None else _as_file(self.fixed)


def _as_file(text: str) -> str:
    text = text.strip("\n") + "\n"
    return text if text.startswith(("import ", "from ")) else SNIPPET_HEADER + text


def Invalid(
    code: str, fixed: str | None = None, *, at: tuple[int, int] | None = None
) -> SourceExample:  # Fixit's name
    """Source the rule must flag at ``at`` (line, column in ``code``); ``fixed`` is what
    ``--fix --unsafe-fixes`` makes of it."""
    return SourceExample(code, fixed, flagged=True, at=at)


def Valid(code: str) -> SourceExample:  # Fixit's name
    """Source the rule must not flag."""
    return SourceExample(code, None, flagged=False)


@dataclass
class ProgramCase:
    id: str
    make: Callable[[], tuple[Any, tuple[Any, ...]]]
    expect: frozenset[str] = frozenset()  # error codes the linter must report
    settings: dict[str, Any] = field(default_factory=dict)  # ios, skip, take_over_*, ...
    crash: str | None = None  # regex the stock lowering's error must match
    silent: Callable[[Any], bool] | None = None  # MIL evidence of a wrong-value lowering
    clean: Callable[[Any], bool] | None = None  # extra evidence that the fixed form is right
    runs_on_portable: bool | None = None  # load+run the .pte on the pip portable runtime
    warnings: frozenset[str] | None = None  # warning codes, when the case is about one
    # `coreml-lint lower` cannot make a .pte: its one-line error must match this regex
    lowered_fails: str | None = None
    module: str = ""  # the module that declared it (a rule module, or tests/cases.py)


_CASES: dict[str, list[ProgramCase]] = {}


def case(id: str, *, expect: set[str] | frozenset[str] = frozenset(), **kw: Any) -> Any:
    """Register the decorated model builder as a program case of the calling module."""

    def register(make: Callable[[], tuple[Any, tuple[Any, ...]]]) -> Any:
        module = getattr(make, "__module__", "") or ""
        found = ProgramCase(id, make, frozenset(expect), module=module, **kw)
        _CASES.setdefault(module, []).append(found)
        return make

    return register


def cases_of(module: str) -> list[ProgramCase]:
    return list(_CASES.get(module, ()))


_DYNAMIC_CASES: dict[str, list[ProgramCase]] = {}


def dynamic_case(id: str, *, expect: set[str] | frozenset[str] = frozenset(), **kw: Any) -> Any:
    """Register a program case exported with dynamic shapes: the decorated builder returns
    ``(model, inputs, dynamic_shapes)``. Kept apart from :func:`case` (whose programs are
    exported with static shapes); ``tests/test_dynamic_oracle.py`` lowers every one.
    ``kw`` holds the stock lowering's settings (``ios=18``) beside ``crash`` / ``silent``."""

    def register(make: Callable[[], tuple[Any, ...]]) -> Any:
        module = getattr(make, "__module__", "") or ""
        settings = {k: kw.pop(k) for k in list(kw) if k in _SETTING_KEYS}
        found = ProgramCase(id, make, frozenset(expect), settings=settings, module=module, **kw)
        _DYNAMIC_CASES.setdefault(module, []).append(found)
        return make

    return register


_SETTING_KEYS = frozenset(
    {"ios", "skip", "take_over_mutable_buffer", "take_over_constant_data", "lower_full_graph"}
)


def dynamic_cases() -> list[ProgramCase]:
    """Every registered dynamic-shape case (of the rule modules imported so far)."""
    return [c for found in _DYNAMIC_CASES.values() for c in found]


class _Lazy:
    """A module imported on first attribute access (``torch.randn`` in a builder)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


torch: Any = _Lazy("torch")
nn: Any = _Lazy("torch.nn")
F: Any = _Lazy("torch.nn.functional")


def module(forward: Callable[..., Any], **buffers: Any) -> Any:
    """An ``nn.Module`` whose ``forward(self, *args)`` is ``forward`` and that registers
    ``buffers``."""

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, value in buffers.items():
                self.register_buffer(name, value)

        def forward(self, *args: Any) -> Any:
            return forward(self, *args)

    return M()


def wrapped(inner: Any, dtype: Any = None) -> tuple[Any, tuple[Any, ...]]:
    """A module that only calls ``inner`` (an ``nn.Module`` under test), in ``dtype``
    (float32 by default), with a ``(2, 5, 16)`` input."""
    dtype = dtype or torch.float32

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n = inner

        def forward(self, x: Any) -> Any:
            return self.n(x)

    return M().to(dtype), (torch.randn(2, 5, 16, dtype=dtype),)


def frame(dtype: Any = None) -> Any:
    """A (1, 3, 8, 8) image-like tensor of small integers, uint8 by default."""
    return torch.randint(0, 100, (1, 3, 8, 8)).to(dtype or torch.uint8)


def returns(pattern: str) -> Callable[[Any], bool]:
    """MIL evidence: the lowered delegates' MIL text matches ``pattern``."""
    return lambda lowered: re.search(pattern, lowered.mil) is not None
