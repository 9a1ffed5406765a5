"""``coreml-lint lower --target coreai``: the program with the Core AI rules' rewrites,
converted by coreai-torch and written as a ``.aimodel`` only when Core AI's runtime on
Linux computes what eager computes. Oracle: every failing case a Core AI rule declares is
either written (and the asset *read back from disk* and run agrees with eager) or refused
naming the rule; clean cases are written untouched; a program Core AI computes wrongly
without any rule knowing it is refused by the verify."""

from __future__ import annotations

import json

import pytest

from coreml_lint.cli.main import main
from coreml_lint.rules import all_rules

RULES = all_rules("coreai")
CASES = [(rule, case) for rule in RULES for case in rule.program_cases()]
FAILING = [(r, c) for r, c in CASES if c.expect and (c.crash or c.silent)]
CLEAN = [(r, c) for r, c in CASES if not c.expect and not c.crash and not c.silent]


def test_every_core_ai_error_rule_has_a_lowering_answer_or_says_why_not():
    from coreml_lint.core.findings import Severity

    for rule in RULES:
        if rule.severity is not Severity.ERROR:
            continue
        assert rule.lowers() or rule.cannot_lower, f"{rule.code}: no hook and no reason"
        assert not (rule.lowers() and rule.cannot_lower), f"{rule.code}: both"
    lowering = {r.code for r in RULES if r.lowers()}
    assert lowering == {"CAI105", "CAI311", "CAI312"}


# -- refusals before anything is read: one line, exit 2 ---------------------------------------


def _program(tmp_path):
    program = tmp_path / "p.pt2"
    program.write_bytes(b"not read")
    return program


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--ios", "17"], "minimum_deployment_target apply to Core ML, not --target coreai"),
        (["--compute-units", "cpu_only"], "--compute-units apply to Core ML"),
        (["--compute-precision", "float32"], "--compute-precision apply to Core ML"),
        (["--dequantize-on-cpu"], "--dequantize-on-cpu apply to Core ML"),
        (["--output-format", "html"], "--output-format html is not supported with --target"),
    ],
)
def test_core_ml_options_are_refused_with_core_ai(tmp_path, capsys, extra, said):
    out = tmp_path / "m.aimodel"
    args = ["lower", "--target", "coreai", "-q", str(_program(tmp_path)), "-o", str(out)]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_output_that_is_no_asset_is_not_replaced(tmp_path, capsys, monkeypatch):
    import coreml_lint.cli.heavy as heavy

    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    monkeypatch.setattr(heavy, "damaged_archive", lambda programs: None)  # not read
    out = tmp_path / "model.pte"
    out.write_bytes(b"someone's file")
    code = main(["lower", "--target", "coreai", "-q", str(_program(tmp_path)), "-o", str(out)])
    assert code == 2
    assert "exists and is not a Core AI asset" in capsys.readouterr().err
    assert out.read_bytes() == b"someone's file"


def test_core_ml_lower_refuses_a_folder_as_its_pte(tmp_path, capsys):
    code = main(["lower", "-q", str(_program(tmp_path)), "-o", str(tmp_path)])
    assert code == 2
    assert "is a folder" in capsys.readouterr().err


def test_a_refusal_names_the_stage_once():
    from coreml_lint.lowering.coreai import _why_not
    from coreml_lint.verifier.coreai import CONVERT_STAGE, RUN_STAGE
    from coreml_lint.verifier.report import VerifyReport

    for stage in (CONVERT_STAGE, RUN_STAGE):
        report = VerifyReport(lowering_error="RuntimeError: x", lowering_stage=stage).finish()
        assert _why_not(report) == f"{stage} failed: RuntimeError: x"
        assert "Core AI Core AI" not in _why_not(report)


# -- against the real converter and runtime -------------------------------------------------


def _needs_coreai():
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")


def _save(tmp_path, model, inputs):
    import torch

    path = tmp_path / "program.pt2"
    ep = torch.export.export(model.eval(), inputs)
    torch.export.save(ep, path)
    return path, ep


def _lower(tmp_path, capsys, path, *extra):
    out = tmp_path / "model.aimodel"
    code = main(["lower", "--target", "coreai", "-q", str(path), "-o", str(out), *extra])
    captured = capsys.readouterr()
    return code, out, captured


def _run_written(out, ep, inputs):
    """The asset as written, loaded from disk by Core AI and run on ``inputs``."""
    import asyncio

    import numpy as np
    from coreai.authoring import AIModelAsset
    from coreai.runtime import NDArray

    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    arrays = [np.ascontiguousarray(v.numpy()) for v in inputs]
    arrays = [a.astype(np.int32) if a.dtype == np.int64 else a for a in arrays]

    async def run():
        asset = AIModelAsset.load(str(out))
        async with asset.executable() as model:
            function = model.load_function("main")
            result = await function({n: NDArray(a) for n, a in zip(names, arrays, strict=True)})
            return [result[f"output_{i}"].numpy().copy() for i in range(len(result))]

    return asyncio.run(run())


def _eager(model, inputs):
    out = model.eval()(*inputs)
    return [o.detach().numpy() for o in (out if isinstance(out, tuple) else (out,))]


