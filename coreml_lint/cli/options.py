"""CLI options derived from the one definition of the partitioner settings.

``settings_options`` adds one option per ``PartitionerSettings`` field (``--ios``,
``--skip-op``, ``--take-over-mutable-buffer/--no-...``, ...), each defaulting to None so
that the configuration file's value, then the field's default, applies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from coreml_lint.core.config import LintConfig, find_pyproject, load_config
from coreml_lint.core.errors import InputError
from coreml_lint.core.settings import SUPPORTED_IOS, setting_fields
from coreml_lint.rules import every_code


def _option_for(spec: Any) -> Callable[[Any], Any]:
    flag, help_text = spec.metadata["flag"], spec.metadata["help"]
    if isinstance(spec.default, bool):
        return click.option(f"{flag}/--no-{flag[2:]}", spec.name, default=None, help=f"{help_text}")
    if isinstance(spec.default, tuple):
        return click.option(flag, spec.name, multiple=True, help=help_text)
    return click.option(
        flag, spec.name, type=click.IntRange(min(SUPPORTED_IOS), max(SUPPORTED_IOS)), help=help_text
    )


def settings_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command with every partitioner setting as an option."""
    for spec in reversed(setting_fields()):
        command = _option_for(spec)(command)
    return command


import_option = click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE first: it registers custom ops the program uses (repeatable).",
)


def split_values(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--skip-op a,b --skip-op c`` -> ``("a", "b", "c")``."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def settings_changes(options: dict[str, Any]) -> dict[str, Any]:
    """The settings a command line gave (others are None / empty and keep their value)."""
    changes: dict[str, Any] = {}
    for spec in setting_fields():
        value = options.pop(spec.name, None)
        if isinstance(spec.default, tuple):
            value = split_values(value or ()) or None
        if value is not None:
            changes[spec.name] = value
    return changes


def build_config(
    config_path: Path | None,
    isolated: bool,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    settings: dict[str, Any] | None = None,
) -> LintConfig:
    """The configuration file's table (unless ``isolated``), then the command line's."""
    config = LintConfig() if isolated else load_config(config_path or find_pyproject(Path.cwd()))
    if select:
        config = replace(config, select=split_values(select))
    if ignore:
        config = replace(config, ignore=(*config.ignore, *split_values(ignore)))
    if settings:
        config = config.with_partitioner(**settings)
    codes = every_code()
    for selector in (*config.select, *config.ignore):
        s = selector.upper()
        if s != "ALL" and not any(code.startswith(s) for code in codes):
            raise InputError(f"unknown rule selector {selector!r} (see `coreml-lint rules`)")
    return config
