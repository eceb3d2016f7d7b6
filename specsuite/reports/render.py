"""Render a results dict into a report folder: report.md, report.html, results.csv and the PNG figures.

Reads the typed results only (the A/B analysis must already be in them under
`specsuite.results.types.ANALYSIS_KEY`; without it the report shows raw totals and says so).  The page is
laid out once, as typed blocks, by specsuite/reports/overview.py (verdicts first, then the figures, then the
tables); the Markdown and HTML renderers draw the same blocks.
"""

from __future__ import annotations

from pathlib import Path

from specsuite.reports.csv_export import render_csv
from specsuite.reports.html import KNOWN_VERDICTS, render_html
from specsuite.reports.markdown import render_markdown
from specsuite.reports.overview import build_report
from specsuite.reports.plots import render_plots
from specsuite.results.types import Document


def _verdicts(results: Document) -> set[str]:
    """Every verdict string the analysis holds, so the HTML draws each one as a chip, known or not."""
    analysis = results.analysis
    rows = analysis.comparisons if analysis is not None else []
    return {row.shown_verdict() for row in rows if row.verdict} | set(KNOWN_VERDICTS)


def render_report(results: Document, out_dir: Path) -> list[Path]:
    """Write the report files into out_dir (created if needed) and return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures, notes = render_plots(results, out_dir)
    report = build_report(results, figures, notes)
    written = [figure.path for figure in figures]
    for name, text in (("report.md", render_markdown(report)), ("report.html", render_html(report, _verdicts(results))),
                       ("results.csv", render_csv(results))):
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
