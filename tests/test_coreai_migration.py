"""``coreml-lint migrate``: Core ML at each deployment target and Core AI, side by side, each
really run. Oracle: a program that crashes on Core ML and runs on Core AI (a uint8 input),
and one the other way round (avg_pool with ceil_mode), in JSON and as the HTML page, read
in headless Chromium."""

from __future__ import annotations

import json
import re

import pytest
from chromium import CHROMIUM, Browser

from coreml_lint.cli.main import main
from coreml_lint.reports.html_migration import render_migration_html
from coreml_lint.verifier.migration import Column, Migration

HOSTILE = '</script><img src=x onerror="document.title=1">//evil.example/<b>&amp;'
URL_LIKE = re.compile(r"[a-z][a-z0-9+.-]*://|//", re.I)


def test_view_says_where_the_program_runs():
    view = Migration(
        "p.pt2",
        [
            Column("Core ML iOS17", "lowering_crash", ["to_edge_transform_and_lower: KeyError"]),
            Column("Core ML iOS18", "diverge", ["output 0: max abs error 1"], "1 partition(s)"),
            Column("Core AI", "agree", [], "the whole program"),
        ],
    )
    text = view.render_text()
    assert "Core ML iOS17  CRASH\n" in text
    assert "Core ML iOS18  runs, WRONG values (1 partition(s))" in text
    assert "Core AI        runs, agrees with eager (the whole program)" in text
    assert text.endswith("=> runs correctly on: Core AI; fails on: Core ML iOS17, Core ML iOS18")
    data = view.to_json()
    assert [c["verdict"] for c in data["columns"]] == [
        "CRASH",
        "runs, WRONG values",
        "runs, agrees with eager",
    ]


def test_view_with_no_good_target():
    view = Migration("p.pt2", [Column("Core AI", "lowering_crash")])
    assert view.conclusion() == "=> no target runs this program correctly"
    assert view.headline() == "Crashes on Core AI."


def test_headline_groups_targets_by_outcome():
    columns = [Column(f"Core ML iOS{i}", "lowering_crash") for i in (15, 16)]
    columns += [Column(f"Core ML iOS{i}", "agree") for i in (17, 18)]
    columns.append(Column("Core AI", "diverge"))
    assert Migration("p.pt2", columns).headline() == (
        "Crashes on Core ML at iOS15, iOS16 and runs correctly on Core ML at iOS17, iOS18; "
        "computes WRONG values on Core AI."
    )
    assert Migration("p.pt2", columns).to_json()["headline"].startswith("Crashes on Core ML")


def test_page_escapes_program_text_and_fetches_nothing():
    view = Migration(
        HOSTILE,
        [
            Column("Core ML iOS18", "lowering_crash", [HOSTILE]),
            Column("Core AI", "agree", [], "the whole program"),
        ],
    )
    page = render_migration_html(view)
    assert "<img" not in page and 'onerror="' not in page
    assert not URL_LIKE.search(page)
    assert "default-src 'none'" in page
    assert "Crashes on Core ML at iOS18; runs correctly on Core AI." in page


torch = pytest.importorskip("torch")


class Frame(torch.nn.Module):
    def forward(self, x):
        return x.float() * 0.5 + 1


class CeilPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True)


def _migrate(tmp_path, capsys, model, inputs, *extra):
    pytest.importorskip("executorch")
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(model, inputs), path)
    code = main(["migrate", "-q", str(path), "--output-format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.oracle
def test_crashes_on_core_ml_at_every_target_and_runs_on_core_ai(tmp_path, capsys):
    frame = torch.randint(0, 255, (1, 3, 8, 8), dtype=torch.uint8)
    code, data = _migrate(tmp_path, capsys, Frame(), (frame,))
    assert code == 1
    columns = {c["target"]: c for c in data["columns"]}
    assert list(columns) == [f"Core ML iOS{i}" for i in (15, 16, 17, 18)] + ["Core AI"]
    for ios in (15, 16, 17, 18):
        assert columns[f"Core ML iOS{ios}"]["status"] == "lowering_crash"
        assert "KeyError: torch.uint8" in columns[f"Core ML iOS{ios}"]["detail"][0]
    assert columns["Core AI"]["status"] == "agree"


@pytest.mark.oracle
def test_runs_on_core_ml_and_crashes_on_core_ai(tmp_path, capsys):
    code, data = _migrate(tmp_path, capsys, CeilPool(), (torch.randn(1, 3, 7, 7),), "--ios", "18")
    assert code == 1
    coreml, coreai = data["columns"]
    assert coreml["target"] == "Core ML iOS18" and coreml["status"] == "agree"
    assert coreml["placement"] == "1 Core ML partition(s); nothing on the CPU"
    assert coreai["status"] == "lowering_crash"
    assert "IndexError: tuple index out of range" in coreai["detail"][0]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium")
    b = Browser()
    yield b
    b.close()


def _page(tmp_path, model, inputs, browser, *extra):
    """``migrate --output-format html -o page.html``, opened in Chromium: the headline, and
    per target its verdict tag and what went wrong."""
    pytest.importorskip("executorch")
    pytest.importorskip("coreai_torch", reason="needs coreai-torch (coreml-lint[coreai])")
    pytest.importorskip("coreai.runtime", reason="needs coreai-core (coreml-lint[coreai])")
    path, page = tmp_path / "program.pt2", tmp_path / "page.html"
    torch.export.save(torch.export.export(model, inputs), path)
    code = main(["migrate", "-q", str(path), "--output-format", "html", "-o", str(page), *extra])
    browser.open(page)
    headline = browser.js("document.getElementById('headline').textContent")
    targets = browser.js("[...document.querySelectorAll('th.target')].map(e => e.textContent)")
    tags = browser.js(
        "[...document.querySelectorAll('.migration .tag')].map(e => e.dataset.status)"
    )
    wrong = browser.js(
        "[...document.querySelectorAll('tr[data-row=\\'what went wrong\\'] td')]"
        ".map(e => e.textContent)"
    )
    assert all(url.startswith("file:") for url in browser.requests()), browser.requests()
    return (
        code,
        headline,
        dict(zip(targets, tags, strict=True)),
        dict(zip(targets, wrong, strict=True)),
    )


@pytest.mark.oracle
@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium is not installed")
def test_page_of_a_program_that_crashes_on_core_ml_and_runs_on_core_ai(tmp_path, browser):
    frame = torch.randint(0, 255, (1, 3, 8, 8), dtype=torch.uint8)
    code, headline, tags, wrong = _page(tmp_path, Frame(), (frame,), browser)
    assert code == 1
    assert headline == (
        "Crashes on Core ML at iOS15, iOS16, iOS17, iOS18; runs correctly on Core AI."
    )
    assert tags == {
        **{f"Core ML iOS{i}": "lowering_crash" for i in (15, 16, 17, 18)},
        "Core AI": "agree",
    }
    assert "KeyError: torch.uint8" in wrong["Core ML iOS15"]


@pytest.mark.oracle
@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium is not installed")
def test_page_of_a_program_that_runs_on_core_ml_and_crashes_on_core_ai(tmp_path, browser):
    code, headline, tags, wrong = _page(
        tmp_path, CeilPool(), (torch.randn(1, 3, 7, 7),), browser, "--ios", "17", "--ios", "18"
    )
    assert code == 1
    assert headline == "Runs correctly on Core ML at iOS17, iOS18; crashes on Core AI."
    assert tags == {"Core ML iOS17": "agree", "Core ML iOS18": "agree", "Core AI": "lowering_crash"}
    assert "IndexError: tuple index out of range" in wrong["Core AI"]
