"""Unreadable programs get one clear line naming the file, exit code 2, and no traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import _archive

from coreml_lint.cli.main import main
from coreml_lint.core.errors import InputError
from coreml_lint.engine.program import lint_pt2


def _rewrite(case_id: str, edit) -> bytes:
    """Copy a real archive, passing each member through ``edit(name, data)``."""
    source = zipfile.ZipFile(io.BytesIO(_archive(case_id)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            result = edit(info.filename, source.read(info))
            if result is not None:
                target.writestr(info.filename, result)
    return out.getvalue()


def _edit_json(change):
    def edit(name, data):
        if name.endswith("/models/model.json"):
            document = json.loads(data)
            change(document)
            return json.dumps(document)
        return data

    return edit


def _set_schema(document):
    document["schema_version"] = {"major": 99, "minor": 0}


def _undefined_reference(document):
    node = document["graph_module"]["graph"]["nodes"][0]
    node["inputs"][0]["arg"] = {"as_tensor": {"name": "never_defined"}}


def _drop_graph(document):
    del document["graph_module"]["graph"]


def _zip_version_too_new(data: bytes) -> bytes:
    """The central directory says a newer zip version is needed than Python reads."""
    start = zipfile.ZipFile(io.BytesIO(data)).start_dir
    damaged = bytearray(data)
    damaged[start + 6] = 84  # "version needed to extract" = 8.4
    return bytes(damaged)


def _shift_index_put_arguments(document):
    """Drop index_put's first input, so its tensor arguments are no longer where the schema
    puts them (a damaged archive; torch.export never writes this)."""
    node = next(n for n in document["graph_module"]["graph"]["nodes"] if "index_put" in n["target"])
    node["inputs"].pop(0)


BAD = {
    "not-a-zip": (b"this is not an archive", "not a .pt2 archive"),
    "empty": (b"", "not a .pt2 archive"),
    "truncated": (_archive("gelu-tanh")[:200], "not a .pt2 archive"),
    "no-graph": (
        _rewrite("gelu-tanh", lambda n, d: None if "/models/" in n else d),
        "no exported program",
    ),
    "bad-json": (
        _rewrite("gelu-tanh", lambda n, d: b"{oops" if n.endswith("model.json") else d),
        "not valid JSON",
    ),
    "deep-json": (
        _rewrite(
            "gelu-tanh",
            lambda n, d: b"[" * 100_000 + b"]" * 100_000 if n.endswith("model.json") else d,
        ),
        "nested too deeply",
    ),
    "unknown-schema": (
        _rewrite("gelu-tanh", _edit_json(_set_schema)),
        "unsupported .pt2 schema version 99.0",
    ),
    "undefined-value": (_rewrite("gelu-tanh", _edit_json(_undefined_reference)), "never_defined"),
    "missing-field": (_rewrite("gelu-tanh", _edit_json(_drop_graph)), "malformed exported program"),
    "zip-version": (_zip_version_too_new(_archive("gelu-tanh")), "damaged .pt2 archive"),
}
# Arguments moved off where the op's schema puts them: the reader accepts the archive, one
# rule cannot read its node. That rule is named; every other rule still reports.
SHIFTED = _rewrite("index-put-slice-multi", _edit_json(_shift_index_put_arguments))


@pytest.mark.parametrize("name", sorted(BAD))
def test_api_raises_one_clear_error(name, tmp_path):
    data, expected = BAD[name]
    path = tmp_path / f"{name}.pt2"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        lint_pt2(path)
    message = str(info.value)
    assert message.startswith(str(path)) and expected in message and "\n" not in message


@pytest.mark.parametrize("name", sorted(BAD))
def test_cli_exits_two_without_traceback(name, tmp_path, capsys):
    data, expected = BAD[name]
    path = tmp_path / f"{name}.pt2"
    path.write_bytes(data)
    good = tmp_path / "good.pt2"
    good.write_bytes(_archive("gelu-tanh"))
    code = main([str(path), str(good), "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "CML305" in out  # the readable file is still linted
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err


def test_a_rule_that_cannot_read_its_node_is_named_and_the_rest_still_report(tmp_path):
    path = tmp_path / "shifted.pt2"
    path.write_bytes(SHIFTED)
    (report,) = lint_pt2(path)
    (failure,) = report.internal_errors
    assert failure.code == "CML401" and "Traceback" in failure.traceback
    message = failure.describe(str(path))
    assert message.startswith(f"{path}: internal error in CML401 (") and "\n" not in message


def test_a_rule_that_raises_is_an_internal_error_naming_it(tmp_path, capsys, monkeypatch):
    """A bug in one rule: exit 2, one line naming the rule, every other finding kept;
    ``--verbose`` shows the traceback."""
    import coreml_lint.engine.program as engine_program
    from coreml_lint.rules import all_rules

    class Broken(all_rules()[0]):
        code, name = "CML999", "broken-on-purpose"

        def check(self, ctx):
            raise KeyError("meta['val']")

    chosen = (*all_rules(), Broken)
    monkeypatch.setattr(engine_program, "all_rules", lambda target="coreml": chosen)
    path = tmp_path / "gelu.pt2"
    path.write_bytes(_archive("gelu-tanh"))
    code = main([str(path), "--output-format", "concise"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "CML305" in out  # the other rules' findings are still reported
    assert err.count("\n") == 1 and "internal error in CML999 (broken-on-purpose)" in err
    assert "KeyError" in err and "Traceback" not in err
    assert main([str(path), "--output-format", "concise", "--verbose"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_missing_file(capsys, tmp_path):
    code = main([str(tmp_path / "nope.pt2")])
    _, err = capsys.readouterr()
    assert code == 2 and "no such file" in err


def test_subprocess_prints_no_traceback(tmp_path):
    path = tmp_path / "bad.pt2"
    path.write_bytes(b"garbage")
    exe = Path(sys.executable).with_name("coreml-lint")
    result = subprocess.run([str(exe), str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {path}: not a .pt2 archive (not a zip file)"


@pytest.mark.parametrize("where", ["under-a-file", "read-only"])
def test_an_output_path_that_cannot_be_written_is_one_line_naming_it(where, tmp_path, capsys):
    import os

    if where == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    if where == "under-a-file":
        target = program / "report.json"
    else:
        folder = tmp_path / "locked"
        folder.mkdir(mode=0o500)
        target = folder / "report.json"
    code = main([str(program), "--output-format", "json", "-o", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {target}: cannot write") and "internal error" not in err


@pytest.mark.parametrize("given", ["wrong-shape", "not-a-tensor-file"])
def test_lower_refuses_inputs_that_cannot_feed_the_program_before_lowering(given, tmp_path):
    """One line, exit 2, and no lowering: a verify that could not run after a whole
    lowering was the old answer, with exit 0."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    inputs = tmp_path / "inputs.pt"
    if given == "wrong-shape":
        torch.save((torch.randn(3, 3),), inputs)
    else:
        inputs.write_bytes(b"not a torch file")
    exe = Path(sys.executable).with_name("coreml-lint")
    args = [str(exe), "lower", str(program), "-o", str(tmp_path / "m.pte"), "--verify", "-q"]
    result = subprocess.run(
        [*args, "--inputs", str(inputs)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: --inputs: ")
    assert not (tmp_path / "m.pte").exists()


def test_a_folder_with_nothing_to_lint_says_so(tmp_path, capsys):
    """As ruff warns "No Python files found": nothing linted is not a pass in silence."""
    (tmp_path / "notes.txt").write_text("no model here\n")
    assert main([str(tmp_path)]) == 0
    assert "no .py or .pt2 files found" in capsys.readouterr().err
