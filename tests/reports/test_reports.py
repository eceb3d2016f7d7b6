"""Report renderers: Markdown, self-contained HTML, CSV, PNGs, and the `specsuite report` handler."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import struct
from pathlib import Path

import pytest

from specsuite.analysis.verdicts import compare_arms
from specsuite.cli.report import command_report
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.render import render_report
from specsuite.results.store import load_results
from specsuite.results.types import Document
from tests.helpers.ab_results import with_workloads

REAL = Path(__file__).parents[1] / "data" / "ab_results" / "nofix_vs_fix_smoke.json"
REPORTS_DIR = Path(__file__).resolve().parents[2] / "specsuite" / "reports"
RESOURCE_REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""", re.I)


def analysed(results: dict) -> dict:
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    return results


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, list[Path]]:
    """The real run rendered through the `specsuite report` handler."""
    out = tmp_path_factory.mktemp("real") / "report"
    assert command_report(str(REAL), str(out)) == 0
    return analysed(load_results(REAL).to_dict()), out, sorted(out.iterdir())


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, list[Path]]:
    out = tmp_path_factory.mktemp("full")
    results = analysed(with_workloads(repeats=3))
    return results, out, render_report(Document.from_dict(results), out)


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def table_cells(markdown: str) -> list[str]:
    cells = []
    for line in markdown.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells += [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
    return cells


def test_writes_markdown_html_csv_and_the_figures(real_report: tuple) -> None:
    _, out, written = real_report
    names = {p.name for p in written}
    assert {"report.md", "report.html", "results.csv", "rates.png", "accept_length.png"} <= names
    assert "repeat_spread.png" not in names  # one repeat per arm: nothing to spread
    assert all(p.parent == out and p.stat().st_size > 0 for p in written)
    for png in (p for p in written if p.suffix == ".png"):
        width, height = png_size(png)
        assert width >= 800 and height >= 400, png.name


def test_markdown_has_the_seed_rows_with_verdicts_and_names_what_did_not_run(real_report: tuple) -> None:
    _, out, _ = real_report
    text = (out / "report.md").read_text()
    t1 = text.split("### T = 1, top_p = 1")[1].split("###")[0]
    for label in ("non-finite draft_probs entries per batch", "sampler fallback emissions", "stray tokens per 1200",
                  "invalid ids", "accept length"):
        line = next(line for line in t1.splitlines() if line.startswith(f"| {label}"))
        assert "[" in line or "batches" in line, label  # a value with an interval (or its batch counts)
    assert re.search(r"\| invalid ids / generated tokens \| 26 / 1990 .*\*\*worse\*\*", t1)
    assert "| GSM8K accuracy |" not in text and "| median ITL |" not in text  # rows that did not run are left out
    assert "not run |" not in text and "| not run" not in text
    assert "Not run: GSM8K, serving benchmark, spread between repeats" in text  # named once, in one line
    assert "## Verdicts" in text and "p (Holm)" in text and "MDE" in text
    assert "## Spread between repeats" not in text
    assert "not drawn" not in text  # figures of workloads that did not run are not apologised for one by one
    assert all(cell for cell in table_cells(text)), "a table cell is blank"


def test_html_is_self_contained_and_embeds_every_png(real_report: tuple, full_report: tuple) -> None:
    for _, out, written in (real_report, full_report):
        page = (out / "report.html").read_text()
        assert not RESOURCE_REFERENCE.search(page)
        assert "<script" not in page and "<link" not in page
        pngs = [p for p in written if p.suffix == ".png"]
        assert page.count('src="data:image/png;base64,') == len(pngs)
        for png in pngs:
            assert base64.b64encode(png.read_bytes()).decode() in page, png.name


def test_csv_holds_estimates_repeats_and_comparisons(full_report: tuple) -> None:
    results, out, _ = full_report
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    analysis = results[ANALYSIS_KEY]
    by_section = {s: [r for r in rows if r["section"] == s] for s in ("estimate", "repeat", "comparison")}
    assert len(by_section["comparison"]) == len(analysis["comparisons"])
    assert len(by_section["estimate"]) == len(analysis["estimates"])
    assert {r["repeat"] for r in by_section["repeat"]} == {"1", "2", "3"}
    for row in by_section["estimate"]:
        if row["ci_low"] not in ("", "inf"):
            assert float(row["ci_low"]) <= float(row["value"]) <= float(row["ci_high"])
    worse = {(r["metric"], r["case_id"]) for r in by_section["comparison"] if r["verdict"] == "worse"}
    assert ("gsm8k_accuracy", "t=0-top_p=1") in worse and ("itl_median", "t=0-top_p=1") in worse


def test_workload_figures_are_drawn_when_the_data_exists(full_report: tuple) -> None:
    _, out, written = full_report
    assert {"itl_ecdf.png", "gsm8k.png"} <= {p.name for p in written}
    text = (out / "report.md").read_text()
    assert "not drawn" not in text and "| GSM8K accuracy | 77%" in text
    assert "(range " in text  # spread cells with three repeats


def test_results_without_analysis_still_render(tmp_path: Path) -> None:
    written = render_report(load_results(REAL), tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "holds no A/B analysis" in text and "| nofix | t=1-top_p=1 |" in text
    assert {p.name for p in written} == {"report.md", "report.html", "results.csv"}


def test_reports_never_import_the_harness_or_pytest() -> None:
    # but the typed results model, which imports nothing of the project (tests/results/test_results_types.py)
    for source in REPORTS_DIR.glob("*.py"):
        text = source.read_text()
        assert not re.search(r"^\s*(from|import)\s+(harness(?!\.results\.types\b)|pytest|suites)\b", text, re.M), source.name


def test_command_report_renders_and_reports_bad_files_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert command_report(str(tmp_path / "missing.json"), str(tmp_path / "out")) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("specsuite: error: cannot read results file")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert command_report(str(broken), str(tmp_path / "out")) == 2
    assert "not valid JSON" in capsys.readouterr().err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert command_report(str(REAL), str(blocker / "out")) == 2
    assert capsys.readouterr().err.startswith("specsuite: error: cannot write the report")


def test_a_pytest_session_file_feeds_the_report(tmp_path: Path) -> None:
    """`pytest suites -m perf` writes each arm's one session directly (no `repeats`); the report
    still draws the ITL ECDF and fills the ITL and tok/s rows from it."""
    merged = with_workloads(repeats=1)
    session_shaped = {**merged, "schema_version": 1, "arms": {}}
    for name, arm in merged["arms"].items():
        session = arm["repeats"][0]
        session_shaped["arms"][name] = {"cases": session.get("cases", []), "workloads": session.get("workloads", {})}
    source = tmp_path / "results.json"
    source.write_text(json.dumps(session_shaped))
    out = tmp_path / "report"
    assert command_report(str(source), str(out)) == 0
    assert (out / "itl_ecdf.png").exists()
    text = (out / "report.md").read_text()
    assert "ITL ECDF: not drawn" not in text
    assert re.search(r"\| median ITL \| [0-9.]+ ms", text) and re.search(r"\| output throughput \| [0-9.]+ tok/s", text)
