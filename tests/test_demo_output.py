"""What the README and the tool's own texts say is what a real run prints: the README's sample
blocks against the demo's lint, every unfixed finding of ``--diff`` with its reason, rule docs
and rows generated from what the rules report, and each rule's lowering sentences about its
own nodes. The tests that lower are the slow tier (``oracle``)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from coreml_lint.core.findings import Severity  # noqa: E402
from coreml_lint.core.settings import PartitionerSettings  # noqa: E402
from coreml_lint.rules import all_rules  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHOWN = "examples/build/pitfall_model.pt2"  # where the demo writes the program


@pytest.fixture(scope="module")
def demo_program(tmp_path_factory) -> Path:
    """The demo's program, exported as ``examples/export_example.py`` exports it."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from pitfall_model import CaptionModel, example_inputs
    finally:
        sys.path.remove(str(ROOT / "examples"))
    out = tmp_path_factory.mktemp("demo") / "pitfall_model.pt2"
    torch.manual_seed(0)
    torch.export.save(torch.export.export(CaptionModel().eval(), example_inputs()), out)
    return out


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _run(*args: str) -> Ran:
    """``coreml-lint ARGS`` in this process, from the repository root as the demo runs it."""
    from click.testing import CliRunner

    from coreml_lint.cli.main import main_group

    with _cwd(ROOT):
        result = CliRunner().invoke(main_group, list(args), prog_name="coreml-lint")
    return Ran(result.exit_code, result.stdout, result.stderr)


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _demo_lint(program: Path, *extra: str) -> str:
    """The demo's lint, with the program shown at the path the demo writes it to."""
    done = _run(str(program), "--show-placement", *extra)
    assert done.returncode == 1, done.stderr
    return done.stdout.replace(str(program), SHOWN)


