"""The checked-in op table is what the installed coremltools / executorch / torch say."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from executorch.backends.apple.coreml.partition import coreml_partitioner

from coreml_lint.program.optable import load_optable, sanitize_op_kind
from coreml_lint.program.placement import REFUSED_OPS
from coreml_lint.stack.optable_gen import TABLE_PATH


@pytest.mark.oracle  # imports coremltools and executorch: the slow tier regenerates the artifact
def test_table_has_no_drift():
    """Built in a fresh interpreter, as the generator runs: ops that other tests register
    in this process (torchao's codebook ops, once a quantized case is built) would show up
    in ExecuTorch's default decomposition table here."""
    script = "from coreml_lint.stack.optable_gen import build_table, render\n"
    script += "import sys; sys.stdout.write(render(build_table()))"
    fresh = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert TABLE_PATH.read_text() == fresh.stdout, (
        "data/optable.json is stale: run python -m coreml_lint.stack.optable_gen"
    )


def test_refusal_list_matches_executorch():
    names = {
        op.__name__
        for op in coreml_partitioner._UNSUPPORTED_OP_TARGETS
        if "::" not in op.__name__ and not op.__name__.startswith("aten.")
    }
    assert names == set(REFUSED_OPS)


def test_sanitize_matches_coremltools():
    from coremltools.converters.mil.frontend.torch.utils import sanitize_op_kind as reference

    for name in [
        "add.Tensor",
        "aten.add.Tensor",
        "matmul.default",
        "__and__.Tensor",
        "dim_order_ops._to_dim_order_copy.default",
        "slice_copy.Tensor",
        "aten::softmax",
        "mul.Scalar",
        "max.dim",
        "upsample_bilinear2d.vec",
    ]:
        assert sanitize_op_kind(name) == reference(name), name


def test_support_test_matches_coremltools_on_edge_ops():
    """Our name-only support test answers like coremltools' is_torch_fx_node_supported."""
    from coremltools.converters.mil.frontend.torch import is_torch_fx_node_supported

    table = load_optable()
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    checked = 0
    for name in sorted(table.core_aten):
        base, _, overload = name.partition(".")
        if base.endswith("_"):
            continue  # coremltools asserts on in-place ops; functional graphs have none
        op = getattr(getattr(torch.ops.aten, base), overload)
        node = graph.call_function(op, (x,))
        assert table.coreml_has_converter(name) == is_torch_fx_node_supported(node), name
        checked += 1
    assert checked > 150


def test_an_out_variant_is_the_overloads_own_as_executorch_finds_it():
    """ExecuTorch runs an op kept whole on the CPU through the out variant whose schema
    matches the overload's: ``where.self_out`` is ``where.self``'s, and ``torch.where(c)``
    (``where.default``) has none, however many out overloads the name has."""
    from coreml_lint.program.optable import load_optable

    table = load_optable()
    assert "where.self" in table.with_out_variant
    assert "where.default" not in table.with_out_variant
    assert "nonzero.default" in table.with_out_variant
    assert "pow.Tensor_Scalar" in table.with_out_variant  # ExecuTorch's lookup trips here