def _unanswered(rule, case) -> bool:
    """The case's findings include one ``lower`` cannot answer (CAI110, bool max(dim))."""
    return not rule.lowers() or case.id == "coreai-bool-min-dim"


def test_a_refusal_before_converting_is_reported_in_every_format(tmp_path, capsys):
    """CAI110's clamp bound has no rewrite: lower stops before converting, and says so in
    the report it prints (JSON as after a conversion that failed), not only on stderr."""
    import torch

    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")

    class Clamp(torch.nn.Module):
        def forward(self, x):
            return (x * 10).long().clamp(-(2**35), 2**35).float()

    path, _ = _save(tmp_path, Clamp(), (torch.randn(2, 4),))
    code, out, captured = _lower(tmp_path, capsys, path, "--json")
    assert code == 1, captured.err
    report = json.loads(captured.out)
    assert report["written"] is False and report["verify"] is None
    assert report["refused"].startswith("not lowered, CAI110: clamp with the integer constant")
    assert [f["code"] for f in report["findings_before"]] == ["CAI110"]
    code, out, captured = _lower(tmp_path, capsys, path)
    assert code == 1 and not out.exists()
    assert f"NOT written: {out}" in captured.out
    assert "  refused: not lowered, CAI110: clamp" in captured.out
    assert "converted as it is" not in captured.out


@pytest.mark.oracle
@pytest.mark.parametrize("pair", FAILING, ids=[c.id for _, c in FAILING])
def test_lower_answers_or_refuses_what_core_ai_breaks(tmp_path, capsys, pair):
    """A case that crashes or computes wrongly on Core AI as it is: written with the rule's
    rewrite, and the written asset agrees with eager; or refused, naming the rule."""
    import numpy as np
    import torch

    _needs_coreai()
    rule, case = pair
    torch.manual_seed(0)
    model, inputs = case.make()
    path, ep = _save(tmp_path, model, inputs)
    code, out, captured = _lower(tmp_path, capsys, path, "--output-format", "json")
    if _unanswered(rule, case):
        assert code == 1, captured.out
        report = json.loads(captured.out)  # the report, as for a refusal after converting
        assert not report["written"] and report["verify"] is None
        assert report["refused"].startswith(f"not lowered, {rule.code}: "), report["refused"]
        assert not out.exists() and not list(tmp_path.glob(".coreml-lint-*"))
        return
    assert code == 0, captured.out + captured.err
    report = json.loads(captured.out)
    assert report["written"] and report["verify"]["status"] == "agree"
    assert set(report["acted"]) == {rule.code}
    for actual, expected in zip(_run_written(out, ep, inputs), _eager(model, inputs), strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.oracle
@pytest.mark.parametrize("pair", CLEAN, ids=[c.id for _, c in CLEAN])
def test_clean_programs_are_written_untouched(tmp_path, capsys, pair):
    _needs_coreai()
    import torch

    torch.manual_seed(0)
    _, case = pair
    model, inputs = case.make()
    path, _ = _save(tmp_path, model, inputs)
    code, out, captured = _lower(tmp_path, capsys, path)
    assert code == 0, captured.out + captured.err
    assert "no Core AI rule needed an answer" in captured.out
    assert "verify --target coreai: agree" in captured.out
    assert (out / "metadata.json").is_file()


@pytest.mark.oracle
def test_all_three_rewrites_together_and_a_half_model(tmp_path, capsys):
    import torch
    import torch.nn.functional as F

    _needs_coreai()

    class Three(torch.nn.Module):
        def forward(self, x):
            hit = (x > 0).amax(-1).to(x.dtype)
            a = F.avg_pool2d(x.reshape(1, 2, 4, 4), 3, 2, 1, count_include_pad=False)
            b = F.avg_pool2d(x.reshape(1, 2, 4, 4), 3, 2, 1, ceil_mode=True)
            return hit, a, b

    for dtype in (torch.float32, torch.float16):
        path, _ = _save(tmp_path, Three(), (torch.randn(4, 8, dtype=dtype),))
        code, out, captured = _lower(tmp_path, capsys, path)
        assert code == 0, captured.out + captured.err
        assert all(f"  {c}  " in captured.out for c in ("CAI105", "CAI311", "CAI312"))
        assert "verify --target coreai: agree" in captured.out
    assert (out / "metadata.json").is_file()  # the second run replaced the first asset


@pytest.mark.oracle
def test_wrong_values_no_rule_knows_are_refused_by_the_verify(tmp_path, capsys):
    """int64 arithmetic past int32 at run time: no constant is past int32 (CAI110 is
    silent, CAI101 only warns), Core AI computes in int32 and wraps: nothing is written."""
    import torch

    _needs_coreai()

    class Square(torch.nn.Module):
        def forward(self, ids):
            return ids * ids

    path, _ = _save(tmp_path, Square(), (torch.tensor([[100000, 3]]),))
    code, out, captured = _lower(tmp_path, capsys, path)
    assert code == 1, captured.out
    assert f"NOT written: {out}" in captured.out
    assert "warning CAI101: input 'ids' is int64" in captured.out
    assert "refused: the converted program computes other values than eager (output 0" in (
        captured.out
    )
    assert not out.exists() and not list(tmp_path.glob(".coreml-lint-*"))
