"""The report's one builder and its renderers: summary.md is the report's blocks picked by role, the Markdown and
HTML draw the same blocks, and the typed views read the results' and the history's free-form parts."""

from __future__ import annotations

import copy
import gzip
import json

import pytest

from specsuite.analysis.verdicts import compare_arms
from specsuite.reports.blocks import Bullets, Heading, Paragraph, Preformatted, Role, VerdictList
from specsuite.reports.html import render_html
from specsuite.reports.markdown import render_markdown
from specsuite.reports.overview import EXPLAINED, build_report
from specsuite.reports.summary import run_verdict_lines, summary_document
from specsuite.reports.trends import regressions_markdown
from specsuite.results.types import ANALYSIS_KEY, Arm, ArmIdentity, Document, Trends, VersionChange
from tests.helpers.main_job_report import MAIN_JOB


@pytest.fixture(scope="module")
def raw_results() -> dict:
    return json.loads(gzip.decompress(MAIN_JOB.read_bytes()))


@pytest.fixture(scope="module")
def analysed(raw_results: dict) -> dict:
    results = copy.deepcopy(raw_results)
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()
    return results


def test_summary_is_the_reports_blocks_picked_by_role(analysed: dict) -> None:
    report = build_report(Document.from_dict(analysed), [], [])
    summary = summary_document(Document.from_dict(analysed), "exit 0: fine")
    banner = report.with_role(Role.SERVER_UNDER_TEST)
    assert len(banner) == 1 and isinstance(banner[0], Paragraph) and summary.splitlines()[0] == banner[0].text
    lines = [line.text for block in report.with_role(Role.VERDICT_LINES) if isinstance(block, VerdictList) for line in block.lines]
    notes = [block.text for role in (Role.SIDE_BY_SIDE, Role.FAMILY_CAVEAT, Role.NOT_RUN) for block in report.with_role(role)
             if isinstance(block, Paragraph)]
    assert lines and run_verdict_lines(Document.from_dict(analysed)) == lines + notes
    assert all(f"- {text}\n" in summary for text in lines + notes)
    explained = [item for block in report.blocks if isinstance(block, Bullets) for item in block.items if item in EXPLAINED.values()]
    assert explained and not any(text in summary for text in explained)  # a body block: on the page, not in the summary
    assert "## Per case\n\n| arm | case |" in summary and summary.endswith("\n")


def test_the_per_case_counts_are_on_the_page_only_without_an_analysis(raw_results: dict, analysed: dict) -> None:
    assert not build_report(Document.from_dict(analysed), [], []).with_role(Role.PER_CASE_COUNTS)
    bare = {key: value for key, value in raw_results.items() if key != ANALYSIS_KEY}
    counts = build_report(Document.from_dict(bare), [], []).with_role(Role.PER_CASE_COUNTS)
    assert len(counts) == 1 and isinstance(counts[0], Preformatted)
    assert counts[0].text.rstrip() in summary_document(Document.from_dict(bare), "exit 0")


def test_markdown_and_html_draw_the_same_headings(analysed: dict) -> None:
    report = build_report(Document.from_dict(analysed), [], [])
    markdown, page = render_markdown(report), render_html(report)
    headings = [block for block in report.blocks if isinstance(block, Heading)]
    assert {heading.level for heading in headings} == {1, 2, 3}
    for heading in headings:
        assert f"{'#' * heading.level} {heading.text}\n" in markdown
        assert f"<h{heading.level}>" in page
    assert "## Setup\n" in markdown and "## Figures" not in markdown  # no figures given: no section for them


def test_the_identity_view_reads_the_reference_marker_and_the_sampler() -> None:
    reference = Arm.from_dict({"identity": {"version": "0.5", "server_args": {"refserver_arm": None,
                                                                              "refserver_sampler": {"label": "numpy", "device": "cpu"}}}})
    view = ArmIdentity.of(reference)
    assert view.is_reference() and view.server_args is not None and view.server_args.refserver_sampler is not None
    assert view.server_args.refserver_sampler.label == "numpy"
    real = ArmIdentity.of(Arm.from_dict({"identity": {"server_args": {"refserver_sampler": "not an object"}}}))
    assert not real.is_reference() and real.server_args is not None and real.server_args.refserver_sampler is None
    assert not ArmIdentity.of(Arm.from_dict({"identity": None})).is_reference()


def test_a_repeats_failed_tests_are_typed() -> None:
    repeat = Arm.from_dict({"repeats": [{"tests": {"failed": [{"module": "m", "kind": "error", "message": "boom"}]}}]}).repeats[0]
    assert [(test.module, test.kind, test.message) for test in repeat.tests.failed] == [("m", "error", "boom")]
    assert Arm.from_dict({"repeats": [{}]}).repeats[0].tests is None


def _step(metric: str, open_: bool) -> dict:
    return {"metric": metric, "label": metric, "unit": "ms", "case_id": "t=0", "series": "s", "position": 3, "night": 4,
            "started_utc": "2025-01-04", "label_at_step": "b4", "before_mean": 1.0, "after_mean": 2.0,
            "effect": {"scale": "relative", "value": 1.0}, "kind": "regression", "practical": open_, "p_adjusted": 0.001,
            "open": open_, "shape": "step"}


def test_trend_records_write_back_what_they_read_and_keep_regressions_apart() -> None:
    assert VersionChange.from_dict({"position": 5, "from": 1, "to": 2}).from_version == 1
    assert VersionChange.from_dict({"position": 5, "from": 1, "to": 2}).to_dict() == {"position": 5, "from": 1, "to": 2}
    regression, improvement = _step("itl", True), _step("itl", False)
    trends = {"store": "x", "generated_utc": "now", "test": "t", "alpha": 0.01, "min_size": 2, "filters": {"arm": None},
              "series": [{"key": "s", "arm": "a", "config_key": "c", "model": "m", "nights": 5, "runs": [],
                          "trends": [{"metric": "itl", "label": "itl", "unit": "ms", "case_id": "t=0", "points": [],
                                      "version_changes": [{"position": 2, "from": 1, "to": 2}], "steps": [regression],
                                      "notes": ["n"]}]}],
              "steps": [regression, improvement], "regressions": [regression], "open_regressions": [regression]}
    assert Trends.from_dict(trends).to_dict() == trends
    markdown = regressions_markdown(Trends.from_dict(trends))
    assert "## Regressions (1, 1 open)" in markdown
    other = markdown.split("## Other steps")[1].split("## Series")[0]
    assert other.count("| itl | t=0 |") == 1 and "| no |" in other  # the improvement only, not the regression again
