"""The HTML delegation report: where a program leaves Core ML, and why, before lowering.

``render_html`` returns one self-contained page (inline CSS, script and SVG; a
Content-Security-Policy that forbids every fetch) that opens from disk or as a CI artifact.
The summary, findings, advice, verify and lowering sections are plain HTML written here; the
partition flow is drawn by the inline script from a JSON block, so a 25k-node program costs
one header per partition up front and node rows only when a partition is opened.

Every string from the program (node names, messages, paths) is escaped: ``html.escape`` in
the markup written here, ``textContent`` in the script, and the JSON block escapes ``<``,
``>``, ``&`` and ``/`` so nothing in it can end the script element or spell a URL.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from coreml_lint.core.version import __version__
from coreml_lint.reports.html_assets import CSS, JS
from coreml_lint.reports.html_data import (
    HtmlProgram,
    program_data,
    summary_counts,
)

__all__ = ["HtmlProgram", "embed_json", "render_html"]

DEFAULT_TITLE = "coreml-lint delegation report"
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
_ADVICE_KEYS = ("code", "avoids", "leaves", "introduces", "partitioner")
_LOWERING_KEYS = (
    ("delegates", "Core ML delegates"),
    ("partitions_after", "Core ML delegates in the lowered program"),
    ("partitions_before", "Partitions with the stock partitioner"),
    ("coreml_ops_after", "Edge ops delegated"),
    ("rewrites", "Rewritten"),
    ("rejected_rewrites", "Rewrites not applied"),
    ("refused", "Refused: moved to the CPU"),
    ("returned_buffers", "Buffers handed back to ExecuTorch"),
    ("cpu_ops", "CPU ops"),
    ("cpu_ops_after", "CPU ops"),
    ("mil_problems", "Wrong-value signatures in the delegates' MIL"),
    ("suggestions", "Source changes that would keep more on Core ML"),
    ("findings_after", "Findings left after lowering"),
    ("settings", "Settings"),
)
_LOWERING_SKIP = {"findings_before", "coreml_ops_before"}


def _e(value: Any) -> str:
    """Escaped text; ``/`` too, so no text from a program can spell a URL in the file."""
    return html.escape(str(value), quote=True).replace("/", "&#47;")


def embed_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``</script>``,
    ``<!--`` and ``//`` cannot occur (``<``, ``>``, ``&``, ``/`` are escaped, which JSON
    allows inside strings, the only place they can be)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("/", "\\/")):
        text = text.replace(raw, escaped)
    return text


def _hue(pid: int) -> int:
    """The partition's colour; the script uses the same formula."""
    return round((pid * 137.508 + 200) % 360)


def _versions() -> str:
    try:
        from coreml_lint.program.optable import load_optable

        made = load_optable().generated_with
    except Exception:  # the header line is informative only
        return f"coreml-lint {__version__}"
    stack = ", ".join(f"{k} {v}" for k, v in made.items())
    return f"coreml-lint {__version__} \u00b7 predicted for {stack}"


def _generic(value: Any, depth: int = 0) -> str:
    """Free-form advice or lowering values: lists, mappings, findings, scalars."""
    if isinstance(value, dict) and depth < 3:
        rows = "".join(
            f"<tr><td class='mono'>{_e(k)}</td><td>{_generic(v, depth + 1)}</td></tr>"
            for k, v in value.items()
        )
        return f"<table class='t'>{rows}</table>" if rows else "<i>none</i>"
    if isinstance(value, (list, tuple)) and depth < 3:
        if not value:
            return "<i>none</i>"
        items = "".join(f"<li>{_generic(v, depth + 1)}</li>" for v in value)
        return f"<ul>{items}</ul>"
    if isinstance(value, dict):
        return _e(json.dumps(value, default=str))
    if hasattr(value, "code") and hasattr(value, "message"):
        return f"<b>{_e(value.code)}</b> {_e(value.message)}"
    return _e(value)


