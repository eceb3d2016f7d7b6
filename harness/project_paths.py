"""Where the checkout's own folders are: the project root and the small data the project makes."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "fixtures" / "data"  # committed prompt sets and the synthetic GSM8K set
RESULTS_DIR = "specsuite-results"  # --results-dir's default (relative to the working directory), and the history's
