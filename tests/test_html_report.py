"""The HTML delegation report, opened from disk in headless Chromium.

The report is for a person, so it is checked the way a browser shows it: the DOM after the
page's script ran (partition islands, pinned findings, node names), screenshots that are not
blank, real clicks and typing through the DevTools protocol, and the network requests the
page makes (none but the file itself). A synthetic 768-block program (24.6k nodes, 768
partitions) checks that the partition overview renders and that node rows stay lazy.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from chromium import CHROMIUM, Browser, colour_stats, dump_dom, screenshot
from conftest import exported, settings_of

import coreml_lint
from coreml_lint.program.graph import Graph, InputSpec, Node, OutputSpec, TensorInfo, TensorRef
from coreml_lint.program.placement import (
    COREML,
    CPU,
    NodePlacement,
    Partition,
    PartitionerSettings,
    Placement,
    predict_placement,
)
from coreml_lint.reports.html import HtmlProgram, render_html
from coreml_lint.reports.model_explorer import model_explorer_data

ROOT = Path(__file__).resolve().parents[1]
_chromium_installed = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium is not installed at /usr/bin/chromium "
    "(bash scripts/setup_browser.sh installs Debian's chromium)",
)


def needs_chromium(test):
    """A test that drives the browser: the slow tier, skipped where Chromium is missing."""
    return pytest.mark.oracle(_chromium_installed(test))


# What may not appear anywhere in the page: ``scheme://`` or a protocol-relative ``//``.
URL_LIKE = re.compile(r"[a-z][a-z0-9+.-]*://|//", re.I)
TAG = re.compile(r"<[a-z][^>]*>", re.I)
REFERENCE = re.compile(r"""\s(?:href|src|action|srcset|poster|formaction)\s*=\s*['"]?([^'" >]*)""")
HOSTILE = '</script><img src=x onerror="document.title=1">//evil.example/<b>&amp;'


def lint_case(case_id: str) -> HtmlProgram:
    settings = settings_of(case_id)
    report = coreml_lint.lint_program(exported(case_id), **dataclasses.asdict(settings))
    return HtmlProgram.from_report(report, source=f"{case_id}.pt2")


