"""The table's rows made into ``Entry`` objects one op at a time, as the linter asks.

A lint reads the few dozen ops its program holds out of the several hundred the table
measures: parsing the JSON is cheap, making an ``Entry`` of every row is most of a load.
``OpRows`` keeps each op's rows as the file has them and makes an op's entries the first
time that op is asked for; ``Entries`` and ``ByOp`` are the two read-only views the reader
answers from (by full key, by op). Iterating over a view makes every op's entries.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from coreml_lint.measured.entry import Entry, parse_targets

FullKey = tuple[str, str, str, str]  # (op, operands, variant, context)


class OpRows:
    """Each op's raw rows; its entries made on first use (by full key, and in row order)."""

    def __init__(self, ops: dict[str, list[list[Any]]], messages: list[str]) -> None:
        self.raw = ops
        self.messages = messages
        self.made: dict[str, tuple[dict[FullKey, list[Entry]], list[Entry]]] = {}

    def of(self, op: str) -> tuple[dict[FullKey, list[Entry]], list[Entry]]:
        found = self.made.get(op)
        if found is None:
            by_key: dict[FullKey, list[Entry]] = {}
            in_order = []
            for operands, variant, context, shape, targets, outcome, message, cases in self.raw.get(
                op, ()
            ):
                text = self.messages[message] if message is not None else ""
                entry = Entry(
                    op, operands, variant, context, shape, parse_targets(targets), outcome,
                    text, cases,
                )  # fmt: skip
                by_key.setdefault((op, operands, variant, context), []).append(entry)
                in_order.append(entry)
            found = self.made[op] = (by_key, in_order)
        return found


class Entries(Mapping[FullKey, list[Entry]]):
    """(op, operands, variant, context) -> the entries measured at that call."""

    def __init__(self, rows: OpRows) -> None:
        self.rows = rows

    def __getitem__(self, key: FullKey) -> list[Entry]:
        return self.rows.of(key[0])[0][key]

    def __iter__(self) -> Iterator[FullKey]:
        for op in self.rows.raw:
            yield from self.rows.of(op)[0]

    def __len__(self) -> int:
        return sum(len(self.rows.of(op)[0]) for op in self.rows.raw)


class ByOp(Mapping[str, list[Entry]]):
    """op -> every entry measured of it."""

    def __init__(self, rows: OpRows) -> None:
        self.rows = rows

    def __getitem__(self, op: str) -> list[Entry]:
        if op not in self.rows.raw:
            raise KeyError(op)
        return self.rows.of(op)[1]

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows.raw)

    def __len__(self) -> int:
        return len(self.rows.raw)
