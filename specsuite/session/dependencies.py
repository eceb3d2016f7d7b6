"""Optional dependencies a run's settings need, checked before any server starts: one line naming the extra.

The base install runs the main job and the suites; a setting that needs an optional package (`--gsm8k-path hf`
or a `.parquet` file: `datasets`, the `hf` extra) is refused up front in one line, under pytest (exit 4) and
`specsuite run` (exit 2) alike, instead of a traceback per test or a family silently missing from the summary.
Only whether the package can be found is checked (`importlib.util.find_spec`): importing `datasets` takes seconds.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

# package -> the extra that installs it (pyproject.toml's optional-dependencies)
EXTRAS = {"datasets": "hf"}


def installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def gsm8k_path_needs(path: str | None) -> str | None:
    """The optional package a `--gsm8k-path` value needs, or None: the Hub ('hf') and Parquet files need `datasets`."""
    if path is None:
        return None
    return "datasets" if path == "hf" or path.lower().endswith(".parquet") else None


def missing_for_gsm8k(path: str | None, found: Callable[[str], bool] | None = None) -> str | None:
    """One line when `--gsm8k-path` needs a package this Python lacks (`found`, default `installed`); None when it can run."""
    package = gsm8k_path_needs(path)
    if package is None or (found or installed)(package):
        return None
    extra = EXTRAS[package]
    return (f"--gsm8k-path {path} needs the {package} package, which is not installed: install the '{extra}' extra "
            f"(pip install 'specsuite[{extra}]', or .venv/bin/pip install -e '.[{extra}]' in a checkout), "
            "or use --gsm8k-path synthetic or a .jsonl file")
