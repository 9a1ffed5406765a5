"""``coreml-lint migrate``: Core ML at each deployment target and Core AI, side by side, each
really run. Oracle: a program that crashes on Core ML and runs on Core AI (a uint8 input),
and one the other way round (avg_pool with ceil_mode)."""

from __future__ import annotations

import json

import pytest

from coreml_lint.cli.main import main
from coreml_lint.verifier.migration import Column, Migration


def test_view_says_where_the_program_runs():
    view = Migration(
        "p.pt2",
        [
            Column("Core ML iOS17", "lowering_crash", ["to_edge_transform_and_lower: KeyError"]),
            Column("Core ML iOS18", "diverge", ["output 0: max abs error 1"], "1 partition(s)"),
            Column("Core AI", "agree", [], "the whole program"),
        ],
    )
    text = view.render_text()
    assert "Core ML iOS17  CRASH\n" in text
    assert "Core ML iOS18  runs, WRONG values (1 partition(s))" in text
    assert "Core AI        runs, agrees with eager (the whole program)" in text
    assert text.endswith("=> runs correctly on: Core AI; fails on: Core ML iOS17, Core ML iOS18")
    data = view.to_json()
    assert [c["verdict"] for c in data["columns"]] == [
        "CRASH",
        "runs, WRONG values",
        "runs, agrees with eager",
    ]


def test_view_with_no_good_target():
    view = Migration("p.pt2", [Column("Core AI", "lowering_crash")])
    assert view.conclusion() == "=> no target runs this program correctly"


torch = pytest.importorskip("torch")


class Frame(torch.nn.Module):
    def forward(self, x):
        return x.float() * 0.5 + 1


class CeilPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True)


def _migrate(tmp_path, capsys, model, inputs, *extra):
    pytest.importorskip("executorch")
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(model, inputs), path)
    code = main(["migrate", "-q", str(path), "--output-format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.oracle
def test_crashes_on_core_ml_at_every_target_and_runs_on_core_ai(tmp_path, capsys):
    frame = torch.randint(0, 255, (1, 3, 8, 8), dtype=torch.uint8)
    code, data = _migrate(tmp_path, capsys, Frame(), (frame,))
    assert code == 1
    columns = {c["target"]: c for c in data["columns"]}
    assert list(columns) == [f"Core ML iOS{i}" for i in (15, 16, 17, 18)] + ["Core AI"]
    for ios in (15, 16, 17, 18):
        assert columns[f"Core ML iOS{ios}"]["status"] == "lowering_crash"
        assert "KeyError: torch.uint8" in columns[f"Core ML iOS{ios}"]["detail"][0]
    assert columns["Core AI"]["status"] == "agree"


@pytest.mark.oracle
def test_runs_on_core_ml_and_crashes_on_core_ai(tmp_path, capsys):
    code, data = _migrate(tmp_path, capsys, CeilPool(), (torch.randn(1, 3, 7, 7),), "--ios", "18")
    assert code == 1
    coreml, coreai = data["columns"]
    assert coreml["target"] == "Core ML iOS18" and coreml["status"] == "agree"
    assert coreml["placement"] == "1 Core ML partition(s); nothing on the CPU"
    assert coreai["status"] == "lowering_crash"
    assert "IndexError: tuple index out of range" in coreai["detail"][0]
