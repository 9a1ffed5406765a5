"""``coreml-lint verify --target coreai``: the whole program converted by coreai-torch, run on
Core AI's runtime on Linux and compared with eager, through the real CLI. Which programs
agree and which do not is Core AI's doing (tests/test_coreai_facts.py measures each)."""

from __future__ import annotations

import json

import pytest

from coreml_lint.cli.main import main
from coreml_lint.verifier.coreai import crash_location, crash_summary

CRASH = (
    "RuntimeError: Failed to run the pre-compilation rewrite pipeline: at "
    '#debuginfo.location<loc("/m/model.py":12:0) in @main metadata = [<"call_stack": '
    "[\"L$1\"]>]>: 'coreai.reduce_max' op operand #0 must be CoreAI Tensor of ..., but got "
    "'tensor<4x8xi1>'\nat #debuginfo.location<...>: see current operation: %4 = ..."
)


def test_crash_summary_keeps_the_error_and_the_source_line():
    assert crash_location(CRASH) == ("/m/model.py", 12)
    assert crash_summary(CRASH) == (
        "RuntimeError: Failed to run the pre-compilation rewrite pipeline: 'coreai.reduce_max' "
        "op operand #0 must be CoreAI Tensor of ..., but got 'tensor<4x8xi1>' "
        "(at /m/model.py:12)"
    )
    assert crash_location('loc("-":0:0)') == (None, None)
    assert crash_summary("IndexError: tuple index out of range") == (
        "IndexError: tuple index out of range"
    )


def _unread_archive(tmp_path, monkeypatch):
    """A file these refusals never read: the archive check (tested with real archives in
    test_cli) is passed over, so the refusal under test is the one that answers."""
    import coreml_lint.cli.verify as verify_cli

    monkeypatch.setattr(verify_cli, "damaged_archive", lambda programs: None)
    program = tmp_path / "p.pt2"
    program.write_bytes(b"not read")
    return program


def test_partitioner_settings_are_refused_for_core_ai(tmp_path, capsys, monkeypatch):
    program = _unread_archive(tmp_path, monkeypatch)
    assert main(["verify", "--target", "coreai", "--ios", "17", str(program)]) == 2
    assert "apply to Core ML, not --target coreai" in capsys.readouterr().err


def test_missing_core_ai_is_one_line(tmp_path, capsys, monkeypatch):
    import coreml_lint.coreai_stack as stack

    monkeypatch.setattr(stack, "coreai_missing", lambda: "coreai-core")
    program = _unread_archive(tmp_path, monkeypatch)
    assert main(["verify", "--target", "coreai", "-q", "--isolated", str(program)]) == 2
    err = capsys.readouterr().err
    assert "needs coreai-core" in err and "coreml-lint[coreai]" in err and "Traceback" not in err


# -- against the real converter and runtime -------------------------------------------------

torch = pytest.importorskip("torch")


def _needs_coreai():
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")


class Pool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False)


class BoolAmax(torch.nn.Module):
    def forward(self, x):
        return (x > 0).amax(-1).float() + x.sum(-1)


class Gelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


class Cache(torch.nn.Module):
    """Writes a buffer (Core AI state); ``pool``: writes it through the wrong avg_pool."""

    def __init__(self, pool: bool = False) -> None:
        super().__init__()
        self.pool = pool
        self.register_buffer("cache", torch.zeros(1, 3, 4, 4))

    def forward(self, x, pos):
        value = Pool()(x) if self.pool else x[..., ::2, ::2]
        self.cache.copy_(value)
        return self.cache.sum() + pos.sum()


def _verify(tmp_path, capsys, model, inputs, *extra):
    _needs_coreai()
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(model, inputs), path)
    code = main(["verify", "--target", "coreai", "-q", "--isolated", str(path), *extra])
    return code, capsys.readouterr().out


@pytest.mark.oracle
def test_clean_program_agrees(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, Gelu(), (torch.randn(4, 8),))
    assert code == 0, out
    assert "verify --target coreai: agree (the whole program on Core AI)" in out
    assert "inputs: example float32[4, 8]" in out


@pytest.mark.oracle
def test_wrong_border_windows_diverge_at_the_source_line(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, Pool(), (torch.randn(1, 3, 8, 8),))
    assert code == 1, out
    assert "CAI901 [error, silent] [semantic] output 0 (avg_pool2d)" in out
    assert "count_include_pad=False)" in out  # the model's source line is shown
    assert "verify --target coreai: diverge" in out


@pytest.mark.oracle
def test_conversion_crash_is_a_finding_at_the_source_line(tmp_path, capsys):
    code, out = _verify(tmp_path, capsys, BoolAmax(), (torch.randn(4, 8),))
    assert code == 1, out
    assert "CAI902 [error, crash] crashed in Core AI conversion (coreai-torch)" in out
    assert "'coreai.reduce_max' op operand #0 must be" in out
    assert f"{__file__}:" in out  # the converter's location, as the finding's


@pytest.mark.oracle
def test_state_is_compared_and_int64_inputs_are_fed_as_int32(tmp_path, capsys):
    inputs = (torch.randn(1, 3, 8, 8), torch.tensor([3]))
    code, out = _verify(tmp_path, capsys, Cache(), inputs, "--output-format", "json")
    data = json.loads(out)["verify"]
    assert code == 0, out
    assert data["partitions"][0]["states"] == ["cache"]
    assert "state cache" in data["partitions"][0]["semantic"]["outputs"]
    assert "int64 inputs fed as int32 (Core AI declares them int32)" in data["notes"]
    code, out = _verify(tmp_path, capsys, Cache(pool=True), inputs, "--output-format", "json")
    data = json.loads(out)
    assert code == 1
    outputs = {d["output"] for d in data["verify"]["divergences"]}
    assert "state cache" in outputs  # the written buffer is judged, not only the output
    assert {f["code"] for f in data["findings"]} == {"CAI901"}


@pytest.mark.oracle
def test_half_model_is_judged_in_its_own_float16(tmp_path, capsys):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU("tanh")).half()
    code, out = _verify(
        tmp_path, capsys, model, (torch.randn(2, 8).half(),), "--output-format", "json"
    )
    data = json.loads(out)["verify"]
    assert code == 0, out
    assert data["inputs"] == ["example float16[2, 8]"]
    assert data["partitions"][0]["float16"]["status"] == "agree"
