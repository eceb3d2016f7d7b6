"""`specsuite run`: run the pytest suites once per arm and repeat, interleaved, into one folder.

Each (arm, repeat) is its own pytest session in a subprocess, so a launched arm is restarted
between repeats and a crash in one session cannot take the others down.  Sessions write under
`<run>/sessions/<arm>-r<k>/`; this module merges their results.json files into `<run>/results.json`
as each one finishes (so an interrupted run keeps what it has) and records every seed used.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

from harness.compare.arms import ArmSpec
from harness.errors import SpecsuiteError
from harness.project_paths import PROJECT_ROOT
from harness.results.store import RunDirectory, load_results

REPO_ROOT = PROJECT_ROOT
SUITES_DIR = REPO_ROOT / "suites"
SESSION_TIMEOUT_S = 3 * 3600
# What each session reports about its arm once; kept at arm level in the merged results.
PER_ARM_KEYS = ("identity", "vocab", "server_under_test")


@dataclass(frozen=True)
class RunPlan:
    """What to run: arms in order, repeats, and the options every pytest session gets."""

    arms: list[ArmSpec]
    repeats: int
    seed: int
    markers: str
    pytest_options: list[str]

    def schedule(self) -> list[tuple[int, ArmSpec]]:
        """Interleaved order A B A B ...: drift over time hits every arm alike."""
        return [(repeat, arm) for repeat in range(1, self.repeats + 1) for arm in self.arms]


def _check_checkout() -> None:
    if not (SUITES_DIR / "pytest_plugin.py").is_file() or not (REPO_ROOT / "conftest.py").is_file():
        raise SpecsuiteError(f"specsuite run needs the source checkout (suites/ and conftest.py next to {REPO_ROOT / 'harness'}); "
                             "install with `pip install -e .`")


def session_command(plan: RunPlan, arm: ArmSpec, repeat: int, sessions_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", str(SUITES_DIR), "-m", plan.markers, "-p", "no:cacheprovider", "-q",
        "--results-dir", str(sessions_dir), "--run-id", f"{arm.name}-r{repeat}", "--arm-name", arm.name,
        "--seed", str(plan.seed + repeat - 1), *arm.pytest_args(), *plan.pytest_options,
    ]


def run_sessions(plan: RunPlan, run_dir: RunDirectory, on_progress: Callable[[str], None], merged: dict[str, Any]) -> dict[str, Any]:
    """Run every session in schedule order, merging each result as it lands."""
    _check_checkout()
    sessions_dir = run_dir.path / "sessions"
    sessions_dir.mkdir(exist_ok=True)
    schedule = plan.schedule()
    bar = tqdm(total=len(schedule), desc="specsuite sessions", unit="session", disable=not sys.stderr.isatty())
    for index, (repeat, arm) in enumerate(schedule, start=1):
        label = f"{arm.name} repeat {repeat}"
        on_progress(f"[{index}/{len(schedule)}] {label}: running")
        log_path = sessions_dir / f"{arm.name}-r{repeat}.log"
        started = time.perf_counter()
        with open(log_path, "w", encoding="utf-8") as log:
            try:
                completed = subprocess.run(session_command(plan, arm, repeat, sessions_dir), cwd=REPO_ROOT, stdout=log,
                                           stderr=subprocess.STDOUT, timeout=SESSION_TIMEOUT_S, check=False)
                exit_code = completed.returncode
            except subprocess.TimeoutExpired:
                exit_code = -1
        entry = _session_entry(sessions_dir / f"{arm.name}-r{repeat}", arm, repeat, plan.seed + repeat - 1, exit_code, log_path)
        entry["wall_time_s"] = time.perf_counter() - started
        arm_entry = merged["arms"].setdefault(arm.name, {"spec": _arm_description(arm), "repeats": []})
        for key in PER_ARM_KEYS:
            if entry.get(key) and key not in arm_entry:
                arm_entry[key] = entry[key]
        arm_entry["repeats"].append({k: v for k, v in entry.items() if k not in PER_ARM_KEYS})
        run_dir.write_results(merged)
        on_progress(f"[{index}/{len(schedule)}] {label}: {_outcome(exit_code)} ({entry['wall_time_s']:.0f} s)")
        bar.update(1)
    bar.close()
    return merged


def _outcome(exit_code: int) -> str:
    meanings = {0: "all checks passed", 1: "some checks failed", 4: "server unreachable", 5: "no tests collected", -1: "timed out"}
    return meanings.get(exit_code, f"pytest exit {exit_code}")


def _arm_description(arm: ArmSpec) -> dict[str, Any]:
    return {"name": arm.name, "url": arm.url, "launch": arm.launch}


def _session_entry(session_dir: Path, arm: ArmSpec, repeat: int, seed: int, exit_code: int, log_path: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"repeat": repeat, "seed": seed, "exit_code": exit_code, "session_dir": str(session_dir), "log": str(log_path), "cases": []}
    results_file = session_dir / "results.json"
    if not results_file.is_file():
        entry["error"] = _last_line(log_path) or "the session wrote no results"
        return entry
    session = load_results(results_file)
    arm_data = (session.get("arms") or {}).get(arm.name, {})
    measured = (arm_data.get("repeats") or [{}])[0]  # a pytest session is one repeat of its arm
    entry.update({"cases": measured.get("cases", []), "identity": arm_data.get("identity"), "vocab": arm_data.get("vocab"),
                  "server_under_test": arm_data.get("server_under_test"), "warnings": session.get("warnings") or [],
                  "workloads": measured.get("workloads", {}), "session_status": session.get("status")})
    return entry


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""
