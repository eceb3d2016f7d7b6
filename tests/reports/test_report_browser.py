"""The HTML report in a real browser at a phone's width (390 px) and a desktop's (1400 px): headless Chromium
loads it with a measuring script added, and the page must fit the screen (no sideways scroll of the page; a wide
table scrolls in its own box), the figures fold into one column on the phone and sit side by side on the desktop.
Headless Chromium's window is at least 500 px wide, so the phone is a 390-px frame inside a host page.
Skipped, with the reason, where Chromium is not installed (Debian: apt-get install -y chromium).
SPECSUITE_SCREENSHOT_DIR keeps the screenshots for a person to look at."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.helpers.main_job_report import render_main_job_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"]
MEASURE = """<script>addEventListener('load', () => {
  const lefts = [...document.querySelectorAll('figure')].map(f => Math.round(f.getBoundingClientRect().left));
  const tables = [...document.querySelectorAll('.table-wrap')].map(w => [w.clientWidth, w.scrollWidth]);
  (parent || window).document.body.setAttribute('data-measure', JSON.stringify({viewport: innerWidth,
    page: document.documentElement.scrollWidth, figure_lefts: lefts, tables: tables}));
});</script>"""

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_main_job_report(tmp_path_factory.mktemp("report")) / "report.html"


def _host(page: Path, width: int, tmp_path: Path, script: str = "") -> Path:
    """The report at `width` CSS pixels: itself from 500 px up, else in a frame of that width (srcdoc: same origin)."""
    text = page.read_text(encoding="utf-8").replace("</body>", script + "</body>")
    host = tmp_path / f"host-{width}{'-measured' if script else ''}.html"
    if width >= 500:
        host.write_text(text, encoding="utf-8")
    else:
        host.write_text(f'<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;width:{width}px;height:2600px" '
                        f'srcdoc="{html.escape(text, quote=True)}"></iframe></body></html>', encoding="utf-8")
    return host


def _measure(page: Path, width: int, tmp_path: Path) -> dict:
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--window-size={max(width, 500)},900", "--dump-dom",
                          _host(page, width, tmp_path, MEASURE).as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r'data-measure="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _screenshot(page: Path, width: int, tmp_path: Path) -> Path:
    shot = tmp_path / f"report-{width}.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--screenshot={shot}", f"--window-size={max(width, 500)},2600", _host(page, width, tmp_path).as_uri()],
                   capture_output=True, timeout=120, check=True)
    keep = os.environ.get("SPECSUITE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot


def test_the_page_declares_a_viewport(report: Path) -> None:
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in report.read_text(encoding="utf-8")


def test_on_a_phone_nothing_is_cut_off_and_figures_stack(report: Path, tmp_path: Path) -> None:
    measured = _measure(report, 390, tmp_path)
    assert measured["viewport"] == 390, measured
    assert measured["page"] <= 390, measured  # the page itself never scrolls sideways
    assert len(set(measured["figure_lefts"])) == 1, measured  # one column of figures
    assert all(client <= 390 for client, _ in measured["tables"]), measured  # a wide table scrolls inside its box
    assert struct.unpack(">II", _screenshot(report, 390, tmp_path).read_bytes()[16:24]) == (500, 2600)


def test_on_a_desktop_figures_sit_side_by_side(report: Path, tmp_path: Path) -> None:
    measured = _measure(report, 1400, tmp_path)
    assert measured["page"] <= 1400, measured
    assert len(set(measured["figure_lefts"])) >= 2, measured
    _screenshot(report, 1400, tmp_path)
