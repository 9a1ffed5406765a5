"""CML608 derived-dims-saved: a saved program with derived dims fails in torch at lowering.

What it does
    Flags a ``.pt2`` archive whose range constraints include a derived dim (the program was
    exported with ``dynamic_shapes={"x": {2: 16 * _h}}``, a ``Dim`` multiplied or offset),
    read back from the file with ``torch.export.load``.

Why it breaks
    ``torch.export.load`` puts every range constraint into the program's shape
    environment, the derived dim's expression (``16*s16``) among the plain symbols. The
    first step of ``to_edge_transform_and_lower`` re-traces the program
    (``run_decompositions``), whose ``_replace_unbacked_bindings`` asks each key whether
    it is an unbacked symbol and fails on the expression: ``AssertionError: expected
    sympy.Symbol``, before the Core ML partitioner is reached, at every target. The same
    program lowered in the process that exported it, before saving, lowers. Not Core ML's
    fault, but the user meets it when lowering (torch 2.13, executorch 1.5.1).

Example
    ``_h = Dim("_h", min=1, max=32); ep = export(m, (x,), dynamic_shapes={"x": {2: 16 * _h,
    3: 16 * _h}}); torch.export.save(ep, "m.pt2")``, then lowering ``torch.export.load
    ("m.pt2")``.

Fix
    (a) Lower in the exporting process (``coreml_lint.lower(ep)`` or
    ``to_edge_transform_and_lower(ep, ...)`` before ``torch.export.save``). (b) Export
    the dim as a plain ``Dim`` (``Dim("h", min=16, max=512)``) when any size in the range
    is acceptable. ``coreml-lint lower`` reads the saved file and cannot undo what
    ``torch.export.load`` built.

References
    None found: apple/coremltools and pytorch/executorch issues and pull requests were
    searched (2026-12) without one that reports or fixes this pitfall.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coreml_lint.core.findings import Finding, Outcome
from coreml_lint.rulekit.context import ProgramContext
from coreml_lint.rulekit.examples import dynamic_case, nn, torch
from coreml_lint.rulekit.rule import Rule


def derived_keys(meta: dict[str, Any]) -> list[str]:
    """The range-constraint keys that are expressions rather than symbols."""
    if meta.get("derived_dims_loaded") is False:
        return []  # an in-memory program whose shape environment has no expression keys
    return [key for key in meta.get("range_constraints") or {} if not key.isidentifier()]


class DerivedDimsSaved(Rule):
    code = "CML608"
    name = "derived-dims-saved"
    outcome = Outcome.CRASH
    summary = (
        "saved program with derived dims (16 * Dim): to_edge_transform_and_lower fails "
        "with `expected sympy.Symbol` after torch.export.load"
    )
    cannot_lower = (
        "torch.export.load has already put the derived dims where torch's re-trace fails: "
        "lower the program in the process that exported it, before saving"
    )

    def check(self, ctx: ProgramContext) -> Iterator[Finding]:
        keys = derived_keys(ctx.graph.meta)
        if not keys:
            return
        yield ctx.finding(
            None,
            f"the program's range constraints hold derived dims ({', '.join(keys)}); loaded "
            "from this file, it fails in torch before Core ML is reached: "
            "`AssertionError: expected sympy.Symbol` in to_edge_transform_and_lower",
            fix="lower in the process that exported it (before torch.export.save), or "
            "export those sizes with a plain Dim",
        )


# -- program cases (dynamic shapes, saved and loaded): what the stock lowering really does --
def small_cnn() -> Any:
    """A CNN that pools its feature map (any height and width). Built inside a function:
    the lint path must not import torch."""

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x: Any) -> Any:
            return self.fc(torch.relu(self.conv(x)).mean((2, 3)))

    return SmallCNN().eval()


@dynamic_case("derived-dims-saved", expect={"CML608"}, crash=r"expected sympy\.Symbol")
def _():
    _h = torch.export.Dim("_h", min=1, max=32)
    _w = torch.export.Dim("_w", min=1, max=32)
    shapes = {"x": {2: 16 * _h, 3: 16 * _w}}
    return small_cnn(), (torch.randn(2, 3, 32, 32),), shapes


@dynamic_case("plain-dims-saved", expect=set())
def _():
    shapes = {"x": {2: torch.export.Dim("h", min=16, max=512)}}
    return small_cnn(), (torch.randn(2, 3, 32, 32),), shapes
