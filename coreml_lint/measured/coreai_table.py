"""What each op really does on Core AI, read from the measured table
``data/coreai_behaviour.json`` (torch-free).

The same sweep that measures Core ML (``python -m coreml_lint.sweep run --target coreai``)
converts each single-op program with coreai-torch and runs it on Linux's Core AI runtime
against eager; the table keeps the outcomes by the same key as Core ML's table
(``key.KeyMaker``: op, ``dtype:origin`` operands, variant, shape class, context), so
it is read by the same ``BehaviourTable``. Two things differ, both because Core AI runs the
whole program: a node's operand is made "inside" whenever another node makes it (one
program, no partitions: :class:`WholeProgram`), and the table has one "target", Core AI's
compatibility version 27 (:data:`COREAI_TARGET`).

Only measured answers are given (at the key, at other values of the same classes that all
agree, or at another shape class where the op behaves alike at every shape measured):
nothing is predicted from Core ML's measurements or from this machine's ``--measure``
cache, which are Core ML's.

The file is not named ``behaviour*.json``: Core ML's table reader picks its tables by that
name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from coreml_lint.measured.key import Key, KeyMaker
from coreml_lint.measured.table import (
    CLASS,
    DATA,
    MEASURED,
    SHAPE,
    Answer,
    BehaviourTable,
    load_table,
    same_call,
)
from coreml_lint.program.graph import Graph

COREAI_TABLE_PATH = DATA / "coreai_behaviour.json"
COREAI_TARGET = 27  # Core AI models carry compatibility version 27.0
COREAI_PACKAGES = ("torch", "coreai-torch", "coreai-core")


@dataclass(frozen=True)
class _Where:
    partition: int | None = 0


@dataclass(frozen=True)
class _Settings:
    take_over_constant_data: bool = True  # a Core AI program holds its weights


class WholeProgram:
    """Core AI's "placement" of a graph, as ``KeyMaker`` reads one: every node in the one
    program, every parameter, buffer and constant the program's own."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.settings = _Settings()
        self.nodes = {node.name: _Where() for node in graph.nodes}


def coreai_key_maker(graph: Graph) -> KeyMaker:
    """A ``KeyMaker`` that keys the nodes of ``graph`` as Core AI runs them."""
    return KeyMaker(graph, WholeProgram(graph))  # type: ignore[arg-type]


@cache
def _load(path: Path) -> BehaviourTable:
    return load_table(path, gated=False)


def coreai_table(path: Path | None = None) -> BehaviourTable | None:
    """The shipped Core AI table (None when none ships)."""
    path = path or COREAI_TABLE_PATH
    return _load(path) if path.exists() else None


def measured_answer(table: BehaviourTable, key: Key, context: str = "") -> Answer | None:
    """The measured outcome of a key on Core AI: at the key, at other values of its
    classes that all agree, or at another shape class where the op behaves alike at every
    shape measured. Never predicted."""
    entry = table.lookup(key, COREAI_TARGET, context)
    if entry is None:
        return None
    if entry.shape in ("*", key.shape):
        return Answer(entry, MEASURED if same_call(entry, key) else CLASS)
    return Answer(entry, SHAPE)


def describe_versions(table: BehaviourTable) -> str:
    found: dict[str, Any] = table.measured_with
    return ", ".join(f"{p} {found[p]}" for p in COREAI_PACKAGES if p in found)
