"""`specsuite run`: run the pytest suites once per arm and repeat into one folder, the arms side by side.

Each (arm, repeat) is its own pytest session in a subprocess, so a launched arm is restarted
between repeats and a crash in one session cannot take the others down.  A repeat is one round:
every arm's session starts at once and the round ends when the last one exits (A and B share the
host's conditions, and the run takes as long as its slowest arm rather than the sum of them);
rounds run one after another.  Sessions write under `<run>/sessions/<arm>-r<k>/`; this module
merges their results.json files into `<run>/results.json` while they run (every few seconds, and
once more as each one exits), so an interrupted run keeps what it has, and it records every seed
and session command used.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from harness.compare.arms import ArmSpec
from harness.errors import SpecsuiteError
from harness.project_paths import PROJECT_ROOT
from harness.results.store import RunDirectory, load_results

REPO_ROOT = PROJECT_ROOT
SUITES_DIR = REPO_ROOT / "suites"
SESSION_TIMEOUT_S = 3 * 3600
POLL_S = 0.2
REFRESH_S = 5.0  # how often a running session's partial results are merged in
STOP_GRACE_S = 30.0  # what an interrupted session gets to finish its own cleanup (stop its server)
# What each session reports about its arm once; kept at arm level in the merged results.
PER_ARM_KEYS = ("identity", "vocab", "server_under_test")

# The main job: what `specsuite run` runs with no -m (the seed's tables: correctness, GSM8K, bench).
MAIN_JOB_MARKERS = "correctness or gsm8k or perf"
# Its workload settings, given to every session before the user's --pytest-arg (so those win):
# GSM8K at both of the seed's temperatures on the bundled synthetic set; the serving benchmark
# keeps the suite's defaults, the seed's shape (random 1024/512, concurrency 1) over 8 prompts.
MAIN_JOB_OPTIONS = ("--gsm8k-path", "synthetic", "--gsm8k-num-questions", "200", "--gsm8k-temperatures", "0,1")


@dataclass(frozen=True)
class RunPlan:
    """What to run: arms in order, repeats, and the options every pytest session gets."""

    arms: list[ArmSpec]
    repeats: int
    seed: int
    markers: str
    pytest_options: list[str]
    side_by_side: bool = True  # False: one session at a time, A B A B ...

    def rounds(self) -> list[list[tuple[int, ArmSpec]]]:
        """Sessions grouped into what runs at once: every arm of a repeat, or one session per round."""
        per_repeat = [[(repeat, arm) for arm in self.arms] for repeat in range(1, self.repeats + 1)]
        if self.side_by_side:
            return per_repeat
        return [[session] for round_ in per_repeat for session in round_]

    def schedule(self) -> list[tuple[int, ArmSpec]]:
        """Interleaved order A B A B ...: drift over time hits every arm alike."""
        return [session for round_ in self.rounds() for session in round_]

    def session_seed(self, repeat: int) -> int:
        return self.seed + repeat - 1


def _check_checkout() -> None:
    if not (SUITES_DIR / "pytest_plugin.py").is_file() or not (REPO_ROOT / "conftest.py").is_file():
        raise SpecsuiteError(f"specsuite run needs the source checkout (suites/ and conftest.py next to {REPO_ROOT / 'harness'}); "
                             "install with `pip install -e .`")


def session_command(plan: RunPlan, arm: ArmSpec, repeat: int, sessions_dir: Path) -> list[str]:
    return [
        # The suites use no hypothesis; its plugin alone costs seconds of import in every session.
        sys.executable, "-m", "pytest", str(SUITES_DIR), "-m", plan.markers, "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q",
        "--results-dir", str(sessions_dir), "--run-id", f"{arm.name}-r{repeat}", "--arm-name", arm.name,
        "--seed", str(plan.session_seed(repeat)), *arm.pytest_args(), *plan.pytest_options,
    ]


@dataclass
class _Session:
    """One running pytest session and what the merge needs to know about it."""

    arm: ArmSpec
    repeat: int
    seed: int
    command: list[str]
    log_path: Path
    session_dir: Path
    process: subprocess.Popen[bytes]
    log: IO[str]
    started: float = field(default_factory=time.perf_counter)
    seen_mtime: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.arm.name} repeat {self.repeat}"


def _start(plan: RunPlan, arm: ArmSpec, repeat: int, sessions_dir: Path) -> _Session:
    log_path = sessions_dir / f"{arm.name}-r{repeat}.log"
    command = session_command(plan, arm, repeat, sessions_dir)
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in _finish, after the process exits
    # The child stays in our process group, so a terminal's Ctrl-C reaches it directly
    # (harness.server.interrupts then waits for it to save its results and stop its server).
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    return _Session(arm, repeat, plan.session_seed(repeat), command, log_path, sessions_dir / f"{arm.name}-r{repeat}", process, log)


def _merge(merged: dict[str, Any], session: _Session, exit_code: int | None) -> dict[str, Any]:
    """Put the session's entry (partial while exit_code is None) into its arm, replacing any earlier one."""
    entry = _session_entry(session.session_dir, session.arm, session.repeat, session.seed, exit_code, session.log_path)
    entry["wall_time_s"] = time.perf_counter() - session.started
    entry["command"] = session.command
    arm_entry = merged["arms"].setdefault(session.arm.name, {"spec": _arm_description(session.arm), "repeats": []})
    for key in PER_ARM_KEYS:
        if entry.get(key) and key not in arm_entry:
            arm_entry[key] = entry[key]
    repeats = [r for r in arm_entry["repeats"] if r.get("repeat") != session.repeat]
    repeats.append({k: v for k, v in entry.items() if k not in PER_ARM_KEYS})
    arm_entry["repeats"] = sorted(repeats, key=lambda r: r.get("repeat", 0))
    return entry


