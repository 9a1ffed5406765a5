"""The command line as users meet it: exit codes, output formats, selection, config, noqa."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import _archive

from coreml_lint.cli.main import main
from coreml_lint.core.version import HEAVY_INSTALL
from coreml_lint.rules import all_rules

MODEL_SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F


    class Model(torch.nn.Module):
        def forward(self, x):
            y = F.gelu(x, approximate="tanh")
            return torch.full((1, 4), 3001) + y.sum().long()
    """
)


@pytest.fixture
def write_case(tmp_path):
    def write(case_id: str) -> Path:
        path = tmp_path / f"{case_id}.pt2"
        path.write_bytes(_archive(case_id))
        return path

    return write


@pytest.fixture
def model_file_program(tmp_path):
    """A model defined in a real file, exported, so findings point at that file's lines."""
    source = tmp_path / "model.py"
    source.write_text(MODEL_SOURCE)
    spec = importlib.util.spec_from_file_location("user_model", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(module.Model(), (torch.randn(1, 4),)), program)
    return source, program


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_program_exits_zero(capsys, write_case):
    code, out, _ = run(capsys, str(write_case("small-cnn")))
    assert code == 0
    assert "All checks passed!" in out


def test_findings_exit_one_and_show_model_line(capsys, model_file_program):
    source, program = model_file_program
    code, out, _ = run(capsys, str(program))
    assert code == 1
    assert f"{source}:8: CML305 [error, silent]" in out
    assert 'y = F.gelu(x, approximate="tanh")' in out
    assert "CoreMLPartitioner(skip_ops_for_coreml_delegation=['aten.gelu.default'])" in out


def test_folder_is_searched_for_programs(capsys, write_case, tmp_path):
    write_case("gelu-tanh")
    write_case("small-cnn")
    code, out, _ = run(capsys, str(tmp_path), "--output-format", "concise")
    assert code == 1
    assert out.count("CML305") == 1


def test_json_output_has_required_fields(capsys, write_case):
    code, out, _ = run(capsys, str(write_case("rmsnorm-no-eps")), "--output-format", "json")
    assert code == 1
    document = json.loads(out)
    (finding,) = document["findings"]
    for key in ("code", "severity", "message", "node", "op", "location"):
        assert key in finding
    assert finding["code"] == "CML303" and finding["severity"] == "error"
    assert finding["op"] == "aten.rms_norm.default"
    assert set(finding["location"]) >= {"path", "line"}
    assert document["programs"][0]["coreml_ops"]["aten.rms_norm.default"] == 1


def test_github_and_sarif_formats(capsys, write_case):
    program = str(write_case("maxpool-no-stride"))
    code, out, _ = run(capsys, program, "--output-format", "github")
    assert code == 1 and out.startswith("::error file=") and "title=CML306" in out
    code, out, _ = run(capsys, program, "--output-format", "sarif")
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["CML306"]
    assert len(sarif["runs"][0]["tool"]["driver"]["rules"]) == len(all_rules())


def test_select_and_ignore(capsys, model_file_program):
    _, program = model_file_program
    code, out, _ = run(
        capsys, str(program), "--select", "CML3", "--ignore", "CML305", "--output-format", "concise"
    )
    assert code == 1 and "CML301" in out and "CML305" not in out
    code, out, _ = run(capsys, str(program), "--select", "CML1")
    assert code == 0


def test_unknown_selector_is_a_usage_error(capsys, write_case):
    code, _, err = run(capsys, str(write_case("small-cnn")), "--select", "XYZ9")
    assert code == 2 and "unknown rule selector" in err


def test_pyproject_configuration(capsys, model_file_program, tmp_path, monkeypatch):
    _, program = model_file_program
    (tmp_path / "pyproject.toml").write_text(
        '[tool.coreml-lint]\nignore = ["CML301"]\nskip-ops = ["aten.gelu.default"]\n'
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, str(program), "--output-format", "concise")
    assert code == 0, out  # gelu skipped to the CPU by the configured partitioner, CML301 ignored


def test_partitioner_options_change_outcomes(capsys, write_case):
    program = str(write_case("state-default-target"))
    code, out, _ = run(capsys, program, "--output-format", "concise")
    assert code == 1 and "CML201" in out
    code, _, _ = run(capsys, program, "--ios", "18")
    assert code == 0
    code, _, _ = run(capsys, program, "--no-take-over-mutable-buffer")
    assert code == 0


