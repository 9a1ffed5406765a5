"""A skip entry spelled the ATen way makes torch decompose the op; when the decomposition is
one core op (``layer_norm`` -> ``native_layer_norm``), the partitioner decides on that op's
name and delegates it. The prediction follows, and a finding's partitioner change is
printed only when linting again with it holds (the oracle cases in CML304 and CML605 lower
these models with the stock partitioner)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from coreml_lint import lint_program  # noqa: E402
from coreml_lint.core.config import LintConfig  # noqa: E402
from coreml_lint.core.settings import PartitionerSettings  # noqa: E402
from coreml_lint.program.placement import DECOMPOSES_TO  # noqa: E402
from coreml_lint.reports.text import render_full  # noqa: E402

F = torch.nn.functional


class Call(torch.nn.Module):
    """``fn(x)``; with ``image``, of x as a batch of 2 four-channel 8x1 images."""

    def __init__(self, fn, image: bool = False) -> None:
        super().__init__()
        self.fn, self.image = fn, image

    def forward(self, x):
        return self.fn(x.unsqueeze(-1) if self.image else x)


# A call of each op of DECOMPOSES_TO on a (2, 4, 8) input (4 channels).
MODELS = {
    "layer_norm.default": lambda: torch.nn.LayerNorm(8),
    "group_norm.default": lambda: torch.nn.GroupNorm(2, 4),
    "softmax.int": lambda: Call(lambda x: torch.softmax(x, -1)),
    "log_softmax.int": lambda: Call(lambda x: torch.log_softmax(x, -1)),
    "conv1d.default": lambda: torch.nn.Conv1d(4, 4, 3),
    "conv2d.default": lambda: Call(torch.nn.Conv2d(4, 4, 1), image=True),
    "conv_transpose2d.input": lambda: Call(torch.nn.ConvTranspose2d(4, 4, 1), image=True),
    "relu6.default": lambda: Call(F.relu6),
    "selu.default": lambda: Call(F.selu),
    "square.default": lambda: Call(torch.square),
    "clamp_min.default": lambda: Call(lambda x: torch.clamp_min(x, 0.1)),
    "true_divide.Tensor": lambda: Call(lambda x: torch.true_divide(x, x)),
    "floor_divide.default": lambda: Call(lambda x: torch.floor_divide(x, x)),
    "sum.default": lambda: Call(torch.sum),
    "adaptive_avg_pool2d.default": lambda: Call(lambda x: F.adaptive_avg_pool2d(x, 2), image=True),
    "adaptive_avg_pool3d.default": lambda: Call(
        lambda x: F.adaptive_avg_pool3d(x[..., None], 2), image=True
    ),
    "__and__.Tensor": lambda: Call(lambda x: x & x),
    "__or__.Tensor": lambda: Call(lambda x: x | x),
    "__xor__.Tensor": lambda: Call(lambda x: x ^ x),
}
# Ops of integers, called on integers instead.
INTEGER_OPS = {"__and__.Tensor", "__or__.Tensor", "__xor__.Tensor"}


class Norms(torch.nn.Module):
    """Two fp16 layer norms feeding a linear layer, as a transformer block has them."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.fc = (
            torch.nn.LayerNorm(8),
            torch.nn.LayerNorm(8),
            torch.nn.Linear(8, 8),
        )

    def forward(self, x):
        return self.fc(self.b(self.fc(self.a(x))))


def _lint(model, settings: PartitionerSettings, dtype=torch.float32):
    model = model.to(dtype).eval()
    ep = torch.export.export(model, (torch.randn(2, 4, 8, dtype=dtype),))
    return lint_program(ep, LintConfig(partitioner=settings))


@pytest.mark.parametrize("op", sorted(DECOMPOSES_TO))
def test_decomposes_to_is_what_torch_makes(op):
    x = torch.randint(0, 8, (2, 4, 8)) if op in INTEGER_OPS else torch.randn(2, 4, 8)
    ep = torch.export.export(MODELS[op]().eval(), (x,))
    before = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert f"aten.{op}" in before
    assert before <= {f"aten.{op}", "aten.unsqueeze.default"}
    after = ep.run_decompositions()
    made = {str(n.target) for n in after.graph.nodes if n.op == "call_function"}
    ignored = {"<built-in function getitem>", "aten.unsqueeze.default"}
    assert made - ignored == {f"aten.{DECOMPOSES_TO[op]}"}


def test_aten_skip_entry_leaves_the_decomposed_norm_delegated():
    settings = PartitionerSettings(16, ("layer_norm.default",))
    report = _lint(Norms(), settings, torch.float16)
    norms = [p for p in report.placement.nodes.values() if p.aten_name == "layer_norm.default"]
    assert len(norms) == 2
    assert {(p.where, p.edge_name) for p in norms} == {("coreml", "aten.native_layer_norm.default")}
    codes = {f.code for f in report.findings}
    assert "CML304" in codes  # the fp16 eps crash the stock lowering shows
    assert "CML605" in codes  # the entry moved nothing to the CPU


def test_cml603_partitioner_change_is_printed_only_when_it_holds():
    edge_skip = PartitionerSettings(16, ("aten.layer_norm.default",))
    fp16 = _lint(Norms(), edge_skip, torch.float16)
    (kept,) = [f for f in fp16.findings if f.code == "CML603"]
    assert kept.partitioner is None  # the ATen spelling leads to CML304 at fp16
    record = kept.extra["partitioner_not_enough"]
    assert record["introduces"] == ["CML304"] and "'layer_norm.default'" in record["partitioner"]
    text = render_full([kept])
    assert "is not enough: linting again with it reports CML304" in text
    assert "or partitioner:" not in text

    fp32 = _lint(Norms(), edge_skip)
    (kept,) = [f for f in fp32.findings if f.code == "CML603"]
    assert kept.partitioner == {
        "skip_ops_for_coreml_delegation": ["aten.layer_norm.default", "layer_norm.default"]
    }
    again = _lint(Norms(), edge_skip.merged(kept.partitioner))
    assert not [f for f in again.findings if f.severity.value == "error"]


def test_a_3d_adaptive_pool_is_decomposed_to_one_op_core_ml_has_no_converter_for():
    """``adaptive_avg_pool3d`` becomes ``_adaptive_avg_pool3d`` at the edge, which the stock
    partitioner leaves on the CPU (ExecuTorch's operator suite lowers it so): a float16
    input feeding it reaches no Core ML partition, so CML106 has nothing to say."""
    pool = Call(lambda x: F.adaptive_avg_pool3d(x, 2)).half()
    ep = torch.export.export(pool, (torch.randn(2, 4, 8, 8, 8).half(),))
    report = lint_program(ep)
    (placed,) = [p for p in report.placement.nodes.values() if "adaptive" in p.aten_name]
    assert placed.where == "cpu" and placed.edge_name == "aten._adaptive_avg_pool3d.default"
    assert "CML106" not in {f.code for f in report.findings}


@pytest.mark.oracle
def test_the_stock_lowering_leaves_a_float16_3d_adaptive_pool_on_the_cpu():
    """The oracle of the test above: the stock partitioner at iOS15 lowers the program
    (a float16 input would crash a Core ML partition) and delegates nothing."""
    from coreml_lint.stack.lowering import lower_stock

    pool = Call(lambda x: F.adaptive_avg_pool3d(x, 2)).half()
    ep = torch.export.export(pool, (torch.randn(2, 4, 8, 8, 8).half(),))
    lowered = lower_stock(ep)
    assert lowered.ok and lowered.delegate_calls == 0, lowered.message
    assert any("_adaptive_avg_pool3d" in op for op in lowered.cpu_ops)
