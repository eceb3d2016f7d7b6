"""Where the checkout's own folders are: the project root and the small data the project makes."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "fixtures" / "data"  # committed prompt sets and the synthetic GSM8K set
RESULTS_DIR = "specsuite-results"  # --results-dir's default (relative to the working directory), and the history's


def python_path_with(*first: str | Path) -> str:
    """A child process's PYTHONPATH: `first`, then this process's own PYTHONPATH (empty parts left out)."""
    # the environment variable, read where the child's environment is made
    return os.pathsep.join(filter(None, [*map(str, first), os.environ.get("PYTHONPATH")]))