def _readme_block(after: str) -> str:
    """The first fenced block after the sentence ``after`` in the README."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```\n(.*?)```", text[text.index(after) :], re.S)
    assert block, after
    return block.group(1).rstrip("\n")


@pytest.mark.parametrize("sentence", ["A finding looks like this:", "printed with honest counts:"])
def test_readme_samples_are_what_the_demo_prints(demo_program, sentence):
    sample = _readme_block(sentence)
    assert sample in _demo_lint(demo_program), f"the README's sample after {sentence!r} drifted"


def test_diff_gives_every_unfixed_program_finding_its_reason(demo_program):
    found = re.findall(
        r"^\S+:(\d+): (CML\d+) ", _run(str(demo_program), "--output-format", "concise").stdout, re.M
    )
    done = _run(str(demo_program), "--diff")
    would = re.search(r"Would fix (\d+) finding", done.stderr)
    reasons = re.findall(r"^\S+:(\d+): (CML\d+) not fixed: \S", done.stderr, re.M)
    assert would and found, done.stderr
    assert set(reasons) <= set(found)
    assert int(would.group(1)) + len(reasons) == len(found), done.stderr


def test_every_severity_a_rule_reports_is_in_its_row():
    """A rule module that spells a severity reports it: the README row must show it."""
    for rule in all_rules():
        text = Path(sys.modules[rule.__module__].__file__).read_text(encoding="utf-8")
        spelled = {Severity[name] for name in re.findall(r"Severity\.([A-Z]+)\b", text)}
        assert spelled <= set(rule.severities()), (rule.code, spelled, rule.severities())
    assert "| CML301 | fill-dtype-ignored | [error or warning, silent]" in README.read_text()


def test_fix_labels_run_in_order_in_every_rule_doc():
    for rule in all_rules():
        doc = rule.documentation()
        if "\nFix\n" not in doc:
            continue
        section = re.split(r"\n\S", doc.split("\nFix\n", 1)[1], maxsplit=1)[0]
        labels = list(dict.fromkeys(re.findall(r"\(([a-e])\)(?=\s)", section)))
        assert labels == [chr(ord("a") + i) for i in range(len(labels))], (rule.code, labels)


class Fills(torch.nn.Module):
    """An integer fill (CML301) and a like-op with another dtype (CML302) in one program."""

    def forward(self, x):
        fill = torch.full((2, 4), 3001) + x.long()
        mask = torch.zeros_like(x, dtype=torch.bool)
        return fill, mask


def test_fill_and_like_rewrites_are_filed_under_their_own_rule():
    from coreml_lint.rules.cml301_fill_dtype_ignored import FillDtypeIgnored
    from coreml_lint.rules.cml302_like_dtype_ignored import LikeDtypeIgnored

    def rewritten(rule):
        ep = torch.export.export(Fills(), (torch.randn(2, 4),)).run_decompositions({})
        return rule().rewrite(ep, PartitionerSettings())[1]

    fills, likes = rewritten(FillDtypeIgnored), rewritten(LikeDtypeIgnored)
    assert fills and all(s.startswith("full") for s in fills), fills
    assert likes and all(s.startswith("zeros_like") for s in likes), likes


def test_tanh_gelu_rewrite_says_what_it_makes():
    from coreml_lint.rules.cml305_tanh_gelu import TanhGelu

    class Gelu(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x, approximate="tanh")

    ep = torch.export.export(Gelu(), (torch.randn(2, 4),)).run_decompositions({})
    ep, sentences = TanhGelu().rewrite(ep, PartitionerSettings())
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "aten.tanh.default" in targets and "aten.gelu.default" not in targets
    assert sentences and all("tanh formula" in s and "fuse" not in s for s in sentences)


def test_check_advice_is_refused_where_it_would_print_nothing(demo_program):
    for extra in (
        ["--statistics"],
        ["--output-format", "github"],
        ["--diff"],
        ["--output-format", "model-explorer"],
    ):
        done = _run(str(demo_program), "--check-advice", *extra)
        assert done.returncode == 2 and "--check-advice reports in" in done.stderr, extra
        assert "Traceback" not in done.stderr


@pytest.mark.oracle
def test_concise_check_advice_prints_what_the_lowering_did(demo_program):
    done = _run(str(demo_program), "--check-advice", "--output-format", "concise")
    line = [x for x in done.stdout.splitlines() if "checked with the stock lowering:" in x]
    assert len(line) == 1, done.stdout
    assert "CoreMLPartitioner(" in line[0] and re.search(r"(lowers to a \.pte|fails in)", line[0])


@pytest.mark.oracle
def test_lower_report_headlines_the_lowering(demo_program, tmp_path):
    page, pte = tmp_path / "lowering.html", tmp_path / "model.pte"
    done = _run("lower", str(demo_program), "-o", str(pte), "--report", str(page))
    assert done.returncode == 0, done.stdout + done.stderr
    made = re.search(
        r"Core ML: (\d+) delegate\(s\) holding (\d+) edge op\(s\); CPU: (\d+) op\(s\)", done.stdout
    )
    assert made, done.stdout
    html = page.read_text(encoding="utf-8")
    lowered, predicted = html.split("Before lowering: the linter", 1)
    assert "Lowered with coreml-lint lower" in lowered
    for number, label in zip(
        made.groups(),
        ["Core ML delegates in the lowered program", "edge ops in Core ML", "ops on the CPU"],
        strict=True,
    ):
        assert f"<div class='n'>{number}</div><div class='l'>{label}</div>" in lowered, label
    assert "predicted crashes" not in lowered and "predicted crashes" in predicted
    assert "Core ML fuses" not in done.stdout


@pytest.mark.oracle  # imports the lowering stack
def test_check_advice_says_when_there_is_nothing_to_check(tmp_path):
    class Clean(torch.nn.Module):
        def forward(self, x):
            return x * 2

    program = tmp_path / "clean.pt2"
    torch.export.save(torch.export.export(Clean(), (torch.randn(2, 4),)), program)
    done = _run(str(program), "--check-advice", "--output-format", "concise")
    assert done.returncode == 0, done.stderr
    assert "no partitioner advice to check" in done.stderr


@pytest.mark.oracle
def test_tanh_gelu_rewrite_lowers_to_what_its_sentence_says():
    """The rewrite's sentence says "tanh formula": the Core ML program holds a tanh op and no
    gelu op (coremltools does not fuse torch's decomposition back)."""
    from conftest import exported
    from oracle import lower

    from coreml_lint.rules.cml305_tanh_gelu import TanhGelu

    ep, sentences = TanhGelu().rewrite(
        exported("gelu-tanh").run_decompositions({}), PartitionerSettings()
    )
    lowered = lower(ep)
    assert lowered.ok, lowered.message
    ops = set(re.findall(r"= (\w+)\(", lowered.mil))
    assert "tanh" in ops and "gelu" not in ops, ops
    assert all("tanh formula" in s for s in sentences)
