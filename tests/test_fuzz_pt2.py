"""Thousands of damaged .pt2 archives: every one is either linted or refused with one clear
line (InputError); nothing else escapes, nothing is unpickled, and time stays bounded."""

from __future__ import annotations

import io
import json
import random
import zipfile
from pathlib import Path
from unittest import mock

import pytest
from conftest import _archive

from coreml_lint.core.errors import InputError
from coreml_lint.engine.program import lint_graph
from coreml_lint.program.pt2 import read_pt2_stream

SEEDS = ("transformer-block", "state-default-target", "index-put-slice-multi", "mha-bool-mask")
MUTANTS_PER_SEED = 600


def _members(case_id: str) -> list[tuple[str, bytes]]:
    """The archive's members, with the checkout's path in stack traces made the same on
    every machine, so a seed yields the same mutants in CI as on a laptop."""
    archive = zipfile.ZipFile(io.BytesIO(_archive(case_id)))
    root = str(Path(__file__).resolve().parents[1]).encode()
    return [
        (info.filename, archive.read(info).replace(root, b"/repo")) for info in archive.infolist()
    ]


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members:
            archive.writestr(name, data)
    return out.getvalue()


def _mutate_json(value, rng: random.Random, depth: int = 0):
    """Delete, retype or duplicate one thing somewhere in the document."""
    if isinstance(value, dict) and value and depth < 12:
        key = rng.choice(sorted(value))
        roll = rng.random()
        if roll < 0.2:
            value.pop(key)
        elif roll < 0.35:
            value[key] = rng.choice([None, 0, -1, "x", [], {}, 1e308, True])
        else:
            value[key] = _mutate_json(value[key], rng, depth + 1)
        return value
    if isinstance(value, list) and value and depth < 12:
        index = rng.randrange(len(value))
        roll = rng.random()
        if roll < 0.2:
            value.pop(index)
        elif roll < 0.35:
            value.append(value[index])
        else:
            value[index] = _mutate_json(value[index], rng, depth + 1)
        return value
    return rng.choice([None, 0, 99, "aten.nonexistent.default", [], {}, -5, "🦀"])


def mutants(case_id: str, count: int, seed: int):
    rng = random.Random(seed)
    members = _members(case_id)
    raw = _zip(members)
    model_index = next(i for i, (n, _) in enumerate(members) if n.endswith("/models/model.json"))
    for _ in range(count):
        kind = rng.randrange(9)
        if kind == 0:  # truncated
            yield "truncated", raw[: rng.randrange(len(raw))]
        elif kind == 1:  # flipped bytes anywhere
            data = bytearray(raw)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            yield "flipped", bytes(data)
        elif kind in (2, 3, 4):  # structurally damaged graph JSON
            document = json.loads(members[model_index][1])
            for _ in range(rng.randint(1, 4)):
                document = _mutate_json(document, rng)
            changed = list(members)
            changed[model_index] = (members[model_index][0], json.dumps(document).encode())
            yield "json", _zip(changed)
        elif kind == 5:  # duplicated, missing or renamed members
            changed = list(members)
            choice = rng.randrange(3)
            if choice == 0:
                changed.append(changed[model_index])
            elif choice == 1:
                changed.pop(rng.randrange(len(changed)))
            else:
                _, data = changed[rng.randrange(len(changed))]
                changed.append(
                    (rng.choice(["../../etc/passwd", "/abs/x", "a/models/\udcff.json"]), data)
                )
            try:
                yield "members", _zip(changed)
            except (UnicodeEncodeError, ValueError):
                continue
        elif kind == 6:  # graph text damaged at the byte level
            text = bytearray(members[model_index][1])
            start = rng.randrange(len(text))
            text[start : start + rng.randint(1, 50)] = rng.choice([b"", b"\xff\xfe", b"{[", b"]]}"])
            changed = list(members)
            changed[model_index] = (members[model_index][0], bytes(text))
            yield "bytes", _zip(changed)
        elif kind == 8:  # one zip header field set to an odd value (version, method, sizes...)
            yield "header", _damage_header_field(raw, rng)
        else:  # a deeply nested value inside an otherwise valid document
            document = json.loads(members[model_index][1])
            depth = rng.choice([50, 5000, 200_000])
            document["graph_module"]["graph"]["nodes"][0]["metadata"] = (
                json.loads("[" * min(depth, 900) + "]" * min(depth, 900)) if depth < 1000 else None
            )
            text = json.dumps(document).encode()
            if depth >= 1000:
                text = text.replace(
                    b'"metadata": null', b'"metadata": ' + b"[" * depth + b"]" * depth, 1
                )
            changed = list(members)
            changed[model_index] = (members[model_index][0], text)
            yield "nested", _zip(changed)