def test_noqa_on_the_model_line(capsys, model_file_program):
    source, program = model_file_program
    text = source.read_text().replace('approximate="tanh")', 'approximate="tanh")  # noqa: CML305')
    source.write_text(text)
    code, out, _ = run(capsys, str(program), "--output-format", "concise")
    assert "CML305" not in out and "CML301" in out and code == 1
    source.write_text(text.replace("# noqa: CML305", "# noqa: CML999"))
    _, out, _ = run(capsys, str(program), "--output-format", "concise")
    assert "CML305" in out
    source.write_text("# coreml-lint: noqa\n" + MODEL_SOURCE)
    code, _, _ = run(capsys, str(program))
    assert code == 0


def test_statistics(capsys, model_file_program):
    _, program = model_file_program
    code, out, _ = run(capsys, str(program), "--statistics")
    assert code == 1
    assert "CML305" in out and "CML301" in out


def test_rule_documentation(capsys):
    code, out, _ = run(capsys, "rule", "CML305")
    assert code == 0 and "TANH_APPROXIMATION" in out and "Applies to" in out
    code, out, _ = run(capsys, "rules")
    assert code == 0 and len(out.strip().splitlines()) == len(all_rules())
    code, _, err = run(capsys, "rule", "CML999")
    assert code == 2 and "unknown rule" in err


def test_every_rule_has_documentation_sections():
    for rule in all_rules():
        doc = rule.documentation()
        assert doc.startswith(f"{rule.code} {rule.name}:"), rule.code
        for section in ("What it does", "Why it breaks", "Example", "Fix"):
            assert section in doc, (rule.code, section)


