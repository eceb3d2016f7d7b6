"""The kernel suite as a user runs it: `pytest suites/ -m kernel` in a subprocess, with its results.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_kernel_suite(tmp_path: Path, *options: str, timeout: float = 400) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    results = tmp_path / "results"
    command = [sys.executable, "-m", "pytest", "suites/", "-m", "kernel", "-q", "-p", "no:cacheprovider",
               "--results-dir", str(results), "--run-id", "kernel", *options]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    path = results / "kernel" / "results.json"
    return done, json.loads(path.read_text()) if path.is_file() else None


def run_kernel_suite_env(tmp_path: Path, options: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], None]:
    command = [sys.executable, "-m", "pytest", "suites/", "-m", "kernel", "-q", "-p", "no:cacheprovider",
               "--results-dir", str(tmp_path / "results"), *options]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **env})
    return done, None
