"""Programs of several methods (prefill + decode): read together, checked together, and
lowered into one .pte whose Core ML delegates share one multifunction model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from coreml_lint.core.config import LintConfig  # noqa: E402
from coreml_lint.engine.program import lint_methods  # noqa: E402
from coreml_lint.program.methods import read_methods  # noqa: E402

CLI = str(Path(sys.executable).with_name("coreml-lint"))


class TinyLlama(nn.Module):
    """One decoder block with a static KV cache written at ``input_pos`` (index_copy_)."""

    def __init__(self, vocab=64, d=32, heads=2, cache=16):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.n1, self.n2, self.nf = (nn.RMSNorm(d, eps=1e-6) for _ in range(3))
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, heads, cache, d // heads))
        self.register_buffer("v_cache", torch.zeros(1, heads, cache, d // heads))
        self.register_buffer("mask", torch.full((cache, cache), float("-inf")).triu(1))

    def forward(self, tokens, input_pos):
        b, t = tokens.shape
        x = self.emb(tokens)
        h = self.n1(x)
        q, k, v = (
            z.view(b, t, self.heads, self.hd).transpose(1, 2)
            for z in (self.q(h), self.k(h), self.v(h))
        )
        self.k_cache.index_copy_(2, input_pos, k)
        self.v_cache.index_copy_(2, input_pos, v)
        mask = self.mask[input_pos][None, None]
        a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        x = x + self.down(F.silu(self.up(self.n2(x))))
        return self.head(self.nf(x))


class Branchy(nn.Module):
    """Prefill runs an op the partitioner never delegates; decode does not."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        y = self.a(x)
        if x.shape[1] > 1:
            y = torch.acosh(y.abs() + 1.5)
        return self.b(y)


def branchy_methods():
    model = Branchy().eval()
    return {
        "prefill": torch.export.export(model, (torch.randn(1, 4, 16),)),
        "decode": torch.export.export(model, (torch.randn(1, 1, 16),)),
    }


def methods(prefill=4):
    torch.manual_seed(0)
    model = TinyLlama().eval()
    tokens = torch.randint(0, 64, (1, prefill))
    return {
        "prefill": torch.export.export(model, (tokens, torch.arange(prefill))),
        "decode": torch.export.export(model, (tokens[:, :1], torch.tensor([prefill]))),
    }


def saved(tmp_path, programs):
    paths = []
    for name, ep in programs.items():
        torch.export.save(ep, tmp_path / f"{name}.pt2")
        paths.append(tmp_path / f"{name}.pt2")
    return paths


def _cross(reports):
    return [f for r in reports for f in r.findings if f.code == "CML609"]


def test_methods_with_different_partitions_are_flagged(tmp_path):
    graphs = read_methods(saved(tmp_path, branchy_methods()))
    assert [g.method for g in graphs] == ["prefill", "decode"]
    (finding,) = _cross(lint_methods(graphs, LintConfig()))
    assert "'decode' has 1 Core ML partition(s), 'prefill' has 2" in finding.message
    assert "aten.acosh.default" in finding.message and finding.file.endswith("decode.pt2")


def test_alike_methods_are_not_flagged(tmp_path):
    graphs = read_methods(saved(tmp_path, methods()))
    assert not _cross(lint_methods(graphs, LintConfig()))


def test_one_archive_of_several_programs_is_read_as_methods(tmp_path):
    from torch.export.pt2_archive._package import package_pt2

    path = tmp_path / "llm.pt2"
    package_pt2(path, exported_programs=branchy_methods())
    run = subprocess.run([CLI, str(path), "--ios", "18"], capture_output=True, text=True)
    assert run.returncode == 1 and "CML609" in run.stdout, run.stdout + run.stderr


def test_methods_flag_checks_the_files_together(tmp_path):
    from coreml_lint.checking.run import CheckRun

    paths = tuple(str(p) for p in saved(tmp_path, branchy_methods()))
    alone = CheckRun(LintConfig())
    alone.run(paths)
    assert not [f for f in alone.findings if f.code == "CML609"]
    together = CheckRun(LintConfig(), methods=True)
    together.run(paths)
    assert [f.code for f in together.findings] == ["CML609"] and not together.errors
    twice = subprocess.run([CLI, paths[0], paths[0], "--methods"], capture_output=True, text=True)
    assert twice.returncode == 2 and twice.stderr.count("\n") == 1, twice.stderr
    assert "method 'prefill' is also in" in twice.stderr


@pytest.mark.oracle
def test_stock_lowering_of_methods_with_different_partitions_fails_as_predicted(tmp_path):
    from coreml_lint.core.settings import PartitionerSettings
    from coreml_lint.stack import lower_program, stock_partitioner

    (finding,) = _cross(lint_methods(read_methods(saved(tmp_path, branchy_methods()))))
    settings = PartitionerSettings(minimum_deployment_target=18)
    lowering = lower_program(branchy_methods(), stock_partitioner(settings), to_executorch=False)
    assert lowering.error is not None, "predicted a crash, but the methods lowered"
    predicted = finding.message.split("fails with `")[1].rstrip("`")
    assert predicted == f"{type(lowering.error).__name__}: {lowering.error}"[: len(predicted)]


@pytest.mark.oracle
def test_lower_writes_one_pte_with_both_methods_sharing_one_core_ml_model(tmp_path):
    from executorch.exir._serialize._program import deserialize_pte_binary

    paths = [str(p) for p in saved(tmp_path, methods())]
    out = tmp_path / "llm.pte"
    run = subprocess.run(
        [CLI, "lower", *paths, "-o", str(out), "--ios", "18", "--verify", "-q"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "verify: agree (2 Core ML partition(s))" in run.stdout  # each method's delegate
    assert "prefill: index_copy" in run.stdout  # CML401's rewrite, applied in prefill only
    pte = deserialize_pte_binary(out.read_bytes())
    plans = {plan.name: plan for plan in pte.program.execution_plan}
    assert set(plans) == {"prefill", "decode"}
    blobs = [bytes(b.data) for b in pte.program.backend_delegate_data]
    assert len(blobs) == 2
    keys = {blob.split(b'"key": "')[1].split(b'"')[0] for blob in blobs}
    functions = {blob.split(b'"functionName": "')[1].split(b'"')[0] for blob in blobs}
    assert len(keys) == 1 and functions == {b"prefill", b"decode"}
    ((key, index),) = pte.named_data.pte_data.items()
    stored = pte.named_data.buffers[getattr(index, "buffer_index", index)]
    model = bytes(getattr(stored, "buffer", stored))
    assert key.encode() in keys and b"read_state" in model  # the KV cache is Core ML state
