"""The report of a recorded main-job run (tests/data/ab_results/main_job_smoke.json.gz), rendered into a folder."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from specsuite.analysis.verdicts import compare_arms
from specsuite.reports.document import ANALYSIS_KEY
from specsuite.reports.render import render_report
from specsuite.results.types import Document

MAIN_JOB = Path(__file__).resolve().parents[1] / "data" / "ab_results" / "main_job_smoke.json.gz"


def render_main_job_report(out: Path) -> Path:
    """Render the recorded run's report into `out` (report.md, report.html, figures); returns `out`."""
    results = json.loads(gzip.decompress(MAIN_JOB.read_bytes()))
    results[ANALYSIS_KEY] = compare_arms(Document.from_dict(results)).to_dict()  # as results.json holds it
    render_report(Document.from_dict(results), out)
    return out
