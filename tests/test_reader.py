"""The light reader sees what torch sees, and canonicalisation matches run_decompositions."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from cases import CASE_IDS

from coreml_lint.engine.exported import graph_of
from coreml_lint.program.canonical import canonicalize
from coreml_lint.program.pt2 import read_pt2

DTYPES = {
    getattr(torch, name): name
    for name in (
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "bool",
        "bfloat16",
    )
}
SKIPPED = ("_assert_tensor_metadata", "_assert_scalar", "getitem")


def _target(node: torch.fx.Node) -> str:
    """An op as the reader names it: ``aten.add.Tensor``, and a Python operator on sizes
    (a data-dependent output's bounds check) by its module, ``_operator.ge``."""
    if type(node.target).__name__ == "builtin_function_or_method":
        return f"{node.target.__module__}.{node.target.__name__}"
    return str(node.target).removeprefix("torch.ops.")


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_reader_agrees_with_torch_export_load(case_id, export_case, tmp_path):
    path = tmp_path / "program.pt2"
    torch.export.save(export_case(case_id), path)
    (graph,) = read_pt2(path)
    loaded = torch.export.load(path)

    fx_nodes = [
        n for n in loaded.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)
    ]
    assert [n.name for n in graph.nodes] == [n.name for n in fx_nodes]
    assert [n.target for n in graph.nodes] == [_target(n) for n in fx_nodes]
    for node in loaded.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and node.name in graph.tensors:
            info = graph.tensors[node.name]
            assert info.dtype == DTYPES.get(val.dtype, info.dtype), node.name
            # a data-dependent size (``nonzero``'s rows) has no value: the reader keeps it
            # symbolic, not a number
            static = [isinstance(d, int) for d in val.shape]
            assert len(info.shape) == len(static), node.name
            for mine, theirs, known in zip(info.shape, val.shape, static, strict=True):
                assert mine == theirs if known else not isinstance(mine, int), node.name
    roles = {spec.arg.name: spec.kind.name.lower() for spec in loaded.graph_signature.input_specs}
    mapped = {
        "parameter": "parameter",
        "buffer": "buffer",
        "constant_tensor": "constant",
        "user_input": "user_input",
    }
    assert {s.name: s.kind for s in graph.inputs} == {k: mapped.get(v, v) for k, v in roles.items()}


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_in_memory_graph_equals_archive_graph(case_id, export_case, tmp_path):
    path = tmp_path / "program.pt2"
    torch.export.save(export_case(case_id), path)
    (from_file,) = read_pt2(path)
    in_memory = graph_of(export_case(case_id))
    assert [(n.name, n.target, n.args, n.kwargs) for n in in_memory.nodes] == [
        (n.name, n.target, n.args, n.kwargs) for n in from_file.nodes
    ]


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_canonical_graph_matches_run_decompositions(case_id, export_case):
    ep = export_case(case_id)
    expected = Counter(
        _target(n)
        for n in ep.run_decompositions({}).graph.nodes
        if n.op == "call_function" and not any(s in str(n.target) for s in SKIPPED)
    )
    actual = Counter(n.target for n in canonicalize(graph_of(ep)).nodes)
    assert actual == expected


def test_a_non_finite_float_is_read_as_the_number(tmp_path):
    """torch writes -inf, inf and NaN as the strings "-Infinity", "Infinity" and "NaN" (JSON
    holds no such number); the graph holds the floats, keyed as lower's hook keys them."""
    import math

    from coreml_lint.measured.values import value_text

    class Fills(torch.nn.Module):
        def forward(self, x):
            masked = x.masked_fill(x > 0, float("-inf"))
            return masked, x.clamp(max=float("inf")), x.masked_fill(x < 0, float("nan"))

    path = tmp_path / "fills.pt2"
    torch.export.save(torch.export.export(Fills(), (torch.randn(4),)), path)
    (graph,) = read_pt2(path)
    fills = [n for n in graph.nodes if n.target == "aten.masked_fill.Scalar"]
    assert fills[0].args[2] == -math.inf and math.isnan(fills[1].args[2])
    (clamp,) = [n for n in graph.nodes if n.target == "aten.clamp.default"]
    assert clamp.args[2] == math.inf
    assert [value_text(n.args[2]) for n in fills] == ["-inf", "nan"]
