"""``lower --verify``: the result's delegates run against eager, and a rewrite is kept only
if the result verifies.

No shipped rule's rewrite is known to break a delegate (each one is checked in eager and,
in the catalogue's cases, verified here), so the rollback is proved with a rule made for the
test: its rewrite keeps eager within its tolerance (exact GELU written as tanh GELU) but not
Core ML, which runs tanh GELU as exact GELU (with CML305 and the measured rule CML801,
which would answer that, switched off). Verify sees the delegate depart from its own eager
module; ``lower`` lowers again without the rewrite, and keeps that.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

pytest.importorskip("coremltools")

from conftest import exported

import coreml_lint.engine.program as engine_program
import coreml_lint.lowering.mil as lowering_mil
import coreml_lint.rules as rules
from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.lowering.run import lower
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.rule import Rule

pytestmark = pytest.mark.oracle


class _ExactGeluAsTanh(Rule):
    """Fires on exact GELU; its rewrite makes it tanh GELU (eager: within 1e-2), which Core
    ML then computes as exact GELU again: the rewritten program does not verify."""

    code = "CML998"
    name = "test-exact-gelu-as-tanh"
    outcome = Outcome.SILENT
    summary = "a test rule"
    rewrite_tolerance = 1e-2

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target == "aten.gelu.default" and node.arg(1, "approximate", "none") == "none":
                yield ctx.finding(node, "exact GELU (test rule)", fix="none")

    def rewrite(self, ep: Any, settings: Any) -> tuple[Any, list[str]]:
        from coreml_lint.rulekit.fx import aten, finish

        done = []
        for node in ep.graph.nodes:
            if node.target == aten.gelu.default and node.kwargs.get("approximate") != "tanh":
                node.kwargs = {**node.kwargs, "approximate": "tanh"}
                done.append(f"{node.name}: exact GELU written as tanh GELU")
        return finish(ep), done

    def refuse(self, node: Any, settings: Any) -> str | None:
        name = getattr(node.target, "__name__", "")  # the ATen and the edge op
        exact = name.endswith("gelu.default") and node.kwargs.get("approximate", "none") == "none"
        return "exact GELU kept on the CPU (test rule)" if exact else None


class _NoOpRewrite(Rule):
    """Fires on every delegated linear and 'rewrites' it without changing anything: a
    rewrite that is not to blame for a divergence."""

    code = "CML997"
    name = "test-no-op-rewrite"
    outcome = Outcome.SILENT
    summary = "a test rule"

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        for node in ctx.coreml_nodes():
            if node.target in ("aten.linear.default", "aten.addmm.default", "aten.mm.default"):
                yield ctx.finding(node, "a linear (test rule)", fix="none")

    def rewrite(self, ep: Any, settings: Any) -> tuple[Any, list[str]]:
        names = [n.name for n in ep.graph.nodes if n.target == torch.ops.aten.linear.default]
        return ep, [f"{name}: left as it was" for name in names]


@pytest.fixture
def registry(monkeypatch):
    """Swap the rule registry the linter and ``lower`` consult."""

    def use(add: tuple[type[Rule], ...] = (), drop: tuple[str, ...] = ()) -> None:
        chosen = tuple(r for r in rules.all_rules() if r.code not in drop) + add
        for module in (rules, engine_program, lowering_mil):
            monkeypatch.setattr(module, "all_rules", lambda target="coreml": chosen)

    return use


class _LinearGelu(torch.nn.Module):
    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x), approximate=self.approximate) * 3.0


def _export(approximate: str):
    torch.manual_seed(0)
    model = _LinearGelu(approximate).eval()
    return torch.export.export(model, (torch.randn(4, 16) * 3,))


def test_a_shipped_rewrite_is_verified_and_kept():
    """The catalogue's tanh GELU: CML305's rewrite makes Core ML compute tanh GELU, and
    verify agrees, so the rewrite stands."""
    result = lower(exported("gelu-tanh"), verify=True)
    report = result.report
    assert report.rewritten_codes == ["CML305"]
    assert report.verify.status == "agree", report.verify.summary()
    assert report.dropped_rewrites == []


def test_a_rewrite_whose_result_diverges_is_dropped(registry):
    # CML305 would write the tanh GELU out again (lower repeats rewrites until stable), and
    # CML801 would keep it on the CPU by the op table: both off.
    registry(add=(_ExactGeluAsTanh,), drop=("CML305", "CML801"))
    said: list[str] = []
    result = lower(_export("none"), verify=True, progress=said.append)
    report = result.report
    # The first attempt applied the rewrite, and its delegate diverged: lowered again without.
    assert any("lowering again without the rewrite of CML998" in line for line in said)
    assert report.verify.status == "agree", report.verify.summary()
    assert report.rewritten_codes == []
    (dropped,) = report.dropped_rewrites
    assert dropped.startswith("the rewrite of CML998: dropped") and "diverged" in dropped
    assert "every Core ML delegate verifies" in dropped
    # Without the rewrite, the rule's other answer holds: the exact GELU stays on the CPU.
    assert "aten.gelu.default" in report.cpu_ops_after
    assert report.partitions_after == 2  # the linear before it, the product after
    assert "dropped    the rewrite of CML998" in report.render("x.pte")
    assert report.to_json()["dropped_rewrites"] == report.dropped_rewrites


def test_a_dropped_rewrite_that_leaves_nothing_on_core_ml_says_so(registry):
    """Where the rule's other answer keeps the whole program on the CPU, the report does not
    call that "verifies": nothing is left to diverge."""
    registry(add=(_ExactGeluAsTanh,), drop=("CML305", "CML801"))

    class OnlyGelu(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.gelu(x)

    program = torch.export.export(OnlyGelu(), (torch.randn(4, 16) * 3,))
    report = lower(program, verify=True).report
    assert report.partitions_after == 0 and report.verify.partitions == []
    (dropped,) = report.dropped_rewrites
    assert "nothing is left on Core ML" in dropped and "delegate verifies" not in dropped


class _ExactGeluAsTanhFirst(_ExactGeluAsTanh):
    """The same rule, applied before the shipped ones (rewrites go in code order)."""

    code = "CML000"
    name = "test-exact-gelu-as-tanh-first"


class _NormGelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.norm = torch.nn.RMSNorm(16)  # no eps: crashes the stock lowering (CML303)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.norm(self.linear(x))) * 3.0


def test_a_needed_rewrite_survives_the_search(registry):
    """Dropping CML303's rewrite (the last applied, so tried first) makes the lowering
    crash; that trial is passed over, and dropping the test rule's rewrite verifies."""
    registry(add=(_ExactGeluAsTanhFirst,), drop=("CML305", "CML801"))
    torch.manual_seed(0)
    program = torch.export.export(_NormGelu().eval(), (torch.randn(4, 16),))
    said: list[str] = []
    report = lower(program, verify=True, progress=said.append).report
    tried = [line for line in said if line.startswith("the result diverges")]
    assert tried == [
        "the result diverges: lowering again without the rewrite of CML303",
        "the result diverges: lowering again without the rewrite of CML000",
    ]
    assert report.verify.status == "agree", report.verify.summary()
    assert report.rewritten_codes == ["CML303"]
    (dropped,) = report.dropped_rewrites
    assert dropped.startswith("the rewrite of CML000: dropped")


