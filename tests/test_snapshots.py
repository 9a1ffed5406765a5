"""Every rule's full and concise output on its cases and source examples, checked as text:
a change of wording is a reviewed diff, as in ruff's snapshots.

One file per rule under ``tests/snapshots/``; ``UPDATE_SNAPSHOTS=1 pytest
tests/test_snapshots.py`` rewrites them (then read the diff). Paths are written relative to
the repository (``<tmp>`` for the scratch folder), so the files read the same on every
machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coreml_lint.cli.main import main
from coreml_lint.rulekit.examples import cases_of
from coreml_lint.rules import all_rules

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).with_name("snapshots")
FORMATS = ("full", "concise")
FLAGS = {
    "ios": lambda v: ["--ios", str(v)],
    "skip": lambda v: [a for op in v for a in ("--skip-op", op)],
    "take_over_mutable_buffer": lambda v: [] if v else ["--no-take-over-mutable-buffer"],
    "take_over_constant_data": lambda v: [] if v else ["--no-take-over-constant-data"],
    "lower_full_graph": lambda v: ["--lower-full-graph"] if v else [],
}


def _run(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    text = f"exit {code}\n{out}" + (f"stderr:\n{err}" if err else "")
    return text.replace(str(tmp_path), "<tmp>").replace(str(ROOT), "<root>")


def _program_sections(rule, tmp_path, capsys) -> list[str]:
    from conftest import _archive

    sections = []
    for case in cases_of(rule.__module__):
        path = tmp_path / f"{case.id}.pt2"
        path.write_bytes(_archive(case.id))
        flags = [a for key, value in case.settings.items() for a in FLAGS[key](value)]
        for fmt in FORMATS:
            output = _run([str(path), "--output-format", fmt, *flags], tmp_path, capsys)
            sections.append(f"## program case {case.id} {' '.join(flags)} [{fmt}]\n{output}")
    return sections


def _source_sections(rule, tmp_path, capsys) -> list[str]:
    sections = []
    examples = [e for e in getattr(rule, "examples", ()) if e.flagged]
    for index, example in enumerate(examples):
        path = tmp_path / f"example_{index}.py"
        path.write_text(example.source())
        for fmt in FORMATS:
            output = _run([str(path), "--output-format", fmt], tmp_path, capsys)
            sections.append(f"## source example {index} [{fmt}]\n{output}")
    return sections


def _needs_torch(rule) -> bool:
    return bool(cases_of(rule.__module__))


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_output_matches_its_snapshot(rule, tmp_path, capsys, monkeypatch):
    if _needs_torch(rule):
        pytest.importorskip("torch")
    monkeypatch.chdir(ROOT)
    sections = _source_sections(rule, tmp_path, capsys) + _program_sections(rule, tmp_path, capsys)
    text = f"# {rule.code} {rule.name}\n\n" + "\n".join(sections)
    snapshot = SNAPSHOTS / f"{rule.code}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        snapshot.write_text(text)
    assert snapshot.exists(), f"no snapshot for {rule.code}: UPDATE_SNAPSHOTS=1 to write it"
    assert text == snapshot.read_text(), f"{rule.code}'s output changed: see the diff above"


def test_every_rule_has_a_snapshot_and_no_snapshot_is_orphaned():
    codes = {rule.code for rule in all_rules()}
    files = {p.stem for p in SNAPSHOTS.glob("*.txt")}
    assert files == codes
