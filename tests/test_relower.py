"""``coreml-lint lower --verify`` learns from what no finding predicted: a converter crash
that names its node, and a divergence ``verify`` locates. The node moves to the CPU, the
result verifies, the report says which node moved and why, and the next ``check --measure``
of the program reads the node's call from the cache instead of measuring it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle


class PerChannelPReLU(torch.nn.Module):
    """A per-channel PReLU after a 3-d convolution: coremltools converts prelu on rank 5
    only when every alpha is the same (``prelu op: rank 3 or rank 5 input is only supported
    when all the values of alpha are same``); trained alphas differ. The op table measured
    it at ranks 2 and 3 (a model's rank-3 PReLU is predicted), not at rank 5."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv3d(4, 8, 1)
        self.act = torch.nn.PReLU(8)
        with torch.no_grad():
            self.act.weight.copy_(torch.linspace(0.1, 0.4, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x)) + 1


class ConstantLowClamp(torch.nn.Module):
    """``clamp`` with a constant lower bound (a buffer Core ML owns) and an input upper
    one: Core ML computes other values where the lower bound exceeds the upper, which
    these random bounds do in places. That depends on the values: the op table and
    ``--measure`` measure bounds that never cross, as a model's do, and find it right."""

    def __init__(self) -> None:
        super().__init__()
        seeded = torch.Generator().manual_seed(0)
        self.register_buffer("low", torch.randn(2, 3, 4, 5, generator=seeded))

    def forward(self, x: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * 2, self.low, high) + 1


def _save(model: torch.nn.Module, inputs: tuple, path: Path) -> Path:
    torch.export.save(torch.export.export(model.eval(), inputs), path)
    return path


def _run(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    command = [sys.executable, "-m", "coreml_lint", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)


def _errors(result: subprocess.CompletedProcess) -> list[dict]:
    return [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]


def _lower(program: Path, cache: Path) -> dict:
    """``lower --verify --json --report``: the JSON report (exit 0: verified), the .pte
    written, and the HTML page's text under ``page``."""
    out, page = program.with_suffix(".pte"), program.with_suffix(".html")
    args = ("lower", str(program), "-o", str(out), "--verify", "--json", "-q")
    result = _run(cache, *args, "--report", str(page))
    assert result.returncode == 0, result.stderr[-3000:]
    assert out.read_bytes()[4:8] == b"ET12"
    report = json.loads(result.stdout)
    assert report["verify"]["status"] == "agree", report["verify"]
    report["page"] = page.read_text()
    return report


def _lint(program: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    return _run(cache, "check", str(program), "--output-format", "json", *extra)


def test_an_unpredicted_crash_moves_its_node_and_the_next_lint_knows(tmp_path):
    program = _save(PerChannelPReLU(), (torch.randn(2, 4, 3, 4, 5),), tmp_path / "prelu.pt2")
    cache = tmp_path / "cache"
    assert _errors(_lint(program, cache)) == []  # nothing predicted it
    report = _lower(program, cache)
    (move,) = report["moved_to_cpu"]
    assert (move["node"], move["target"], move["kind"]) == ("prelu", "aten.prelu.default", "crash")
    assert move["edge_node"] == "aten_prelu_default"  # the converter's `located at:` name
    assert "prelu op: rank 3 or rank 5 input is only supported" in move["why"]
    assert move["measured"].startswith("measured alone: crash")
    assert "aten.prelu.default" not in " ".join(report["cpu_ops"])  # decomposed, then CPU
    assert "aten_prelu_default" in report["page"] and "moved to cpu" in report["page"]
    second = _lint(program, cache, "--measure")
    (finding,) = [f for f in _errors(second) if f["node"] == "prelu"]
    assert finding["code"] == "CML801" and finding["extra"]["basis"] == "here"
    assert "prelu op: rank 3" in finding["message"]
    assert "measuring aten.prelu.default" not in second.stderr  # read from the cache


def test_a_located_divergence_moves_its_node_and_its_call_is_measured_once(tmp_path):
    """verify locates the divergence at the clamp and lower moves it; its call measured
    alone (bounds that never cross) converts right, so the divergence depends on this
    model's values and stays verify's to prove; the measurement is cached."""
    inputs = (torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5))
    program = _save(ConstantLowClamp(), inputs, tmp_path / "clamp.pt2")
    cache = tmp_path / "cache"
    assert _errors(_lint(program, cache)) == []
    report = _lower(program, cache)
    assert [m["node"] for m in report["moved_to_cpu"]] == ["clamp"]
    (move,) = report["moved_to_cpu"]
    assert move["kind"] == "divergence" and move["edge_node"] == "aten_clamp_tensor"
    assert "semantic values" in move["why"]
    assert move["measured"].startswith("measured alone: ok")
    second = _lint(program, cache, "--measure")
    assert [f for f in _errors(second) if f["node"] == "clamp"] == []
    assert "measuring aten.clamp.Tensor" not in second.stderr  # the cache answers it


class Int16Output(torch.nn.Module):
    """A partition returning int16 at iOS17 (an argmax's indices cast down): coremltools
    refuses the model's output type (``dtype=int is unsupported for inputs/outputs of the
    model``) after converting every node, so the crash names none. (A float cast to int16
    is measured and predicted; a cast of int64 indices made inside Core ML is not.)"""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, -1).to(torch.int16)


def test_a_crash_that_names_no_node_moves_nothing_and_says_why(tmp_path):
    program = _save(Int16Output(), (torch.randn(2, 3, 4),), tmp_path / "int16.pt2")
    cache, out = tmp_path / "cache", tmp_path / "int16.pte"
    assert _errors(_lint(program, cache, "--ios", "17")) == []
    result = _run(cache, "lower", str(program), "-o", str(out), "--ios", "17", "-q")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "is unsupported for inputs/outputs of the model" in last
    assert last.endswith(
        "nothing moved to the CPU: the converter named no node (the crash is not attributable)"
    )
    assert not out.exists() and not cache.exists()  # nothing measured either
