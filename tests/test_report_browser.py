"""report.html in a real browser: headless Chromium opens the report of a small evaluate.py run; the page must log
nothing to the console and must show the table, the charts and the Gantt chart drawn. The screenshot is kept as a
test artefact in ``build/test-artefacts/`` (``.ci/run`` installs Debian's chromium; without one the test skips)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from paths import ROOT

from evaluation.browser import find_chromium, open_page, screenshot

pytestmark = [pytest.mark.skipif(find_chromium() is None, reason="no Chromium on PATH (apt-get install chromium)")]
pytest.importorskip("plotly", reason="report.html needs plotly (extra 'plot')")

ARTEFACTS = ROOT / "build" / "test-artefacts"
"""Where the screenshot is kept after the test (ignored by git)."""


def _between(page: str, start: str, end: str) -> str:
    """The part of ``page`` from the first ``start`` to the next ``end``."""
    head = page.index(start)
    return page[head:page.index(end, head)]


def test_the_report_of_a_small_run_renders_without_console_errors(tmp_path):
    out = tmp_path / "run"
    subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "--workload", "small", "--cluster", "tiny", "--seeds",
                    "0,1", "--policies", "fifo,sjf+easy/pack,tiresias", "--workers", "1", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    page = open_page(out / "report.html")
    assert page.console == []
    table = _between(page.dom, "<h2>Comparison</h2>", "<h2>Charts</h2>")
    assert table.count("<tr") == 1 + 3 and 'class="reference"' in table
    charts = re.findall(r'<div id="(cdf|util|bars)-[^"]*" class="plotly-graph-div[^"]*js-plotly-plot', page.dom)
    assert len(charts) == 7  # every chart div was drawn by plotly.js (it adds js-plotly-plot)
    gantt = _between(page.dom, '<div id="gantt"', 'id="gantt-detail"')
    assert "js-plotly-plot" in gantt and gantt.count('class="point"') > 50  # bars of jobs on GPUs
    assert "Gantt chart — fifo · small · seed 0 (coloured by user)" in gantt
    chosen = open_page(out / "report.html", fragment="run=2&colour=outcome")  # tiresias, seed 0: it preempts
    gantt = _between(chosen.dom, '<div id="gantt"', 'id="gantt-detail"')
    assert chosen.console == [] and "Gantt chart — tiresias · small · seed 0 (coloured by outcome)" in gantt
    assert all(f'data-unformatted="{name}"' in gantt for name in ("preemption", "completed after an interruption"))
    png = screenshot(out / "report.html", ARTEFACTS / "report-small.png")
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000


def test_a_console_message_or_an_uncaught_error_is_seen(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<html><body><p>x</p><script>console.error("boom"); notDefined();</script></body></html>')
    console = open_page(page).console
    assert len(console) == 2 and '"boom"' in console[0] and "ReferenceError: notDefined" in console[1]
