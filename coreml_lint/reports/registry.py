"""The one registry of output formats every command renders through.

A format is one module in ``reports/formats/`` that declares ``NAME`` (the
``--output-format`` value), ``RENDERERS`` (report kind -> render function: ``check``,
``verify``, ``lower``, ``migrate``), and ``CHECK_ADVICE`` (whether it shows what
``--check-advice`` found). A command offers exactly the formats that can render its kind, so
a new format reaches every command that it says it can render, and no other.

A render function takes the command's view of its results (``views.py``) and returns the text
to print or write.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import click

BUILTIN = ("full", "concise", "json", "github", "sarif", "html", "model_explorer")


@dataclass(frozen=True)
class OutputFormat:
    name: str
    renderers: Mapping[str, Callable[[Any], str]]
    check_advice: bool = False


_FORMATS: dict[str, OutputFormat] = {}
_loaded = False


def register(module: ModuleType) -> OutputFormat:
    """Add a format module (its ``NAME``, ``RENDERERS``, ``CHECK_ADVICE``); a name given
    again replaces the earlier format in place."""
    fmt = OutputFormat(
        module.NAME, dict(module.RENDERERS), bool(getattr(module, "CHECK_ADVICE", False))
    )
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    _FORMATS.pop(name, None)


def _formats() -> dict[str, OutputFormat]:
    """The built-in formats are imported on first use, in ``BUILTIN``'s order (the order the
    commands list them in)."""
    global _loaded
    if not _loaded:
        _loaded = True
        added = dict(_FORMATS)
        _FORMATS.clear()
        for name in BUILTIN:
            register(importlib.import_module(f"coreml_lint.reports.formats.{name}"))
        _FORMATS.update(added)
    return _FORMATS


def names(kind: str) -> tuple[str, ...]:
    """The formats that can render a report of ``kind``, in registration order."""
    return tuple(name for name, fmt in _formats().items() if kind in fmt.renderers)


def advice_names() -> tuple[str, ...]:
    """The formats that show ``--check-advice`` results."""
    return tuple(n for n in names("check") if _formats()[n].check_advice)


def render(name: str, kind: str, view: Any) -> str:
    """``view`` rendered by format ``name`` as a report of ``kind``."""
    return _formats()[name].renderers[kind](view)


class FormatChoice(click.Choice):
    """``--output-format``'s values for one report kind, read from the registry when the
    command line is parsed (so a format registered after import is offered too)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__((), case_sensitive=True)

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return names(self.kind)

    @choices.setter
    def choices(self, value: Any) -> None:
        """Click's ``__init__`` sets the choices; the registry holds them."""
