"""`specsuite report RESULTS.json --out DIR`: re-render a run's report without a server.

Loads the results file (a run folder works too) as the typed document, recomputes the A/B analysis
from the raw data with the default thresholds, puts it in the document (``ab_compare``), and writes
report.md, report.html, results.csv and the figures into DIR.  The results file itself is left
untouched.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specsuite.analysis.verdicts import compare_arms
from specsuite.cli.exit_codes import EXIT_ERROR, EXIT_OK
from specsuite.errors import SpecsuiteError
from specsuite.reports.render import render_report
from specsuite.results.store import load_results
from specsuite.results.types import ANALYSIS_KEY


def command_report(results_path: str, out_dir: str) -> int:
    """Render the report; a missing or invalid file, or an unwritable folder, is one error line and exit 2."""
    try:
        document = load_results(results_path)
        document.put(ANALYSIS_KEY, compare_arms(document))
        written = render_report(document, Path(out_dir))
    except SpecsuiteError as exc:
        print(f"specsuite: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"specsuite: error: cannot write the report to {out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"specsuite: wrote {len(written)} files to {out_dir} (open {Path(out_dir) / 'report.html'})")
    return EXIT_OK
