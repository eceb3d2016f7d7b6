"""The report's layout for a five-second reader: verdict lines first, then figures, then tables;
no "not run" rows; any verdict string drawn, "suspect" styled and explained; the header filled in;
and the page as a real browser draws it (headless Chromium, skipped where it is not installed)."""

from __future__ import annotations

import copy
import gzip
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from specsuite.analysis.verdicts import compare_arms
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.html import verdict_class
from specsuite.reports.overview import verdict_lines
from specsuite.reports.render import render_report
from specsuite.results.store import load_results
from specsuite.results.types import Document
from tests.helpers.ab_results import with_workloads

REAL = Path(__file__).parents[1] / "data" / "ab_results" / "nofix_vs_fix_smoke.json"
# A recorded `specsuite run` with no options (the main job: correctness, GSM8K at T=0 and T=1, the
# bench), its analysis and the bench's ITL reservoir (`itl_ms`, unused by the analysis) left out.
MAIN_JOB = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"
SEED_ROWS = ("non-finite draft_probs entries per batch", "sampler fallback emissions / committed tokens",
             "stray tokens per 1200 generated", "invalid ids / generated tokens", "fallback ids (vocab_size-1) / generated tokens",
             "accept length (mean of requests)", "GSM8K accuracy", "GSM8K invalid rate", "median ITL", "output throughput")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def recorded() -> dict:
    """A recorded `specsuite run` (correctness only) with its analysis."""
    results = load_results(REAL).to_dict()
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    return results


@pytest.fixture(scope="module")
def full() -> dict:
    """Every family: correctness, GSM8K and the bench, two arms."""
    results = with_workloads(repeats=1)
    results.update(created_utc="2026-12-04T04:00:00Z", specsuite_version="9.9.9", run_id="full-run", side_by_side=True)
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    return results


@pytest.fixture(scope="module")
def main_job() -> dict:
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    return results


def _render(results: dict, out: Path) -> tuple[str, str]:
    render_report(Document.from_dict(results), out)
    return (out / "report.md").read_text(), (out / "report.html").read_text()


def test_verdict_lines_come_first_then_figures_then_tables(recorded: dict, tmp_path: Path) -> None:
    markdown, page = _render(recorded, tmp_path)
    lines = markdown.splitlines()
    assert lines[0].startswith("**Server under test: the reference emulation**")  # recorded before server_under_test
    order = [markdown.index(mark) for mark in ("## Verdict\n", "- **nofix** · correctness: **worse** on invalid ids",
                                               "- **fix** (baseline) · correctness:", "## Figures", "## Before / after")]
    assert order == sorted(order), order
    for mark in ('class="banner emulation"', 'class="verdicts"', '<div class="figures">', "<table>"):
        assert mark in page
    assert page.index('class="banner') < page.index('class="verdicts"') < page.index("<figure") < page.index("<table>")


def test_no_row_says_not_run_and_one_line_names_what_did_not(recorded: dict, tmp_path: Path) -> None:
    markdown, page = _render(recorded, tmp_path)
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert rows and not [row for row in rows if "not run" in row]
    assert markdown.count("Not run") == 1 and "Not run: GSM8K, serving benchmark" in markdown
    assert ">not run<" not in page


def test_header_fills_created_and_version(recorded: dict, full: dict, tmp_path: Path) -> None:
    markdown, _ = _render(recorded, tmp_path / "recorded")
    assert "created 2026-12-03T08:30:24Z · specsuite 0.1.0" in markdown and "created ?" not in markdown
    markdown, _ = _render(full, tmp_path / "full")
    assert "created 2026-12-04T04:00:00Z · specsuite 9.9.9" in markdown and "arms side by side" in markdown


def test_one_line_per_arm_and_family(full: dict, tmp_path: Path) -> None:
    lines = verdict_lines(Document.from_dict(full))
    assert [(line.arm, line.family) for line in lines] == [
        ("nofix", "cases"), ("nofix", "gsm8k"), ("nofix", "bench"), ("fix", "cases"), ("fix", "gsm8k"), ("fix", "bench")]
    gsm8k = next(line.text for line in lines if line.arm == "nofix" and line.family == "gsm8k")
    assert re.search(r"\*\*worse\*\* on accuracy −\d+ pt", gsm8k), gsm8k
    markdown, _ = _render(full, tmp_path)
    assert "Not run" in markdown and "GSM8K," not in markdown.split("Not run")[1].split("\n")[0]  # only the spread
    assert "side by side on one host" in markdown  # the bench's caveat when the arms shared a host