# (signature, [(offset, width), ...]) of the fixed-size fields of each zip record.
ZIP_FIELDS = (
    (b"PK\x03\x04", [(4, 2), (6, 2), (8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2)]),
    (b"PK\x01\x02", [(4, 2), (6, 2), (8, 2), (10, 2), (16, 4), (20, 4), (24, 4), (28, 2),
                      (30, 2), (32, 2), (34, 2), (42, 4)]),
    (b"PK\x05\x06", [(4, 2), (6, 2), (8, 2), (10, 2), (12, 4), (16, 4), (20, 2)]),
)  # fmt: skip


def _damage_header_field(raw: bytes, rng: random.Random) -> bytes:
    """Bit flips rarely hit the few bytes zipfile trusts; aim at them directly."""
    signature, fields = rng.choice(ZIP_FIELDS)
    starts = [i for i in range(len(raw)) if raw.startswith(signature, i)]
    start = rng.choice(starts)
    offset, width = rng.choice(fields)
    value = rng.choice([0, 1, 84, 99, (1 << 8 * width) - 1, rng.randrange(1 << 8 * width)])
    data = bytearray(raw)
    data[start + offset : start + offset + width] = value.to_bytes(width, "little")
    return bytes(data)


@pytest.mark.parametrize("case_id", SEEDS)
def test_damaged_archives_are_linted_or_refused(case_id, monkeypatch):
    import pickle

    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    outcomes: dict[str, int] = {}
    for index, (kind, data) in enumerate(
        mutants(case_id, MUTANTS_PER_SEED, seed=index_seed(case_id))
    ):
        try:
            outcome = "linted"
            for graph in read_pt2_stream(io.BytesIO(data), f"mutant{index}.pt2"):
                for failure in lint_graph(graph).internal_errors:  # named, the rest linted
                    message = failure.describe(graph.source)
                    assert message.startswith(f"mutant{index}.pt2") and "\n" not in message
                    outcome = "linted, a rule named"
        except InputError as exc:
            message = str(exc)
            assert message.startswith(f"mutant{index}.pt2") and "\n" not in message, message
            outcome = "refused"
        outcomes[f"{kind}:{outcome}"] = outcomes.get(f"{kind}:{outcome}", 0) + 1
    print(case_id, dict(sorted(outcomes.items())))
    assert sum(outcomes.values()) >= MUTANTS_PER_SEED * 0.9


def index_seed(case_id: str) -> int:
    return sum(map(ord, case_id))


def test_zip_bomb_is_refused_without_inflating(tmp_path):
    """A graph member that inflates to over 512 MiB is refused from its declared size."""
    path = tmp_path / "bomb.pt2"
    chunk = b" " * (1 << 20)
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        archive.open("bomb/models/model.json", "w", force_zip64=True) as member,
    ):
        for _ in range(520):
            member.write(chunk)
    assert path.stat().st_size < 5 * (1 << 20)
    inflated = []
    real_read = zipfile.ZipExtFile.read

    def counting_read(self, n=-1):
        data = real_read(self, n)
        inflated.append(len(data))
        return data

    with (
        mock.patch.object(zipfile.ZipExtFile, "read", counting_read),
        pytest.raises(InputError, match="refusing graphs over"),
    ):
        read_pt2_stream(io.BytesIO(path.read_bytes()), str(path))
    assert sum(inflated) < (1 << 20), f"inflated {sum(inflated)} bytes before refusing"
