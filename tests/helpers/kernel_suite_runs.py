"""The kernel suite as a user runs it: `pytest suites/ -m kernel` in a subprocess, with its results.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RISING_LOAD = 2.0  # headroom for load that rises while the subprocess runs


def hang_guard_s(idle_s: float) -> float:
    """A subprocess deadline that only guards against a hang (these tests check outcomes, never time): `idle_s`, ample
    on 2 idle cores, times the 1-minute load per core measured now (at least 1), times RISING_LOAD.  A fixed 400 s
    failed two kernel tests at load 3-20 on 2 shared cores."""
    load_per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return idle_s * max(1.0, load_per_core) * RISING_LOAD


def run_kernel_suite(tmp_path: Path, *options: str, timeout: float = 400) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """The suite's run and its results.json (None without one); `timeout`: seconds on an idle machine (hang_guard_s)."""
    results = tmp_path / "results"
    command = [sys.executable, "-m", "pytest", "suites/", "-m", "kernel", "-q", "-p", "no:cacheprovider",
               "--results-dir", str(results), "--run-id", "kernel", *options]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=hang_guard_s(timeout), check=False)
    path = results / "kernel" / "results.json"
    return done, json.loads(path.read_text()) if path.is_file() else None


def run_kernel_suite_env(tmp_path: Path, options: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], None]:
    command = [sys.executable, "-m", "pytest", "suites/", "-m", "kernel", "-q", "-p", "no:cacheprovider",
               "--results-dir", str(tmp_path / "results"), *options]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=hang_guard_s(300), check=False, env={**os.environ, **env})
    return done, None
