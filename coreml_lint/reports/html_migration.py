"""The migration view as one HTML page: for one program, Core ML at each deployment target
and Core AI side by side (``verifier/migration.py``): whether each crashes, computes wrong
values or agrees with eager, and what runs where.

The page is static: every cell is written here, escaped (``html.py``'s ``_e``), with the
delegation report's stylesheet and the same Content-Security-Policy (no fetch, no script
needed), so it opens from disk or as a CI artifact.
"""

from __future__ import annotations

from typing import Any

from coreml_lint.core.version import __version__
from coreml_lint.reports.html import _CSP, _e
from coreml_lint.reports.html_assets import CSS

TITLE = "coreml-lint migration view"
# a column's status -> the tag's class (the delegation report's colours) and card class
_TAGS = {
    "agree": ("agrees", "ok"),
    "diverge": ("diverges", "silent"),
    "lowering_crash": ("refused", "bad"),
    "could_not_run": ("", ""),
}
_EXTRA_CSS = """
.migration th.target { font-size: 13px; }
.migration td { vertical-align: top; }
.migration .detail { font-family: var(--mono, monospace); font-size: 12px; white-space: pre-wrap;
  overflow-wrap: anywhere; }
p.headline { font-size: 16px; font-weight: 600; margin: 8px 0 14px; }
.migration .cards { margin-bottom: 14px; }
.migration .card .n { font-size: 17px; }
"""


def render_migration_html(view: Any) -> str:
    """``view`` (a ``Migration``: ``program``, ``columns``, ``headline()``, ``conclusion()``)
    as a self-contained page."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<link rel='icon' href='data:,'><title>{_e(TITLE)}</title>"
        f"<style>{CSS}{_EXTRA_CSS}</style></head>"
        f"<body><header class='top'><div><h1>{_e(TITLE)}</h1>"
        f"<div class='sub'>coreml-lint {_e(__version__)}: each column is a real run on this "
        "machine, not a prediction</div></div></header>"
        f"<main><section class='program migration' id='migration'>"
        f"<h2>{_e(view.program)}</h2>"
        f"<p class='headline' id='headline'>{_e(view.headline())}</p>"
        f"{_cards(view.columns)}{_table(view.columns)}"
        f"<p class='conclusion' id='conclusion'>{_e(view.conclusion())}</p>"
        "</section></main></body></html>"
    )


def _cards(columns: list[Any]) -> str:
    cards = []
    for column in columns:
        _, card = _TAGS.get(column.status, ("", ""))
        cards.append(
            f"<div class='card {card}' data-target='{_e(column.target)}'>"
            f"<div class='n'>{_e(column.verdict)}</div><div class='l'>{_e(column.target)}</div>"
            "</div>"
        )
    return f"<div class='cards'>{''.join(cards)}</div>"


def _table(columns: list[Any]) -> str:
    """One column per target; rows: the verdict, what runs where, what went wrong, time."""
    head = "".join(f"<th class='target'>{_e(c.target)}</th>" for c in columns)
    rows = [
        ("verdict", [_verdict(c) for c in columns]),
        ("what runs where", [_where(c) for c in columns]),
        ("what went wrong", [_detail(c.detail) for c in columns]),
        ("seconds", [f"{c.seconds:.1f}" for c in columns]),
    ]
    body = "".join(
        f"<tr data-row='{_e(name)}'><th>{_e(name)}</th>"
        + "".join(f"<td>{cell}</td>" for cell in cells)
        + "</tr>"
        for name, cells in rows
    )
    return f"<table class='t migration'><tr><th></th>{head}</tr>{body}</table>"


def _verdict(column: Any) -> str:
    tag, _ = _TAGS.get(column.status, ("", ""))
    return f"<span class='tag {tag}' data-status='{_e(column.status)}'>{_e(column.verdict)}</span>"


def _where(column: Any) -> str:
    if column.placement:
        return _e(column.placement)
    return "<i>nothing: it does not run</i>" if column.status == "lowering_crash" else "<i>-</i>"


def _detail(items: list[str]) -> str:
    if not items:
        return "<i>nothing</i>"
    return "".join(f"<div class='detail'>{_e(item)}</div>" for item in items)
