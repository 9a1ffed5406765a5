"""verify on whole models: no false alarm on real architectures and a CNN, the two silent
mislowerings no rule knew about (a finfo.min attention mask on a left-padded batch; ``1/x``
as ``inverse(x, epsilon=1e-4)``), and the lower-level entry point ``lower --verify`` uses.
"""

from __future__ import annotations

import json
import logging

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("coremltools")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from coreml_lint.verifier import capture_mlmodels, verify, verify_lowered  # noqa: E402

pytestmark = pytest.mark.oracle
logging.getLogger("coremltools").setLevel(logging.ERROR)


class PaddedAttention(nn.Module):
    """Decoder self-attention masked the way transformers masks it: causal and padding, with
    ``torch.finfo(float32).min`` where a key is not attended to."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, attention_mask):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).chunk(3, -1))
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        keep = causal[None, None] & attention_mask[:, None, None, :].bool()
        mask = torch.zeros(b, 1, t, t).masked_fill(~keep, torch.finfo(torch.float32).min)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(a.transpose(1, 2).reshape(b, t, d))


class Reciprocal(nn.Module):
    def forward(self, x):
        return 1 / x, torch.reciprocal(x) * 2


class TruncDiv(nn.Module):
    def forward(self, i):
        return torch.div(i * 1000, 7, rounding_mode="trunc")


class FloatToInt(nn.Module):
    def forward(self, x):
        return (x * 10).long(), torch.argmax(x, -1), x > 1.7999


class SmallCNN(nn.Module):
    """conv (groups, dilation), batch norm (also one that cannot fold into a conv), relu,
    max and average pools (ceil mode, padding), nearest and bilinear upsampling, a
    transposed conv with output padding."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.b2 = nn.BatchNorm2d(8)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.b3 = nn.BatchNorm2d(8)
        self.ct = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.fc = nn.Linear(4, 10)
        for norm in (self.b1, self.b2, self.b3):
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2, 2)
        x = F.relu(self.b2(self.c2(x)))
        x = self.b3(self.up(x))
        x = F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        x = self.ct(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def _export(model: nn.Module, inputs: tuple) -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(model.eval(), inputs)


def test_finfo_min_mask_on_a_left_padded_batch_is_nan_in_float16():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    left_padded = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    report = verify(_export(PaddedAttention(), (x, left_padded)), inputs=(x, left_padded))
    assert report.status == "diverge", report.summary()
    (divergence,) = report.divergences
    assert divergence.check == "float16" and divergence.kind == "nan"
    assert divergence.numbers["nan"] > 0 and divergence.numbers["index"][0] == 0
    assert divergence.target == "aten.masked_fill.Scalar"  # the finfo.min fill: -inf in fp16
    assert "finfo" in divergence.code
    assert report.partitions[0].semantic.status == "agree"  # finite at float32


def test_reciprocal_is_inverse_with_epsilon():
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    x[0, 1], x[0, 2] = 1e-3, -1e-3  # the example inputs verify uses by default
    report = verify(_export(Reciprocal(), (x,)))
    semantic = [d for d in report.divergences if d.check == "semantic"]
    assert len(semantic) == 2 and report.exit_code == 1
    for divergence in semantic:
        assert divergence.mil_op == "inverse" and divergence.target == "aten.reciprocal.default"
        assert round(abs(divergence.numbers["expected"])) in (1000, 2000)  # at x = +-1e-3
        assert abs(divergence.numbers["actual"] / divergence.numbers["expected"] - 1) > 0.09


def test_integer_division_runs_in_float16():
    """Found by verify (not in the catalogue): an integer ``div(rounding_mode="trunc")`` is
    computed as an fp16 division, rounded, then truncated (8000 / 7 -> 1143, eager 1142);
    the int64 result comes back as fp32, which the runtime converts (no divergence by
    itself)."""
    ids = torch.arange(16).reshape(2, 8)  # 8, 9 and 10 round up in fp16 (8000 / 7 = 1142.86)
    report = verify(_export(TruncDiv(), (ids,)))
    kinds = {(d.check, d.kind) for d in report.divergences}
    assert ("float16", "integer") in kinds and ("interface", "dtype") not in kinds
    wrong = next(d for d in report.divergences if d.kind == "integer")
    assert abs(wrong.numbers["expected"] - wrong.numbers["actual"]) == 1


class VectorTimesBatch(nn.Module):
    def forward(self, v, t):
        return torch.matmul(v, t)


def test_a_declared_output_shape_other_than_eagers_is_a_wrong_shape():
    """coremltools types ``matmul`` of a vector and a rank-3 tensor as (1, n) where the op
    computes (b, n): the program cannot execute as declared, and its interface already
    disagrees with eager, so the output is wrong (not "could not run")."""
    v, t = torch.randn(4), torch.randn(3, 4, 12)
    report = verify(_export(VectorTimesBatch(), (v, t)))
    assert report.status == "diverge", report.summary()
    semantic = next(d for d in report.divergences if d.check == "semantic")
    assert semantic.kind == "shape" and "(1, 12)" in semantic.message
    assert "(3, 12)" in semantic.message and semantic.target == "aten.matmul.default"
    # the same call at rank 2 declares what it computes
    assert verify(_export(VectorTimesBatch(), (v, torch.randn(4, 12)))).status == "agree"


def test_float16_rounding_flips_at_float_to_int_boundaries_are_excused():
    """In fp16, 1.7998 * 10 rounds to 18.0 where eager truncates 17.998 to 17: rounding at a
    float-to-int cast, not a wrong op (near-ties in argmax and comparisons likewise); the
    semantic pass is exact."""
    x = torch.tensor([[1.7998, 0.5, 1.7997, -2.0], [0.1, 0.10001, -1.0, -3.0]])
    report = verify(_export(FloatToInt(), (x,)), inputs=(x,))
    assert report.status == "agree", report.summary()
    outputs = report.partitions[0].float16.outputs
    first = next(iter(outputs.values()))  # (x * 10).long()
    assert first["kind"] == "integer" and first["excused"].startswith("fp16 rounding flips")
    assert all(o["kind"] is None for o in report.partitions[0].semantic.outputs.values())


class ResampleAndFractionalResize(nn.Module):
    """grid_sample becomes MIL ``resample``; nearest upsampling by 1.5 picks source pixels by
    the scale's own rounding. Both were once "not verified" (exit 2) on clean models; both now
    have kernels checked against eager."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op

    def forward(self, x, grid):
        if self.op == "resample":
            return F.grid_sample(x, grid, align_corners=False) * 2
        return F.interpolate(x, scale_factor=1.5, mode="nearest") * 2 + grid.sum()


@pytest.mark.parametrize(
    "op, mil_op", [("resample", "resample"), ("nearest", "upsample_nearest_neighbor")]
)
def test_resample_and_fractional_nearest_resize_are_verified(op, mil_op):
    inputs = (torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1)
    report = verify(_export(ResampleAndFractionalResize(op), inputs))
    assert report.status == "agree" and report.exit_code == 0, report.summary()
    assert not report.not_verified
    assert mil_op in report.partitions[0].float16.op_types


def test_small_cnn_agrees_and_exercises_the_kernels():
    torch.manual_seed(0)
    report = verify(_export(SmallCNN(), (torch.randn(1, 3, 16, 16),)))
    assert report.status == "agree", report.summary()
    ops = set(report.partitions[0].float16.op_types)
    assert {
        "conv",
        "conv_transpose",
        "batch_norm",
        "max_pool",
        "avg_pool",
        "upsample_nearest_neighbor",
        "upsample_bilinear",
    } <= ops


@pytest.mark.parametrize("name", ["bert", "gemma", "gpt2", "llama", "qwen2", "vit"])
def test_transformers_architectures(name):
    pytest.importorskip("transformers")
    from test_transformers import _export as export_architecture

    report = verify(export_architecture(name))
    # gemma's tanh GELU runs as exact GELU (CML305 flags it), but with these small random
    # activations its effect on the outputs (2e-7 of their scale) is float32 noise, and an
    # intermediate alone is never a finding: the outputs agree
    assert report.status == "agree", report.summary()
    assert report.partitions and all(p.status == "agree" for p in report.partitions)


def test_verify_lowered_user_inputs_and_explain(tmp_path):
    """The entry point ``lower --verify`` uses: an already-lowered program and the captured
    MlModels; inputs from a file; a rule named by the ``explain`` hook; JSON output."""
    from executorch.exir import to_edge_transform_and_lower

    from coreml_lint.stack import stock_partitioner as partitioner

    torch.manual_seed(0)
    ep = _export(Reciprocal(), (torch.randn(2, 8),))
    mlmodels: list = []
    with capture_mlmodels(mlmodels):
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner()])
    path = tmp_path / "inputs.pt"
    large = [[100.0, 200.0, -400.0, 1000.0, 500.0, 250.0, -1000.0, 300.0]] * 2
    torch.save((torch.tensor(large),), path)  # 1/(x + 1e-4) is within 1e-6 of 1/x here
    messages: list[str] = []
    report = verify_lowered(
        edge,
        mlmodels,
        inputs=path,
        progress=messages.append,
        explain=lambda node: "CML999" if "reciprocal" in node else None,
    )
    assert report.status == "agree", report.summary()
    assert messages and report.inputs == ["given float32[2, 8]"]
    small = torch.full((2, 8), 1e-3)
    report = verify_lowered(edge, mlmodels, inputs=(small,), explain=lambda node: "CML999")
    assert report.status == "diverge"
    assert {d.rule for d in report.divergences} == {"CML999"}
    data = json.loads(json.dumps(report.to_json()))
    assert data["exit_code"] == 1 and data["partitions"][0]["status"] == "diverge"
    assert data["divergences"][0]["numbers"]["max_abs"] > 0
    assert set(data["timings"]) >= {"eager", "float32_conversion", "interpreter"}


class TopScores(nn.Module):
    """A detector's score filter: scores under a threshold zeroed, sorted, boxes gathered
    (and, with ``offset``, a softplus whose dropped threshold is wrong on its own added)."""

    def __init__(self, offset: bool = False) -> None:
        super().__init__()
        self.offset = offset

    def forward(self, scores, boxes, y):
        kept = torch.where(scores > 0.9, scores, torch.zeros_like(scores))
        order = torch.argsort(kept, dim=-1, descending=True)[:, :12]
        top = torch.gather(boxes, 1, order.unsqueeze(-1).expand(-1, -1, 4))
        return top + F.softplus(y, threshold=1.0) if self.offset else top


def test_the_order_of_equal_values_in_a_sort_is_not_a_divergence():
    """Most scores are zeroed (about 4 of 40 pass 0.9), so the 12 kept hold ties: torch's
    unstable argsort and Core ML's order the zeros each their own way, and the boxes
    gathered differ, yet both are a correct sort. Indices that pick other values still
    diverge (``1 / x`` feeding the sort changes which are largest)."""
    inputs = (torch.rand(1, 40), torch.randn(1, 40, 4), torch.randn(1, 12, 4) * 3)
    report = verify(_export(TopScores(), inputs))
    assert report.status == "agree", report.summary()
    excused = [o.get("excused", "") for p in report.partitions for o in p.semantic.outputs.values()]
    assert any("order of equal values" in (e or "") for e in excused)
    # an error of its own in the same output is not the tie's: run again with eager's
    # indices in place, the output still diverges
    assert verify(_export(TopScores(offset=True), inputs)).status == "diverge"


class SortedInverse(nn.Module):
    def forward(self, x):
        return torch.sort(1 / x, dim=-1, descending=True).values


def test_a_sort_of_wrong_values_still_diverges():
    x = torch.tensor([[1e-3, 2e-3, 1.0, -5e-4, 0.5, 3e-3, 2.0, -1e-3]])
    report = verify(_export(SortedInverse(), (x,)))
    assert report.status == "diverge", report.summary()
