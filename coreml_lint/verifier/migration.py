"""The migration view: for one program, side by side, what Core ML (through ExecuTorch's
stock ``CoreMLPartitioner``, at each deployment target iOS15-iOS18) and Core AI each really
do with it: whether it lowers or converts, whether it computes eager's values (the verify of
each target), and what runs where (Core ML partitions and the ops left on the CPU; Core AI
runs the whole program).

Each column is a real run on this machine, not a prediction: the stock lowering and its
MIL executed on Linux for Core ML, the converted program executed by Core AI's runtime.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from coreml_lint.core.settings import SUPPORTED_IOS, PartitionerSettings
from coreml_lint.verifier.report import VerifyReport

WORDS = {
    "agree": "runs, agrees with eager",
    "diverge": "runs, WRONG values",
    "lowering_crash": "CRASH",
    "could_not_run": "not verified",
}
# the headline's verb for each status
VERBS = {
    "lowering_crash": "crashes",
    "diverge": "computes WRONG values",
    "agree": "runs correctly",
    "could_not_run": "could not be verified",
}
FAMILIES = ("Core ML", "Core AI")


@dataclass
class Column:
    """One target's outcome."""

    target: str  # "Core ML iOS17", "Core AI"
    status: str  # a VerifyReport status
    detail: list[str] = field(default_factory=list)  # the crash, or each wrong output
    placement: str = ""  # what runs where
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return WORDS.get(self.status, self.status)


@dataclass
class Migration:
    program: str
    columns: list[Column] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for column, item in zip(self.columns, data["columns"], strict=True):
            item["verdict"] = column.verdict
        data["headline"] = self.headline()
        return data

    def headline(self) -> str:
        """One sentence per backend, targets grouped by outcome: "Crashes on Core ML at
        iOS15, iOS16, iOS17, iOS18; runs correctly on Core AI." """
        parts = []
        for family in FAMILIES:
            groups: dict[str, list[str]] = {}
            for column in self.columns:
                if column.target.startswith(family):
                    suffix = column.target[len(family) :].strip()
                    groups.setdefault(column.status, []).append(suffix)
            phrases = [
                f"{VERBS.get(status, status)} on {family}"
                + (f" at {', '.join(t for t in targets if t)}" if any(targets) else "")
                for status, targets in groups.items()
            ]
            if phrases:
                parts.append(" and ".join(phrases))
        text = "; ".join(parts) or "no target was run"
        return f"{text[0].upper()}{text[1:]}."

    def render_text(self) -> str:
        width = max(len(c.target) for c in self.columns) if self.columns else 0
        lines = [f"migration view of {self.program}:"]
        for column in self.columns:
            where = f" ({column.placement})" if column.placement else ""
            lines.append(f"  {column.target:<{width}}  {column.verdict}{where}")
            lines += [f"  {'':<{width}}    {item}" for item in column.detail]
        lines.append(self.conclusion())
        return "\n".join(lines)

    def conclusion(self) -> str:
        good = [c.target for c in self.columns if c.status == "agree"]
        bad = [c.target for c in self.columns if c.status in ("diverge", "lowering_crash")]
        if not bad:
            return "=> the program runs correctly on every target shown"
        if not good:
            return "=> no target runs this program correctly"
        return f"=> runs correctly on: {', '.join(good)}; fails on: {', '.join(bad)}"


def migrate(
    load: Callable[[], Any],
    label: str,
    *,
    inputs: Any = None,
    targets: tuple[int, ...] = SUPPORTED_IOS,
    coreai: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Migration:
    """``load()`` returns a fresh ``ExportedProgram`` (lowering consumes one); each Core ML
    target and Core AI run on it with the same ``inputs`` (None: the program's own)."""
    say = progress or (lambda message: None)
    view = Migration(label)
    for ios in targets:
        say(f"Core ML at iOS{ios}: lowering with the stock CoreMLPartitioner and verifying")
        view.columns.append(_coreml(load(), ios, inputs))
    if coreai:
        say("Core AI: converting, running and verifying")
        view.columns.append(_coreai(load(), inputs))
    return view


def _coreml(ep: Any, ios: int, inputs: Any) -> Column:
    from coreml_lint.stack import lower_stock
    from coreml_lint.verifier.api import verify_lowered

    start = time.perf_counter()
    column = Column(f"Core ML iOS{ios}", "could_not_run")
    lowering = lower_stock(ep, PartitionerSettings(minimum_deployment_target=ios))
    if lowering.error is not None:
        column.status = "lowering_crash"
        column.detail = [f"{lowering.stage}: {_first_line(lowering.message)}"]
    else:
        report = verify_lowered(lowering.edge, lowering.mlmodels, inputs=inputs)
        column.status, column.detail = report.status, _details(report)
        cpu = sorted(set(lowering.edge_cpu_ops))
        column.placement = f"{lowering.delegate_calls} Core ML partition(s)" + (
            f"; on the CPU: {', '.join(cpu)}" if cpu else "; nothing on the CPU"
        )
    column.seconds = time.perf_counter() - start
    return column


def _coreai(ep: Any, inputs: Any) -> Column:
    from coreml_lint.verifier.coreai import verify_coreai

    start = time.perf_counter()
    report = verify_coreai(ep, inputs=inputs)
    column = Column("Core AI", report.status, _details(report), "the whole program")
    if report.status == "lowering_crash":
        column.placement = ""
    column.seconds = time.perf_counter() - start
    return column


def _details(report: VerifyReport) -> list[str]:
    found = [f"{d.output}: {_first_line(d.message)}" for d in report.divergences]
    if report.lowering_error:
        found.append(f"{report.lowering_stage}: {_first_line(report.lowering_error)}")
    found += [f"not verified: {item}" for item in report.not_verified]
    return found


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if text and text.strip() else ""
    return line if len(line) <= 240 else line[:237] + "..."
