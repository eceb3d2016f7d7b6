"""Optional dependencies and local paths a run's settings need, checked before any server starts: one line naming
the extra or the path (`preflight`).

The base install runs the main job and the suites; a setting that needs an optional package (`--gsm8k-path hf`
or a `.parquet` file: `datasets`, the `hf` extra) is refused up front in one line, under pytest (exit 4) and
`specsuite run` (exit 2) alike, instead of a traceback per test or a family silently missing from the summary.
The same holds for a postgresql:// `--results-db` (psycopg, the `postgres` extra: without it a pytest nightly ran the
whole suite and stored nothing), a `--tokenizer` folder, a GSM8K file and the results folder.
Only whether the package can be found is checked (`importlib.util.find_spec`): importing `datasets` takes seconds.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

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


# ---------------------------------------------------------------- the preflight: everything a run needs, before work


def missing_for_results_db(url: str | None, found: Callable[[str], bool] | None = None) -> str | None:
    """One line when a postgresql:// results database needs psycopg and this Python lacks it; None otherwise."""
    scheme = (url or "").split("://", 1)[0].lower()
    if scheme not in ("postgresql", "postgres") or (found or installed)("psycopg"):
        return None
    return ("--results-db postgresql://... needs the psycopg package, which is not installed: install the 'postgres' extra "
            "(pip install 'specsuite[postgres]', or .venv/bin/pip install -e '.[postgres]' in a checkout); "
            "nothing ran, so no night went unstored")


def missing_local_paths(*, tokenizer: str | None = None, gsm8k_path: str | None = None, results_dir: str | None = None) -> str | None:
    """One line for the first local path a run needs that is not there: the tokenizer folder, the GSM8K file, a results
    folder that cannot be made (a file of that name, or a parent that is not a folder)."""
    if tokenizer and not Path(tokenizer).expanduser().is_dir():
        return f"--tokenizer {tokenizer}: no such folder on this machine (it must hold the model's tokenizer files)"
    if gsm8k_path and gsm8k_path not in ("synthetic", "hf") and not Path(gsm8k_path).expanduser().is_file():
        return f"GSM8K file not found: {gsm8k_path} (--gsm8k-path takes a .jsonl or .parquet file, synthetic or hf)"
    if results_dir:
        folder = Path(results_dir).expanduser()
        existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            return f"--results-dir {results_dir}: {existing} is a file, not a folder"
        if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
            return f"--results-dir {results_dir}: cannot write under {existing}"
    return None


def preflight(*, gsm8k_path: str | None = None, uses_gsm8k: bool = False, results_db: str | None = None,
              tokenizer: str | None = None, results_dir: str | None = None) -> str | None:
    """The first thing a run would lack, as one line, checked before any server starts or test runs (None: all there).
    `uses_gsm8k`: the run's tests or workloads include GSM8K (its dataset and its package then matter)."""
    return (missing_for_results_db(results_db)
            or missing_local_paths(tokenizer=tokenizer, gsm8k_path=gsm8k_path if uses_gsm8k else None, results_dir=results_dir)
            or (missing_for_gsm8k(gsm8k_path) if uses_gsm8k else None))