def test_a_rewrite_not_to_blame_is_kept(registry):
    """The divergence comes from tanh GELU with CML305 switched off; dropping the no-op
    rewrite does not help, so it stays and the report says what was tried. ``verify``
    locates the divergence at the GELU, so ``lower`` then keeps that node on the CPU
    (``relower.py``) and the result verifies."""
    registry(add=(_NoOpRewrite,), drop=("CML305", "CML801"))
    result = lower(_export("tanh"), verify=True)
    report = result.report
    assert report.rewritten_codes == ["CML997"]
    assert [(m.node, m.kind) for m in report.moved] == [("gelu", "divergence")]
    assert report.verify.status == "agree", report.verify.summary()
    assert report.dropped_rewrites == []
    assert any("rewrites kept" in note and "CML997" in note for note in report.verify.notes)
    assert "note: rewrites kept" in report.render("x.pte")


def test_without_verify_nothing_is_tried(registry):
    registry(add=(_ExactGeluAsTanh,), drop=("CML305", "CML801"))
    result = lower(_export("none"))
    assert result.report.verify is None
    assert result.report.rewritten_codes == ["CML998"]


def test_lower_verify_feeds_the_example_inputs_saved_in_the_pt2(tmp_path, capsys):
    """``lower X.pt2 --verify`` verifies on the inputs ``verify X.pt2`` uses: the example
    inputs torch.export.save kept in the archive (not random ones shaped like them)."""
    from conftest import _archive

    from coreml_lint.cli.main import main

    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    code = main(["lower", str(program), "-o", str(tmp_path / "gelu.pte"), "--verify", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    (line,) = [line.strip() for line in out.splitlines() if line.strip().startswith("inputs:")]
    saved = torch.export.load(program).example_inputs[0]
    assert line == "inputs: " + ", ".join(
        f"example {str(t.dtype)[6:]}{list(t.shape)}" for t in saved
    )
