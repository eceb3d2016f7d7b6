"""Where the checkout's own folders are: the project root and the small data the project makes."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # specsuite/
PROJECT_ROOT = PACKAGE_DIR.parent
FIXTURES_DIR = PACKAGE_DIR / "fixtures"  # the models, CPU ops, patches and data the project makes
DATA_DIR = FIXTURES_DIR / "data"  # committed prompt sets and the synthetic GSM8K set
# The pytest suites: suites/ in a checkout, installed beside the package's own folders as specsuite/suites (setup.py).
SUITES_DIR = PACKAGE_DIR / "suites" if (PACKAGE_DIR / "suites").is_dir() else PROJECT_ROOT / "suites"
RESULTS_DIR = "specsuite-results"  # --results-dir's default (relative to the working directory), and the history's


def python_path_with(*first: str | Path) -> str:
    """A child process's PYTHONPATH: `first`, then this process's own PYTHONPATH (empty parts left out)."""
    # the environment variable, read where the child's environment is made
    return os.pathsep.join(filter(None, [*map(str, first), os.environ.get("PYTHONPATH")]))