def lint_example() -> HtmlProgram:
    """The bundled example (examples/pitfall_model.py), exported in memory."""
    import torch

    spec = importlib.util.spec_from_file_location(
        "pitfall_model", ROOT / "examples" / "pitfall_model.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    ep = torch.export.export(module.CaptionModel().eval(), module.example_inputs())
    return HtmlProgram.from_report(coreml_lint.lint_program(ep), source="pitfall_model.pt2")


@pytest.fixture(scope="module")
def linted() -> dict[str, HtmlProgram]:
    return {
        # uint8 made on the CPU between Core ML partitions: CML101, two partitions.
        "skip": lint_case("uint8-made-on-cpu"),
        "clean": lint_case("int32-input"),
        "example": lint_example(),
    }


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium")
    b = Browser()
    yield b
    b.close()


def write(tmp_path: Path, name: str, page: str) -> Path:
    path = tmp_path / name
    path.write_text(page, encoding="utf-8")
    return path


def section(dom: str, p: int) -> str:
    """The serialised DOM of one program's section."""
    start = dom.index(f'id="program-{p}"')
    end = dom.find('id="program-', start + 1)
    return dom[start : end if end > 0 else len(dom)]


def hostile_program() -> HtmlProgram:
    """A node name and a message built to break out of markup, script and JSON."""
    tensors = {n: TensorInfo("float32", (2, 4)) for n in ("x", HOSTILE, "acosh")}
    nodes = [
        Node(HOSTILE, "aten.add.Tensor", [TensorRef("x"), TensorRef("x")], {}, [HOSTILE]),
        Node("acosh", "aten.acosh.default", [TensorRef(HOSTILE)], {}, ["acosh"]),
    ]
    graph = Graph(
        [InputSpec("x", "user_input")],
        nodes,
        [OutputSpec("acosh", "user_output")],
        tensors,
        source="C://models/<evil>.pt2",
    )
    finding = SimpleNamespace(
        code="CML999",
        name="test",
        severity="error",
        outcome="silent",
        message=f"see https://example.com/x and {HOSTILE}",
        node=HOSTILE,
        op="aten.add.Tensor",
        location=SimpleNamespace(path="//server/share/m.py", line=3, source_line=HOSTILE),
        fix="</script>",
        partitioner=None,
    )
    placement = predict_placement(graph)
    return HtmlProgram(graph.source, graph, placement, [finding], advice={"code": HOSTILE})


def test_page_has_no_url_and_escapes_program_text(tmp_path: Path) -> None:
    page = render_html([hostile_program()], title=f"report {HOSTILE}")
    assert not URL_LIKE.search(page), URL_LIKE.search(page)
    # The only references in the markup: the empty data: icon and in-page anchors.
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    references = [r for tag in TAG.findall(markup) for r in REFERENCE.findall(tag)]
    assert references and all(r == "data:," or r.startswith("#") for r in references)
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<img" not in page and "<b>" not in page
    start = page.index("id='coreml-lint-data'>") + len("id='coreml-lint-data'>")
    data = json.loads(page[start : page.index("</script>", start)])
    assert data["programs"][0]["nodes"][0][0] == HOSTILE  # the name round-trips exactly
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_advice_keys_in_order_and_an_empty_program() -> None:
    program = hostile_program()
    program.advice = {
        "errors_before": 2,
        "partitioner": {"skip_ops_for_coreml_delegation": ["aten.gelu.default"]},
        "introduces": ["CML603"],
        "leaves": [{"code": "CML301", "message": "fp16 fill"}],
        "avoids": ["CML305"],
        "code": "CoreMLPartitioner(skip_ops_for_coreml_delegation=['aten.gelu.default'])",
    }
    page = render_html([program])
    advice = page[page.index("Combined advice") : page.index("Findings (")]
    labels = re.findall(r"<span class='k'>([^<]+)</span>", advice)
    assert labels == ["avoids", "leaves", "introduces", "partitioner", "errors before"]
    assert "CML301: fp16 fill" in advice and "aten.gelu.default" in advice
    empty = Graph([], [], [], {}, source="empty.pt2")
    page = render_html([HtmlProgram("empty.pt2", empty, predict_placement(empty), [])])
    assert "Placement: 0 Core ML partition(s), 0 CPU run(s)" in page
    assert "No finding." in page


@needs_chromium
def test_hostile_names_render_as_text(tmp_path: Path, browser: Browser) -> None:
    browser.open(write(tmp_path, "hostile.html", render_html([hostile_program()])))
    assert browser.js("document.querySelectorAll('img').length") == 0
    assert browser.js("document.title") == "coreml-lint delegation report"
    names = browser.js("[...document.querySelectorAll('.node .nname')].map(e => e.textContent)")
    assert HOSTILE in names
    assert HOSTILE in browser.js("document.querySelector('.pin .msg').textContent")


@needs_chromium
def test_dom_shows_partitions_findings_and_nodes(
    tmp_path: Path, linted: dict[str, HtmlProgram]
) -> None:
    skip, clean = linted["skip"], linted["clean"]
    page = write(tmp_path, "two.html", render_html([skip, clean]))
    dom = dump_dom(page)
    first, second = section(dom, 0), section(dom, 1)
    assert len(skip.placement.partitions) == 2  # {mul, clamp} and {permute}, as torch makes them
    assert first.count('class="item island') == 2
    assert first.count('class="item cpu') >= 1
    assert second.count('class="item island') == len(clean.placement.partitions) == 1
    # Each finding is pinned under its node with its rule code.
    pinned = re.findall(r'<div class="pin error"><span class="code">(CML\d+)</span>', first)
    assert sorted(pinned) == sorted(f.code for f in skip.findings) == ["CML101"]
    for node in skip.graph.nodes + clean.graph.nodes:
        assert f'<span class="nname">{node.name}</span>' in dom
    cpu = [n.name for n in skip.graph.nodes if skip.placement.nodes[n.name].where == CPU]
    assert cpu and all(f'<span class="nname">{n}</span>' in first for n in cpu)
    assert "skip_ops_for_coreml_delegation has" in first  # why those nodes are on the CPU
    assert "No finding." in second
    assert 'data-render-ms="' in dom


@needs_chromium
def test_screenshot_is_not_blank(tmp_path: Path, linted: dict[str, HtmlProgram]) -> None:
    page = write(tmp_path, "example.html", render_html([linted["example"]]))
    colours, dominant = colour_stats(screenshot(page, tmp_path / "example.png"))
    assert colours > 50 and dominant < 0.9, (colours, dominant)


@needs_chromium
def test_click_search_and_no_network(
    tmp_path: Path, browser: Browser, linted: dict[str, HtmlProgram]
) -> None:
    example = linted["example"]
    browser.open(write(tmp_path, "example.html", render_html([example])))
    assert all(url.startswith("file:") for url in browser.requests()), browser.requests()
    browser.click(f'.node[data-n="{node_index(example, "gelu")}"]')
    assert browser.js("document.querySelector('#details h4').textContent") == "gelu"
    details = browser.js("document.getElementById('details').textContent")
    assert "CML305" in details and "pitfall_model.py:39" in details
    browser.type_text("#search", "linear")
    count = browser.js(
        "new Promise(r => setTimeout(() => r(document.querySelectorAll("
        "'#results [data-goto-node]').length), 400))"
    )
    linear = [n for n in example.graph.nodes if "linear" in n.name]
    assert count == len(linear) > 0
    browser.click("#results [data-goto-node]")
    assert browser.js("document.querySelector('.node.sel .nname').textContent") == linear[0].name
    colours, _ = colour_stats(browser.screenshot())
    assert colours > 50
    assert all(url.startswith("file:") for url in browser.requests()), browser.requests()


def node_index(program: HtmlProgram, name: str) -> int:
    return [n.name for n in program.graph.nodes].index(name)


@needs_chromium
def test_verify_and_lowering_results(
    tmp_path: Path, browser: Browser, linted: dict[str, HtmlProgram]
) -> None:
    skip = linted["skip"]
    cpu_node = next(n.name for n in skip.graph.nodes if skip.placement.nodes[n.name].where == CPU)
    lowering = SimpleNamespace(
        to_json=lambda: {
            "rewrites": ["CML101: frame read as int32"],
            "refused": {cpu_node: "touches a uint8 tensor (CML101)"},
            "returned_buffers": {},
            "delegates": 2,
            "cpu_ops": ["aten.permute_copy.default"],
        }
    )
    report = SimpleNamespace(
        graph=skip.graph, placement=skip.placement, findings=skip.findings, advice=skip.advice
    )
    program = HtmlProgram.from_report(
        report,
        verify={
            0: {"status": "agrees", "detail": "max abs diff 0"},
            "1": {"status": "diverges", "detail": "max abs diff 0.5"},
        },
        lowering=lowering,
    )
    browser.open(write(tmp_path, "lowering.html", render_html([program])))
    tags = browser.js("[...document.querySelectorAll('.island .tag')].map(e => e.textContent)")
    assert tags == ["eager: agrees", "eager: diverges"]
    counts = browser.js("document.querySelector('.verify-counts').textContent")
    unverified = len(skip.placement.partitions) - 2
    assert counts == "1 agrees, 1 diverges" + (f", {unverified} not verified" if unverified else "")
    refused = browser.js("document.querySelector('[data-key=refused]').textContent")
    assert cpu_node in refused and "uint8" in refused
    assert browser.js("document.querySelector('[data-key=rewrites]').textContent").startswith(
        "CML101"
    )
    browser.click("[data-key=refused] tr[data-goto-node]")
    assert browser.js("document.querySelector('#details h4').textContent") == cpu_node
    assert "refused by coreml-lint lower" in browser.js(
        "document.getElementById('details').textContent"
    )


def test_model_explorer_overlay_uses_the_program_node_names(
    linted: dict[str, HtmlProgram],
) -> None:
    skip = linted["skip"]
    data = model_explorer_data(skip)
    ep = exported("uint8-made-on-cpu")
    assert set(data["results"]) <= {n.name for n in ep.graph.nodes}
    for node in skip.graph.nodes:
        where = skip.placement.nodes[node.name]
        entry = data["results"][node.name]
        assert entry["value"] == (0 if where.where == CPU else where.partition + 1)
    flagged = {name for name, entry in data["results"].items() if "textColor" in entry}
    assert flagged == {f.node for f in skip.findings}


def test_model_explorer_format_from_the_cli(tmp_path: Path, capsys) -> None:
    """``--output-format model-explorer -o FILE`` writes the overlay of one program; two
    programs are refused in one line (the format holds one graph)."""
    import json

    from conftest import _archive

    from coreml_lint.cli.main import main

    program = tmp_path / "gelu.pt2"
    program.write_bytes(_archive("gelu-tanh"))
    out = tmp_path / "overlay.json"
    assert main([str(program), "--output-format", "model-explorer", "-o", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["results"] and all("value" in entry for entry in data["results"].values())
    assert any("textColor" in entry for entry in data["results"].values())  # the finding
    capsys.readouterr()
    assert main([str(program), str(program), "--output-format", "model-explorer"]) == 2
    assert "overlays one program" in capsys.readouterr().err


def synthetic_program(blocks: int = 768, per_block: int = 31) -> HtmlProgram:
    """A transformer-sized chain: per block 31 Core ML nodes (one partition) and one node
    executorch refuses (acosh) on the CPU, with a tanh-GELU finding every 64 blocks. Built
    directly: the placement is known, and predicting it is not what this test is about."""
    ops = ("aten.linear.default", "aten.add.Tensor", "aten.mul.Tensor", "aten.gelu.default")
    shape = TensorInfo("float32", (1, 128, 768))
    nodes: list[Node] = []
    places: dict[str, NodePlacement] = {}
    partitions: list[Partition] = []
    findings: list[Any] = []
    prev = "x"
    for b in range(blocks):
        start = prev
        members = []
        for k in range(per_block):
            target = ops[k % len(ops)]
            node = Node(f"b{b}_{target.split('.')[1]}_{k}", target, [TensorRef(prev)], {}, [])
            node.outputs.append(node.name)
            places[node.name] = NodePlacement(node, COREML, "supported", target[5:], target, False)
            places[node.name].partition = b
            members.append(node)
            prev = node.name
        partitions.append(Partition(b, members, inputs=[start], outputs=[prev]))
        cpu = Node(f"b{b}_acosh", "aten.acosh.default", [TensorRef(prev)], {}, [f"b{b}_acosh"])
        places[cpu.name] = NodePlacement(cpu, CPU, "refused", "acosh.default", cpu.target)
        nodes += [*members, cpu]
        prev = cpu.name
        if b % 64 == 0:
            findings.append(
                SimpleNamespace(
                    code="CML305",
                    name="tanh-gelu",
                    severity="error",
                    outcome="silent",
                    message="tanh GELU runs as exact GELU",
                    node=f"b{b}_gelu_3",
                    op="aten.gelu.default",
                    location=None,
                    fix="write the tanh formula",
                    partitioner={"skip_ops_for_coreml_delegation": ["aten.gelu.default"]},
                )
            )
    tensors = {n: shape for n in ["x", *places]}
    graph = Graph([InputSpec("x", "user_input")], nodes, [OutputSpec(prev, "user_output")], tensors)
    placement = Placement(graph, PartitionerSettings(), places, partitions, {})
    return HtmlProgram("synthetic-768-blocks.pt2", graph, placement, findings)


@needs_chromium
def test_768_block_program_overview(tmp_path: Path, browser: Browser) -> None:
    program = synthetic_program()
    assert len(program.graph.nodes) == 768 * 32
    started = time.monotonic()
    page = write(tmp_path, "big.html", render_html([program]))
    rendered = time.monotonic() - started
    started = time.monotonic()
    browser.open(page)
    loaded = time.monotonic() - started
    counts = browser.js(
        "[document.querySelectorAll('.flow .island').length,"
        " document.querySelectorAll('.flow .cpu').length,"
        " document.querySelectorAll('.flow .node').length,"
        " Number(document.documentElement.dataset.renderMs)]"
    )
    islands, cpu_runs, rows, script_ms = counts
    print(
        f"\n768 blocks: python {rendered:.2f}s, {len(page.read_text()) / 1e6:.1f} MB; "
        f"chromium load {loaded:.2f}s, page script {script_ms:.0f} ms"
    )
    assert (islands, cpu_runs) == (768, 768)
    # Node rows are lazy: only the one-node CPU runs are drawn, not the 23.8k Core ML nodes.
    assert rows == 768
    assert browser.js("window.coremlLintReport.reveal(0, 'b700_gelu_3') !== null")
    assert browser.js("document.querySelector('.node.sel .nname').textContent") == "b700_gelu_3"
    assert browser.js("document.querySelectorAll('.flow .node').length") == 768 + 31
    assert browser.js("window.coremlLintReport.search('acosh')") == 768
    colours, _ = colour_stats(browser.screenshot())
    assert colours > 50