def test_the_main_job_fills_every_row_of_the_seed_tables(main_job: dict, tmp_path: Path) -> None:
    markdown, _ = _render(main_job, tmp_path)
    head, tables = markdown.split("## Figures")
    assert head.splitlines()[0].startswith("**Server under test: the embedded reference emulation**")
    assert "created 2026-12-04T04:43:13Z" in head and "specsuite 0.1.0" in head and "arms side by side" in head
    families = [(line.arm, line.family) for line in verdict_lines(Document.from_dict(main_job))]
    # The recorded run checked every answer's integrity, so the integrity family has its line too (specsuite/families/).
    assert families == [(arm, family) for arm in ("nofix", "fix") for family in ("cases", "gsm8k", "bench", "integrity")]
    # Changed deliberately: "**none in either arm** on every row" said nothing the verdict did not.
    assert "**nofix** · integrity: **none in either arm** — 0 violations in 400 checked answers" in head
    assert "## Integrity" in tables and "| all checks | 0 in 400 answers | 0 in 400 answers | **none in either arm** |" in tables
    assert re.search(r"\*\*nofix\*\* · GSM8K: \*\*worse\*\* on accuracy −\d+ pt \(T=1\)", head)
    assert re.search(r"\*\*nofix\*\* · correctness: \*\*worse\*\* on invalid ids, fallback ids.*; \*\*(better|suspect)\*\* on acceptance",
                     head), head  # "suspect" once the A/B marks the signature of corrupt draft probabilities so
    assert "Not run: spread between repeats" in head and "GSM8K," not in head.split("Not run")[1]
    # The GSM8K rows say that the main job's set is the synthetic one.
    filled = {cells[0].removesuffix(" (synthetic set)") for line in tables.splitlines()
              if line.startswith("| ") and (cells := [c.strip() for c in line[1:].split(" | ")])}
    assert set(SEED_ROWS) <= filled, set(SEED_ROWS) - filled
    assert "| GSM8K accuracy (synthetic set) |" in tables and "synthetic** GSM8K-format set" in head
    assert not [line for line in tables.splitlines() if line.startswith("| ") and "not run" in line]


def test_any_verdict_string_is_drawn_and_suspect_is_explained(recorded: dict, tmp_path: Path) -> None:
    """A verdict the report has never heard of still renders; "suspect" gets its style and its line."""
    results = copy.deepcopy(recorded)
    accept = [row for row in results[ANALYSIS_KEY]["comparisons"] if row["metric"] == "accept_length" and row["temperature"] > 0]
    accept[0]["verdict"] = "suspect"
    accept[1]["verdict"] = "needs a look"
    markdown, page = _render(results, tmp_path)
    nofix = next(line for line in verdict_lines(Document.from_dict(results)) if line.arm == "nofix")
    assert nofix.text.index("**worse** on invalid ids") < nofix.text.index("**suspect** on acceptance")  # the corruption first
    assert "the signature of corrupt draft probabilities" in markdown.split("## Figures")[0]
    assert f'<strong class="{verdict_class("suspect")}">suspect</strong>' in page and ".v-suspect" in page
    assert verdict_class("needs a look") == "verdict v-needs-a-look" and 'class="verdict v-needs-a-look"' in page
    assert '<li class="suspect">' in page


def test_the_server_under_test_banner_names_a_real_server_plainly(full: dict, tmp_path: Path) -> None:
    results = copy.deepcopy(full)
    results["server_under_test"] = {"embedded_reference": False, "reference_emulation": False, "source": "arms"}
    _, page = _render(results, tmp_path)
    banner = page.split('class="banner real">', 1)[1].split("</p>")[0]
    assert "emulation" not in banner and banner.startswith("Server under test: ")


def _png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_headless_chromium_draws_the_verdicts_before_the_tables(full: dict, tmp_path: Path) -> None:
    render_report(Document.from_dict(full), tmp_path)
    page = (tmp_path / "report.html").as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120, check=True).stdout
    verdicts, figure, table = dom.find('class="verdicts"'), dom.find("<figure"), dom.find("<table>")
    assert -1 < verdicts < figure < table, (verdicts, figure, table)
    assert "not run</td>" not in dom
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1280,2400", page], capture_output=True,
                   timeout=120, check=True)
    assert _png_size(shot) == (1280, 2400)


def test_the_verdict_tables_case_and_metric_cells_do_not_wrap(full: dict, tmp_path: Path) -> None:
    render_report(Document.from_dict(full), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert re.search(r'<td class="nowrap">T = [0-9.]+, top_p = [0-9.]+</td>', page)
    assert '<td class="nowrap">invalid_ids</td>' in page