def test_installed_console_script(write_case):
    exe = Path(sys.executable).with_name("coreml-lint")
    result = subprocess.run(
        [str(exe), str(write_case("gelu-tanh")), "--output-format", "concise"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and "CML305" in result.stdout


def test_statistics_lists_each_rule_once(capsys, tmp_path):
    """CML301 can be an error on one line and a warning on another: still one line."""
    source = tmp_path / "fills.py"
    source.write_text("import torch\n\na = torch.full((2,), 3)\nb = torch.full((2,), 3001)\n")
    code, out, _ = run(capsys, str(source), "--statistics")
    assert code == 1
    (line,) = [line for line in out.splitlines() if "CML301" in line]
    assert line.split()[0] == "2" and "error 1" in line and "warning 1" in line


def test_fix_hints_say_what_is_true(capsys, tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import torch\n\na = torch.full((2,), 3001)\n")
    _, out, _ = run(capsys, str(source))
    assert "1 fixable with --fix" in out and "--unsafe-fixes" not in out
    source.write_text(
        "import torch\nimport torch.nn.functional as F\n\ny = F.gelu(x, approximate='tanh')\n"
    )
    _, out, _ = run(capsys, str(source))
    assert "1 more with --unsafe-fixes" in out and "fixable with --fix" not in out
    _, out, _ = run(capsys, str(source), "--fix")
    assert "1 left need --unsafe-fixes" in out
    code, out, _ = run(capsys, str(source), "--fix", "--unsafe-fixes")
    assert code == 0 and "Fixed 1 finding(s) in 1 file(s)." in out


def test_concise_output_has_no_advice_block(capsys, write_case):
    program = write_case("gelu-tanh")
    _, full, _ = run(capsys, str(program))
    assert "partitioner settings that avoid" in full
    _, concise, _ = run(capsys, str(program), "--output-format", "concise")
    assert "partitioner settings" not in concise and "CoreMLPartitioner(" not in concise


def test_json_carries_the_checkable_advice(capsys, write_case):
    code, out, _ = run(capsys, str(write_case("state-default-target")), "--output-format", "json")
    assert code == 1
    (program,) = json.loads(out)["programs"]
    advice = program["advice"]
    assert advice["partitioner"]["take_over_mutable_buffer"] is False
    assert advice["partitioner"]["minimum_deployment_target"] == 15
    assert advice["avoids"] == ["CML201"] and advice["leaves"] == [] == advice["introduces"]


@pytest.mark.oracle
def test_check_advice_reports_the_real_outcome(capsys, write_case):
    code, out, _ = run(capsys, str(write_case("state-default-target")), "--check-advice")
    assert code == 1  # the findings are still findings
    assert "checked with the stock lowering: lowers to a .pte" in out
    _, out, _ = run(capsys, str(write_case("grad-buffer-default-target")), "--check-advice")
    assert "checked with the stock lowering: lowers to a .pte" in out  # iOS18: state


def test_lower_without_the_heavy_packages_says_what_to_install(capsys, monkeypatch, tmp_path):
    import importlib.util as util

    real = util.find_spec
    monkeypatch.setattr(
        util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    code, _, err = run(capsys, "lower", str(tmp_path / "x.pt2"), "-o", str(tmp_path / "x.pte"))
    assert code == 2
    assert err.strip() == (
        "error: `coreml-lint lower` needs torch, executorch and coremltools (torch not "
        f"installed): {HEAVY_INSTALL}"
    )


@pytest.mark.parametrize("command", [(), ("verify",), ("lower",)], ids=["check", "verify", "lower"])
def test_an_output_in_a_missing_folder_is_refused(capsys, write_case, tmp_path, command):
    """-o in a folder that does not exist is a typo to report, not a folder to create."""
    missing = tmp_path / "nonexistent" / "dir"
    args = [*command, str(write_case("gelu-tanh")), "-o", str(missing / "report.html")]
    if not command:
        args += ["--output-format", "html"]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert (
        err.strip() == f"error: {missing / 'report.html'}: cannot write: no such folder {missing}"
    )
    assert not (tmp_path / "nonexistent").exists()


def _with_a_damaged_weight(archive: bytes) -> tuple[bytes, str]:
    """The archive with one byte of its first weight member flipped in place (the zip's
    directory and CRCs untouched, as a bad disk or a truncated copy leaves it)."""
    import io
    import struct
    import zipfile

    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        info = next(i for i in zf.infolist() if "/data/weights/" in i.filename and i.file_size)
    assert info.compress_type == zipfile.ZIP_STORED
    name_len, extra_len = struct.unpack(
        "<HH", archive[info.header_offset + 26 : info.header_offset + 30]
    )
    at = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    return archive[:at] + bytes([archive[at] ^ 0xFF]) + archive[at + 1 :], info.filename


@pytest.mark.parametrize("command", ["lower", "verify"])
def test_a_corrupted_archive_is_refused_before_anything_runs(capsys, tmp_path, command):
    """torch.export.load does not check CRCs and the lint never reads weights: lower and
    verify check the archive first, one line, exit 2, nothing written."""
    damaged, member = _with_a_damaged_weight(_archive("small-cnn"))
    program = tmp_path / "damaged.pt2"
    program.write_bytes(damaged)
    args = [command, str(program), "-o", str(tmp_path / "out.pte")]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: {program}: corrupted archive: {member} fails its CRC check; "
        "export or copy the .pt2 again"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.pt2"]


def test_ignoring_a_named_rule_ignores_its_node_for_the_measured_rule(capsys, write_case, tmp_path):
    """The tanh GELU is CML305's node: CML801 (the measured table) does not report it again,
    also when CML305 is ignored, so `ignore = ["CML305"]` silences it."""
    program = write_case("gelu-tanh")
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.coreml-lint]\nignore = ["CML305"]\n')
    code, out, _ = run(capsys, str(program), "--config", str(config), "--output-format", "json")
    assert [f["code"] for f in json.loads(out)["findings"]] == []
    assert code == 0
    # Selected alone, the measured rule still leaves the named rule's node to it.
    code, out, _ = run(capsys, str(program), "--select", "CML801", "--output-format", "json")
    assert [f["code"] for f in json.loads(out)["findings"]] == []


def test_concise_lines_say_which_program_they_come_from(capsys, write_case):
    first, second = write_case("gelu-tanh"), write_case("state-default-target")
    code, out, _ = run(capsys, str(first), str(second), "--output-format", "concise")
    assert code == 1
    lines = [line for line in out.splitlines() if ": CML" in line]
    assert {line.rsplit(" (in ", 1)[-1] for line in lines} == {f"{first})", f"{second})"}
