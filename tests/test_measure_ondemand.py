"""``coreml-lint check --measure``: the nodes whose key the op table lacks get their own
single-op program, measured as the sweep measures, cached per stack version; a second run
measures nothing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from coreml_lint.core.settings import PartitionerSettings  # noqa: E402
from coreml_lint.measured.key import KeyMaker  # noqa: E402
from coreml_lint.measured.stack import cache_folder  # noqa: E402
from coreml_lint.measured.versions import active_table  # noqa: E402
from coreml_lint.program.canonical import canonicalize  # noqa: E402
from coreml_lint.program.placement import predict_placement  # noqa: E402
from coreml_lint.program.pt2 import read_pt2_stream  # noqa: E402


class Unsorted(torch.nn.Module):
    """topk(sorted=False) with k=4 and its indices unread: a key the sweep never made."""

    def forward(self, x):
        return torch.topk(x * 2.0, 4, dim=-1, sorted=False)[0].sum(-1)


def _save(model: torch.nn.Module, inputs: tuple, path: Path) -> Path:
    torch.export.save(torch.export.export(model.eval(), inputs), path)
    return path


def _placed(model: torch.nn.Module, inputs: tuple, label: str):
    """The canonical graph of the model's exported program and its iOS15 placement."""
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(model, inputs), buffer)
    buffer.seek(0)
    (graph,) = read_pt2_stream(buffer, label)
    graph = canonicalize(graph)
    return graph, predict_placement(graph, PartitionerSettings(minimum_deployment_target=15))


def test_a_nodes_case_is_its_own_call(tmp_path):
    from coreml_lint.sweep.ondemand import node_case, wanted

    graph, placement = _placed(Unsorted(), (torch.rand(2, 16),), "unsorted")
    found = {w.key.op: w for w in wanted(graph, placement, active_table())}
    topk = found["aten.topk.default"]
    assert topk.key.variant.endswith("outputs=partly-unused")
    case = topk.case
    assert case["op"] == "topk.default" and case["target"] == 15
    assert case["tensors"] == [
        {"shape": [2, 16], "dtype": "float32", "values": "typical", "origin": "in"}
    ]
    assert case["args"] == [{"t": 0}, 4, -1, True, False]
    assert case["returns"] == [0]  # only the values are read
    node = next(n for n in graph.nodes if n.target == "aten.topk.default")
    names = active_table().arg_names
    assert node_case(graph, KeyMaker(graph, placement), node, 15, names)["id"] == case["id"]


class Masked(torch.nn.Module):
    """``ids & 0xFF`` of an int64 made inside Core ML: the program's ``__and__`` is decomposed
    at the edge, and the table keys it whole, as the ``bitwise_and`` it is renamed to."""

    def forward(self, x):
        return ((x.abs() * 1000).long() & 0xFF).float() * 2.0


def test_a_node_the_table_keys_whole_is_measured_as_its_keyed_op(tmp_path):
    from coreml_lint.sweep.ondemand import wanted

    graph, placement = _placed(Masked(), (torch.rand(2, 8),), "masked")
    node = next(n for n in graph.nodes if n.target == "aten.__and__.Scalar")
    assert placement.nodes[node.name].decomposed  # what had kept it from being measured

    class Unmeasured:  # whatever the shipped table holds
        arg_names: dict = {}

        def lookup(self, key, target):
            return None

    found = {w.key.op: w for w in wanted(graph, placement, Unmeasured())}
    masked = found["aten.bitwise_and.Scalar"]
    assert masked.key.operands == "int64:op"
    assert masked.case["op"] == "bitwise_and.Scalar" and masked.case["args"][1] == 255


class Bounded(torch.nn.Module):
    def forward(self, x, lo, hi):
        return torch.clamp(x, min=lo, max=hi) * 2.0


def test_a_clamps_bounds_are_measured_as_models_hold_them(tmp_path):
    """Random bounds cross (a lower bound above the upper one), where torch and Core ML
    answer otherwise by definition: the case holds ``min`` at most 0 and ``max`` at least
    0, as the sweep's cases do."""
    from coreml_lint.sweep.ondemand import wanted
    from coreml_lint.sweep.values import make_tensor

    inputs = (torch.randn(4, 8), -torch.rand(4, 8), torch.rand(4, 8))
    graph, placement = _placed(Bounded(), inputs, "bounded")
    table = active_table()
    (clamp,) = [w for w in wanted(graph, placement, _unmeasured(table)) if "clamp" in w.key.op]
    signs = [t.get("sign") for t in clamp.case["tensors"]]
    assert signs == [None, "-", "+"]
    low, high = (make_tensor(t, seed) for seed, t in enumerate(clamp.case["tensors"][1:]))
    assert bool((low <= high).all())


def _unmeasured(table):
    """The shipped table's schema names, with nothing measured."""

    class Unmeasured:
        arg_names = table.arg_names

        def lookup(self, key, target):
            return None

    return Unmeasured()


def _lint(path: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    command = [sys.executable, "-m", "coreml_lint", "check", str(path), "--measure", *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.oracle
def test_measure_answers_unmeasured_keys_and_caches_them(tmp_path):
    program = _save(Unsorted(), (torch.rand(2, 16),), tmp_path / "unsorted.pt2")
    cache = tmp_path / "cache"
    first = _lint(program, cache, "--ios", "15", "--output-format", "concise")
    assert first.returncode == 1, first.stderr
    assert "measured on this machine" in first.stdout
    assert "only sorted=True supported for the topk" in first.stdout
    assert "measured now (" in first.stderr and "0 cached" in first.stderr
    second = _lint(program, cache, "--ios", "15", "--output-format", "concise")
    assert second.stdout == first.stdout
    assert "0 measured now" in second.stderr and "cached in" in second.stderr
    (folder,) = (cache / "coreml-lint" / "measured").iterdir()  # one stack version
    assert folder.name == cache_folder().name
    assert (folder / "behaviour.json").exists() and (folder / "results.jsonl").exists()