def _finding_like(value: Any) -> Any:
    if isinstance(value, dict) and "code" in value and "message" in value:
        return f"{value['code']}: {value['message']}"
    return value


def _card_row(cards: list[tuple[str, Any, str]]) -> str:
    body = "".join(
        f"<div class='card {cls}' data-card='{_e(label.split(' (')[0])}'>"
        f"<div class='n'>{n}</div><div class='l'>{_e(label)}</div></div>"
        for cls, n, label in cards
    )
    return f"<div class='cards'>{body}</div>"


def _lowered_cards(lowering: dict[str, Any] | None) -> str:
    """The headline of a ``lower --report`` page: what the lowering made, from the same
    report ``lower`` prints. The linter's cards below it are the prediction for the stock
    partitioner, before any answer, and are titled so."""
    if not lowering or "delegates" not in lowering:
        return ""
    left = len(lowering.get("findings_after") or [])
    problems = len(lowering.get("mil_problems") or [])
    cards = [
        ("ok", lowering["delegates"], "Core ML delegates in the lowered program"),
        ("", lowering.get("coreml_edge_ops", 0), "edge ops in Core ML"),
        ("", len(lowering.get("cpu_ops") or []), "ops on the CPU"),
        ("bad" if left else "ok", left, "errors lower left unanswered"),
        ("silent" if problems else "ok", problems, "wrong-value signatures in the MIL"),
    ]
    return (
        "<h3>Lowered with coreml-lint lower</h3>"
        f"{_card_row(cards)}"
        "<h3>Before lowering: the linter's prediction for the stock partitioner</h3>"
    )


def _cards(counts: dict[str, Any]) -> str:
    coreml, cpu = counts["coreml_nodes"], counts["cpu_nodes"]
    total = max(coreml + cpu, 1)
    cards = [
        ("ok" if coreml else "", coreml, f"nodes on Core ML ({len(counts['coreml_ops'])} ops)"),
        ("", cpu, f"nodes on the CPU ({len(counts['cpu_ops'])} ops)"),
        ("", counts["partitions"], "Core ML partitions"),
        ("bad" if counts["crashes"] else "ok", counts["crashes"], "predicted crashes"),
        ("silent" if counts["silent"] else "ok", counts["silent"], "silent wrong values"),
    ]
    by_severity = counts["by_severity"]
    cards.append(
        (
            "",
            sum(by_severity.values()),
            f"findings: {by_severity.get('error', 0)} error, "
            f"{by_severity.get('warning', 0)} warning, {by_severity.get('info', 0)} info",
        )
    )
    share = 100.0 * coreml / total
    return (
        f"{_card_row(cards)}"
        f"<div class='ratio' title='{share:.1f}% of nodes on Core ML'>"
        f"<div class='c' style='width:{share:.2f}%'></div></div>"
        "<div class='legend'><span><i class='sw' style='background:#2f80ed'></i>Core ML "
        f"{share:.1f}%</span><span><i class='sw' style='background:#6b7280'></i>CPU "
        f"{100 - share:.1f}%</span></div>"
    )


def _advice(advice: dict[str, Any] | None, findings: int) -> str:
    out = ["<h3>Combined advice</h3>"]
    if not advice:
        text = (
            "No finding: nothing to change."
            if not findings
            else "No partitioner change to advise: use the source fixes."
        )
        out.append(f"<p class='legend'>{_e(text)}</p>")
        return "".join(out)
    if advice.get("code"):
        out.append(f"<pre class='code'>{_e(advice['code'])}</pre>")
    rows = []
    for key in [*_ADVICE_KEYS[1:], *(k for k in advice if k not in _ADVICE_KEYS)]:
        if key in advice:
            value = advice[key]
            shown = _generic(
                [_finding_like(v) for v in value] if isinstance(value, list) else value
            )
            rows.append(f"<span class='k'>{_e(key.replace('_', ' '))}</span><span>{shown}</span>")
    if rows:
        out.append(f"<div class='kv advice'>{''.join(rows)}</div>")
    return "".join(out)