def _refresh(merged: dict[str, Any], running: list[_Session]) -> bool:
    """Merge the partial results of sessions whose results.json changed; True when any did."""
    changed = False
    for session in running:
        try:
            mtime = (session.session_dir / "results.json").stat().st_mtime
        except OSError:
            continue
        if mtime != session.seen_mtime:
            session.seen_mtime = mtime
            try:
                _merge(merged, session, None)
            except SpecsuiteError:
                continue  # caught mid-rename or torn; the next refresh or the final merge reads it
            changed = True
    return changed


def _stop(running: list[_Session]) -> None:
    """On an interrupt: SIGTERM what still runs (a Ctrl-C already reached them), then wait for their cleanup."""
    for session in running:
        if session.process.poll() is None:
            try:
                session.process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + STOP_GRACE_S
    for session in running:
        try:
            session.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            session.process.kill()
            session.process.wait()
        session.log.close()


def run_sessions(plan: RunPlan, run_dir: RunDirectory, on_progress: Callable[[str], None], merged: dict[str, Any]) -> dict[str, Any]:
    """Run every round, its sessions side by side, merging each result as it lands."""
    _check_checkout()
    sessions_dir = run_dir.path / "sessions"
    sessions_dir.mkdir(exist_ok=True)
    total = len(plan.schedule())
    merged["side_by_side"] = plan.side_by_side and len(plan.arms) > 1
    merged["sessions"] = [{"arm": arm.name, "repeat": repeat, "seed": plan.session_seed(repeat)} for repeat, arm in plan.schedule()]
    bar = tqdm(total=total, desc="specsuite sessions", unit="session", disable=not sys.stderr.isatty())
    done = 0
    for round_ in plan.rounds():
        running = [_start(plan, arm, repeat, sessions_dir) for repeat, arm in round_]
        names = ", ".join(s.label for s in running)
        on_progress(f"[{done + 1}-{done + len(running)}/{total}] running {names}" + (" side by side" if len(running) > 1 else ""))
        last_refresh = time.monotonic()
        try:
            while running:
                time.sleep(POLL_S)
                for session in list(running):
                    exit_code = session.process.poll()
                    if exit_code is None and time.perf_counter() - session.started > SESSION_TIMEOUT_S:
                        session.process.terminate()
                        session.process.wait()
                        exit_code = -1
                    if exit_code is None:
                        continue
                    session.log.close()
                    running.remove(session)
                    entry = _merge(merged, session, exit_code)
                    run_dir.write_results(merged)
                    done += 1
                    bar.update(1)
                    on_progress(f"[{done}/{total}] {session.label}: {_outcome(exit_code)} ({entry['wall_time_s']:.0f} s)")
                if running and time.monotonic() - last_refresh >= REFRESH_S:
                    last_refresh = time.monotonic()
                    if _refresh(merged, running):
                        run_dir.write_results(merged)
        except KeyboardInterrupt:
            _stop(running)
            for session in running:
                _merge(merged, session, session.process.returncode)
            run_dir.write_results(merged)
            bar.close()
            raise
    bar.close()
    return merged


def _outcome(exit_code: int) -> str:
    meanings = {0: "all checks passed", 1: "some checks failed", 4: "server unreachable", 5: "no tests collected", -1: "timed out"}
    return meanings.get(exit_code, f"pytest exit {exit_code}")


def _arm_description(arm: ArmSpec) -> dict[str, Any]:
    return {"name": arm.name, "url": arm.url, "launch": arm.launch}


def _session_entry(session_dir: Path, arm: ArmSpec, repeat: int, seed: int, exit_code: int | None, log_path: Path) -> dict[str, Any]:
    """One repeat's entry; `exit_code` None while the session still runs (`running: true`)."""
    entry: dict[str, Any] = {"repeat": repeat, "seed": seed, "exit_code": exit_code, "session_dir": str(session_dir), "log": str(log_path), "cases": []}
    if exit_code is None:
        entry["running"] = True
    results_file = session_dir / "results.json"
    if not results_file.is_file():
        if exit_code is not None:
            entry["error"] = _last_line(log_path) or "the session wrote no results"
        return entry
    session = load_results(results_file)
    arm_data = (session.get("arms") or {}).get(arm.name, {})
    entry.update({"cases": arm_data.get("cases", []), "identity": arm_data.get("identity"), "vocab": arm_data.get("vocab"),
                  "server_under_test": arm_data.get("server_under_test"), "warnings": session.get("warnings") or [],
                  "workloads": arm_data.get("workloads", {}), "session_status": session.get("status")})
    return entry


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""