def _ops_tables(counts: dict[str, Any]) -> str:
    cpu = counts["cpu_ops"]
    out = ["<h3>Why nodes run on the CPU</h3>"]
    if cpu:
        rows = "".join(
            f"<tr><td class='mono'>{_e(op)}</td><td>{entry['count']}</td>"
            f"<td>{_e(entry['reason'])}</td></tr>"
            for op, entry in sorted(cpu.items(), key=lambda kv: -kv[1]["count"])
        )
        out.append(
            "<table class='t cpu-ops'><tr><th>edge op</th><th>nodes</th><th>why</th></tr>"
            f"{rows}</table>"
        )
    else:
        out.append("<p class='legend'>Every node is delegated to Core ML.</p>")
    coreml = counts["coreml_ops"]
    if coreml:
        rows = "".join(
            f"<tr><td class='mono'>{_e(op)}</td><td>{n}</td></tr>"
            for op, n in sorted(coreml.items(), key=lambda kv: -kv[1])
        )
        out.append(
            f"<details><summary>{len(coreml)} ops delegated to Core ML</summary>"
            f"<table class='t'><tr><th>edge op</th><th>nodes</th></tr>{rows}</table></details>"
        )
    return "".join(out)


def _findings_table(p: int, data: dict[str, Any]) -> str:
    findings = data["findings"]
    if not findings:
        return "<h3>Findings</h3><p class='legend'>No finding.</p>"
    rows = []
    for f in findings:
        link = f" data-goto-node='{f['nodeIndex']}' data-p='{p}'" if f["nodeIndex"] >= 0 else ""
        where = f"{f['loc'][0]}:{f['loc'][1]}" if f["loc"] else ""
        count = f" (\u00d7{f['count']})" if f["count"] > 1 else ""
        rows.append(
            f"<tr class='finding'{link}><td><b class='code'>{_e(f['code'])}</b></td>"
            f"<td><span class='sev {_e(f['severity'])}'>{_e(f['severity'])}</span> "
            f"{_e(f['outcome'])}</td><td>{_e(f['message'])}{_e(count)}</td>"
            f"<td class='mono'>{_e(f['node'] or '')}</td><td class='mono'>{_e(where)}</td></tr>"
        )
    return (
        f"<h3>Findings ({len(findings)})</h3><table class='t findings'><tr><th>rule</th>"
        "<th>outcome</th><th>message</th><th>node</th><th>model source</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _verify(p: int, program: HtmlProgram, data: dict[str, Any]) -> str:
    """Each partition's agreement with eager: divergent ones first and always shown, the
    rest folded when there are many."""
    if not program.verify:
        return ""
    item_of = {item["id"]: i for i, item in enumerate(data["items"]) if item["k"] == "p"}
    order = {"diverges": 0, "agrees": 1}
    tally: dict[str, int] = {}
    rows = []
    for part in sorted(
        data["partitions"],
        key=lambda part: (order.get((part["verify"] or {}).get("status", ""), 2), part["id"]),
    ):
        v = part["verify"] or {"status": "not verified", "detail": ""}
        tally[v["status"]] = tally.get(v["status"], 0) + 1
        if part["verify"] is None:
            continue
        rows.append(
            (
                v["status"],
                f"<tr><td><span class='peer' data-goto-item='{item_of.get(part['id'], 0)}' "
                f"data-p='{p}'>partition {part['id']}</span></td>"
                f"<td><span class='tag {_e(v['status'].replace(' ', '-'))}'>{_e(v['status'])}"
                f"</span></td><td>{_e(v.get('detail', ''))}</td></tr>",
            )
        )
    head = "<tr><th>partition</th><th>status</th><th>detail</th></tr>"
    shown = [row for status, row in rows if status == "diverges"]
    rest = [row for status, row in rows if status != "diverges"]
    if len(shown) + len(rest) <= 20:
        shown, rest = shown + rest, []
    table = f"<table class='t verify'>{head}{''.join(shown)}</table>" if shown else ""
    if rest:
        table += (
            f"<details><summary>{len(rest)} more partition(s)</summary>"
            f"<table class='t verify'>{head}{''.join(rest)}</table></details>"
        )
    counts = ", ".join(f"{n} {_e(status)}" for status, n in sorted(tally.items()))
    return f"<h3>Agreement with eager</h3><p class='legend verify-counts'>{counts}</p>{table}"


def _lowering(p: int, program: HtmlProgram, data: dict[str, Any]) -> str:
    lowering = program.lowering
    if not lowering:
        return ""
    index = {row[0]: i for i, row in enumerate(data["nodes"])}
    out = ["<h3>Lowering</h3><div class='kv lowering'>"]
    known = {key for key, _ in _LOWERING_KEYS}
    for key, label in [
        *_LOWERING_KEYS,
        *((k, k.replace("_", " ")) for k in lowering if k not in known),
    ]:
        if key not in lowering or key in _LOWERING_SKIP:
            continue
        value = lowering[key]
        if key == "refused" and isinstance(value, dict):
            shown = _refused(p, value, index)
        elif isinstance(value, list):
            shown = _generic([_finding_like(v) for v in value])
        else:
            shown = _generic(value)
        out.append(f"<span class='k'>{_e(label)}</span><span data-key='{_e(key)}'>{shown}</span>")
    out.append("</div>")
    return "".join(out)


def _refused(p: int, refused: dict[str, str], index: dict[str, int]) -> str:
    if not refused:
        return "<i>none</i>"
    rows = []
    for node, why in sorted(refused.items()):
        link = f" data-goto-node='{index[node]}' data-p='{p}'" if node in index else ""
        rows.append(f"<tr{link}><td class='mono'>{_e(node)}</td><td>{_e(why)}</td></tr>")
    return f"<table class='t refused'>{''.join(rows)}</table>"


def _minimap(p: int, data: dict[str, Any]) -> str:
    """One strip for the whole program: a rect per partition or CPU run, width growing with
    the square root of its node count so one-node CPU runs stay visible; a mark above it
    where a finding is. Clicking a rect scrolls to that block."""
    parts = {part["id"]: part for part in data["partitions"]}
    severity_of: dict[int, str] = {}
    item_of_node = {}
    for i, item in enumerate(data["items"]):
        for n in parts[item["id"]]["nodes"] if item["k"] == "p" else item["nodes"]:
            item_of_node[n] = i
    for f in data["findings"]:
        if f["nodeIndex"] >= 0:
            i = item_of_node[f["nodeIndex"]]
            if severity_of.get(i) != "error":
                severity_of[i] = f["severity"]
    sizes = [
        math.sqrt(len(parts[it["id"]]["nodes"]) if it["k"] == "p" else len(it["nodes"]))
        for it in data["items"]
    ]
    scale = 1000.0 / max(sum(sizes), 1e-9)
    x, shapes = 0.0, []
    for i, (item, size) in enumerate(zip(data["items"], sizes, strict=True)):
        w = size * scale
        if item["k"] == "p":
            part = parts[item["id"]]
            fill = f"hsl({_hue(item['id'])} 55% 55%)"
            label = f"partition {item['id']}: {len(part['nodes'])} nodes"
        else:
            fill, label = "#9aa5b1", f"CPU: {len(item['nodes'])} nodes"
        shapes.append(
            f"<rect data-mini='{i}' data-p='{p}' x='{x:.3f}' y='12' width='{w:.3f}' "
            f"height='28' fill='{fill}'><title>{_e(label)}</title></rect>"
        )
        if i in severity_of:
            color = {"error": "#c62828", "warning": "#b26a00"}.get(severity_of[i], "#1565c0")
            shapes.append(
                f"<rect data-mini='{i}' data-p='{p}' x='{x:.3f}' y='2' "
                f"width='{max(w, 2.0):.3f}' height='8' fill='{color}'/>"
            )
        x += w
    return (
        "<div id='minimap-wrap'><svg class='minimap' viewBox='0 0 1000 42' "
        f"preserveAspectRatio='none' role='img' aria-label='partition strip'>{''.join(shapes)}"
        "</svg></div>"
    )


def _program_section(p: int, program: HtmlProgram, data: dict[str, Any]) -> str:
    counts = summary_counts(program)
    big = len(data["nodes"]) > 5000
    controls = "".join(
        f"<button data-action='{action}' data-p='{p}'>{label}</button>"
        for action, label in (
            ("open-findings", "open blocks with findings"),
            ("only-findings", "only blocks with findings"),
            ("collapse", "collapse all"),
            *(() if big else (("open-all", "open all"),)),
        )
    )
    return (
        f"<section class='program' id='program-{p}' data-partitions='{counts['partitions']}'>"
        f"<h2>{_e(program.source)} <span class='legend'>[{_e(data['method'])}]</span></h2>"
        f"{_lowered_cards(program.lowering)}{_cards(counts)}"
        "<div class='pair'><div><h3>Linted with</h3>"
        f"<pre class='code settings'>{_e(counts['settings'])}</pre></div>"
        f"<div>{_advice(program.advice, len(program.findings))}</div></div>"
        f"{_findings_table(p, data)}{_lowering(p, program, data)}"
        f"{_verify(p, program, data)}{_ops_tables(counts)}"
        f"<h3>Placement: {counts['partitions']} Core ML partition(s), "
        f"{sum(1 for it in data['items'] if it['k'] == 'c')} CPU run(s), in program order</h3>"
        "<div class='legend'><span><i class='sw' style='background:hsl(200 55% 55%)'></i>"
        "a Core ML partition (one delegate)</span><span><i class='sw' "
        "style='background:#9aa5b1'></i>nodes left to ExecuTorch's CPU kernels</span>"
        "<span>click a block to open it, a node for details</span></div>"
        f"{_minimap(p, data)}<div class='controls'>{controls}</div>"
        f"<div class='flow' data-program='{p}' data-partitions='{counts['partitions']}'></div>"
        "</section>"
    )


def render_html(programs: Sequence[HtmlProgram], *, title: str = DEFAULT_TITLE) -> str:
    """The report for one or more linted methods, as one self-contained HTML page (write it
    as UTF-8). It opens from disk with no network: everything is inline."""
    datas = [program_data(program) for program in programs]
    sections = "".join(
        _program_section(p, program, data)
        for p, (program, data) in enumerate(zip(programs, datas, strict=True))
    )
    nav = ""
    if len(programs) > 1:
        links = "".join(
            f"<a href='#program-{p}'>{_e(program.source)} [{_e(data['method'])}]</a>"
            for p, (program, data) in enumerate(zip(programs, datas, strict=True))
        )
        nav = f"<nav class='programs'>{links}</nav>"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<link rel='icon' href='data:,'><title>{_e(title)}</title><style>{CSS}</style></head>"
        f"<body><header class='top'><div><h1>{_e(title)}</h1>"
        f"<div class='sub'>{_e(_versions())}</div></div><div class='search'>"
        "<input id='search' type='search' placeholder='search node or op name' "
        "autocomplete='off'><div id='results' hidden></div></div></header>"
        f"<main>{nav}{sections}</main><aside id='details'><p class='empty'>Click a node for "
        "its placement, tensors and findings.</p></aside>"
        "<footer class='status' id='status'>rendering...</footer>"
        "<script type='application/json' id='coreml-lint-data'>"
        f"{embed_json({'version': __version__, 'programs': datas})}</script>"
        f"<script>{JS}</script></body></html>"
    )
