"""`specsuite run`: run the pytest suites once per arm and repeat into one folder, the arms side by side.

Each session is `python -m pytest -p specsuite.pytest_plugin.plugin SUITES_DIR` in the session's own folder, the suites'
folder that this specsuite holds (specsuite.project_paths.SUITES_DIR: a checkout's suites/, an installed wheel's
specsuite/suites), so an installed wheel (`pip install .`) runs the main job as a checkout does.

Each (arm, repeat) is its own pytest session in a subprocess, so a launched arm is restarted
between repeats and a crash in one session cannot take the others down.  A repeat is one round:
every arm's session starts at once and the round ends when the last one exits (A and B share the
host's conditions, and the run takes as long as its slowest arm rather than the sum of them);
rounds run one after another.  With `parts` (the main job's: correctness, then GSM8K and the bench;
specsuite/session/main_job_profiles.py)
an embedded reference arm runs each part as its own session on a server of its own, all at once:
the parts share nothing a measurement needs (every case flushes and reads its own counters on its
own server), and the run then takes as long as its longest part.  Any other arm is one session,
since a second copy of a server given by URL or launch command would share or clash with it.

Each session gets its settings as one typed RunConfig written to `<arm>-r<k>.config.json` and named by
`--specsuite-config` (specsuite/session/config_file.py), not as options rendered back to its command line: the run's
settings, with the session's own server, results folder, run id and seed. The files sit in a private temporary
folder removed when the sessions end, never among the results: an arm's launch command may carry its API keys.

Sessions write under `<run>/sessions/<arm>-r<k>/` (a part: `<arm>-r<k>.<part>/`); this module
merges their results.json files into `<run>/results.json` while they run (every few seconds, and
once more as each one exits), so an interrupted run keeps what it has, and it records every seed
and session command used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.options import LosslessSettings
from specsuite.orchestration.arms import ArmSpec, free_ports
from specsuite.orchestration.junit import combine as combine_junit
from specsuite.orchestration.junit import junit_path, read_junit
from specsuite.project_paths import PROJECT_ROOT, SUITES_DIR
from specsuite.results.store import RunDirectory, load_results, write_json_atomic
from specsuite.results.types import Arm, Document, Repeat, Workloads
from specsuite.server.interrupts import child_pids
from specsuite.server.session import SERVER_URL_ENV
from specsuite.session.config import RunConfig
from specsuite.session.config_file import CONFIG_FILE_OPTION, write_config_file
from specsuite.session.option_table import RESULTS_DB_ENV

SUITES_PLUGIN = "specsuite.pytest_plugin.plugin"  # their pytest plugin (the `pytest11` entry point of the same name)
SESSION_TIMEOUT_S = 3 * 3600
POLL_S = 0.2
REFRESH_S = 5.0  # how often a running session's partial results are merged in
PROGRESS_S = 15.0  # how often a line says what the running sessions have done (a quiet minute reads as a hang)
# What an interrupted session gets to finish its own cleanup (write its results, stop its server); then the session
# and the servers it launched are killed, so that a Ctrl-C ends the run within 5 s, partial report included.
STOP_GRACE_S = 3.0
SERVER_KILL_WAIT_S = 0.5
# What each session reports about its arm once; kept at arm level in the merged results.
PER_ARM_KEYS = ("identity", "vocab", "server_under_test")



@dataclass(frozen=True)
class SessionSpec:
    """One pytest session: an arm (on its own port when it is a part), a repeat, and what it runs."""

    arm: ArmSpec
    repeat: int
    markers: str
    part: int = 0  # 0: the arm's whole run; 1, 2, ...: its parts

    @property
    def run_id(self) -> str:
        return f"{self.arm.name}-r{self.repeat}" + (f".{self.part}" if self.part else "")


@dataclass(frozen=True)
class RunPlan:
    """What to run: arms in order, repeats, the settings every pytest session starts from (`config`), and the
    arguments of pytest's own (not specsuite's) every session gets on its command line (`pytest_options`)."""

    arms: list[ArmSpec]
    repeats: int
    seed: int
    markers: str
    pytest_options: list[str]
    config: RunConfig = field(default_factory=RunConfig)
    side_by_side: bool = True  # False: one session at a time, A B A B ...
    parts: tuple[str, ...] = ()  # marker expressions a reference arm's run is split into (module docstring)

    def _sessions(self, repeat: int, arm: ArmSpec, ports: list[int]) -> list[SessionSpec]:
        if not self.parts or arm.reference_args is None:
            return [SessionSpec(arm, repeat, self.markers)]
        return [SessionSpec(arm.on_port(ports.pop()), repeat, markers, index)
                for index, markers in enumerate(self.parts, start=1)]

    def rounds(self, ports: Callable[[int], list[int]] = free_ports) -> list[list[SessionSpec]]:
        """Sessions grouped into what runs at once: every arm (and part) of a repeat, or one arm per round."""
        splits = sum(1 for arm in self.arms if self.parts and arm.reference_args is not None)
        rounds = []
        for repeat in range(1, self.repeats + 1):
            free = ports(splits * len(self.parts)) if splits else []
            per_arm = [self._sessions(repeat, arm, free) for arm in self.arms]
            rounds += [[s for sessions in per_arm for s in sessions]] if self.side_by_side else per_arm
        return rounds

    def schedule(self) -> list[tuple[int, ArmSpec]]:
        """Interleaved order A B A B ...: drift over time hits every arm alike."""
        return [(repeat, arm) for repeat in range(1, self.repeats + 1) for arm in self.arms]

    def session_seed(self, repeat: int) -> int:
        return self.seed + repeat - 1

    def session_config(self, session: SessionSpec, sessions_dir: Path) -> RunConfig:
        """The session's settings: the run's, with its arm's server (a URL, or a command to launch), its results
        folder and run id, and its repeat's seed."""
        arm = session.arm
        server = replace(self.config.server, server_url=None if arm.launch else arm.url, launch=arm.launch, arm=arm.name)
        return replace(self.config, server=server, lossless=self._lossless_reference(arm), results_dir=str(sessions_dir),
                       run_id=session.run_id, seed=self.session_seed(session.repeat))

    def _lossless_reference(self, arm: ArmSpec) -> LosslessSettings:
        """A candidate's lossless reference: the baseline server when it is given by URL (it is up while the candidate
        runs) and no --lossless-reference-url was; otherwise the suite's own choice (specsuite/families/lossless/reference.py)."""
        lossless, baseline = self.config.lossless, self.arms[-1]
        if lossless.reference_url or baseline.url is None or arm.name == baseline.name:
            return lossless
        return replace(lossless, reference_url=baseline.url)


def suites_location() -> Path:
    """The suites' folder (SUITES_DIR); one line when this specsuite has none."""
    if not (SUITES_DIR / "__init__.py").is_file():
        raise SpecsuiteError(f"specsuite run needs the pytest suites; there are none at {SUITES_DIR}: "
                             "install specsuite with `pip install .` (or `pip install -e .` in a checkout)")
    return SUITES_DIR


def config_path(config_dir: Path, run_id: str) -> Path:
    return config_dir / f"{run_id}.config.json"


def session_command(plan: RunPlan, session: SessionSpec, sessions_dir: Path, config_dir: Path) -> list[str]:
    """The session's command line: pytest's own options, and the file of its settings (written by `_start`)."""
    return [
        # The suites use no hypothesis; its plugin alone costs seconds of import in every session.
        sys.executable, "-m", "pytest", "-p", SUITES_PLUGIN, str(suites_location()), "-m", session.markers,
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q",
        # JUnit per session: CI reads it, and the merge reads which tests failed or errored and why (specsuite.orchestration.junit).
        f"--junitxml={junit_path(sessions_dir, session.run_id)}",
        CONFIG_FILE_OPTION, str(config_path(config_dir, session.run_id)), *plan.pytest_options,
    ]


@dataclass
class _Session:
    """One running pytest session and what the merge needs to know about it."""

    spec: SessionSpec
    seed: int
    command: list[str]
    log_path: Path
    session_dir: Path
    process: subprocess.Popen[bytes]
    log: IO[str]
    started: float = field(default_factory=time.perf_counter)
    seen_mtime: float = 0.0
    done_so_far: str = ""  # what its partial results hold, for the progress line
    killed: bool = False  # did not stop within STOP_GRACE_S of an interrupt

    @property
    def label(self) -> str:
        part = f" ({self.spec.markers})" if self.spec.part else ""
        return f"{self.spec.arm.name} repeat {self.spec.repeat}{part}"


def _start(plan: RunPlan, spec: SessionSpec, sessions_dir: Path, config_dir: Path) -> _Session:
    log_path = sessions_dir / f"{spec.run_id}.log"
    write_config_file(plan.session_config(spec, sessions_dir), config_path(config_dir, spec.run_id))
    command = session_command(plan, spec, sessions_dir, config_dir)
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in _finish, after the process exits
    # The child stays in our process group, so a terminal's Ctrl-C reaches it directly
    # (specsuite.server.interrupts then waits for it to save its results and stop its server).
    # Each session is told its arm (a URL or a launch command, in its settings file); an inherited
    # SPECSUITE_SERVER_URL would still be the default of anything in it that reads the variable.
    # Nor a results database: `specsuite run` stores a night through `specsuite history ingest` of its merged
    # results.json; a session storing itself would put each part of an arm in the store as a night of its own.
    env = {key: value for key, value in os.environ.items() if key not in (SERVER_URL_ENV, RESULTS_DB_ENV)}
    env["PYTHONPATH"] = _python_path(os.getenv("PYTHONPATH", ""))  # neither is among the variables left out above
    env["PATH"] = interpreter_path(os.getenv("PATH", ""))
    env.update(dict(spec.arm.env))  # the arm's own variables (`--arm NAME="CUDA_VISIBLE_DEVICES=1 CMD"`), for its server
    # Sessions run in the sessions folder: nothing of the working directory (a checkout or not) decides what they import.
    process = subprocess.Popen(command, cwd=sessions_dir, stdout=log, stderr=subprocess.STDOUT, env=env)
    return _Session(spec, plan.session_seed(spec.repeat), command, log_path, sessions_dir / spec.run_id, process, log)


def interpreter_path(inherited: str) -> str:
    """PATH with this interpreter's folder first: an arm's launch command `python -m ...` (or `specsuite ...`) then runs
    with the session's Python and its packages, from a fresh clone's `.venv/bin/specsuite run` with nothing activated
    (otherwise `python` is whatever the shell finds, often one without aiohttp)."""
    folder = str(Path(sys.executable).parent)
    rest = [p for p in inherited.split(os.pathsep) if p and p != folder]
    return os.pathsep.join([folder, *rest])


def _python_path(inherited: str) -> str:
    """The child imports the same specsuite as this process: the folder holding it goes first unless it is a
    site-packages folder the child sees anyway (an installed wheel)."""
    import site

    location = str(PROJECT_ROOT)
    site_dirs = {str(Path(d).resolve()) for d in [*site.getsitepackages(), site.getusersitepackages()]}
    if location in site_dirs:
        return inherited
    return os.pathsep.join(p for p in (location, inherited) if p)


class _Merger:
    """Folds each session's results.json into the merged results: a repeat is one entry per arm,
    whatever number of parts it ran as (cases and workloads joined, the worst exit code).

    Arms and repeats are built as the typed results model's `Arm` and `Repeat` (specsuite.results.types);
    `merged.arms[name]` is each arm, rebuilt as each session's results land."""

    def __init__(self, merged: Document) -> None:
        self.merged = merged
        self.arms: dict[str, Arm] = {}
        self.parts: dict[tuple[str, int], dict[int, Arm]] = {}

    def merge(self, session: _Session, exit_code: int | None, *, interrupted: bool = False) -> Repeat:
        """Merge the session's entry (partial while exit_code is None); returns that entry."""
        spec = session.spec
        measured = _session_entry(session.session_dir, spec.arm, spec.repeat, session.seed, exit_code, session.log_path)
        entry = measured.repeats[0]
        if interrupted:
            entry.put("interrupted", True)
            if not entry.cases and not entry.workloads.to_dict():  # pytest's last line would say nothing of this
                entry.put("error", "interrupted before it had results" + (f" ({STOP_GRACE_S:.0f} s later it was killed)" if session.killed else ""))
            elif session.killed:
                entry.put("error", f"interrupted; killed {STOP_GRACE_S:.0f} s later with the partial results it had written")
        entry.put("wall_time_s", time.perf_counter() - session.started)
        if exit_code is not None:  # the load the session ended under: what a harness timeout is read against
            entry.put("load_average", round(os.getloadavg()[0], 2))
        entry.put("command", session.command)
        entry.put("markers", spec.markers)
        parts = self.parts.setdefault((spec.arm.name, spec.repeat), {})
        parts[spec.part] = measured
        combined = _combine([parts[index] for index in sorted(parts)])
        arm = self._arm(spec.arm)
        for key in PER_ARM_KEYS:
            value = getattr(combined, key)
            if value and getattr(arm, key) is None:
                arm.put(key, value)
        repeats = [r for r in arm.repeats if r.repeat != spec.repeat] + combined.repeats
        arm.repeats = sorted(repeats, key=lambda r: r.repeat)
        self.merged.arms[spec.arm.name] = arm
        return entry

    def _arm(self, spec: ArmSpec) -> Arm:
        if spec.name not in self.arms:
            given = self.merged.arms.get(spec.name)
            self.arms[spec.name] = given if given is not None else Arm(spec=_arm_description(spec), key_order=("spec", "repeats"))
        return self.arms[spec.name]


def _combine(sessions: list[Arm]) -> Arm:
    """One repeat (with the arm's facts) from its parts' entries; a single entry is returned as it is."""
    if len(sessions) == 1:
        return sessions[0]
    entries = [measured.repeats[0] for measured in sessions]
    first = entries[0]
    workloads = {name: value for e in entries for name, value in e.workloads.to_dict().items()}
    combined = Repeat(repeat=first.repeat, seed=first.seed, session_dir=first.session_dir, log=first.log,
                      exit_code=_worst_exit([e.exit_code for e in entries]), cases=[case for e in entries for case in e.cases],
                      workloads=Workloads.from_dict(workloads), warnings=[line for e in entries for line in e.warnings or []],
                      wall_time_s=max(e.wall_time_s or 0.0 for e in entries),
                      key_order=("repeat", "seed", "session_dir", "log", "exit_code", "cases", "workloads", "warnings", "wall_time_s"))
    statuses = [e.session_status for e in entries]
    combined.put("session_status", next((s for s in ("failed", "interrupted", "running", None) if s in statuses), "complete"))
    if any(e.running for e in entries):
        combined.put("running", True)
    outcomes = combine_junit([e.tests for e in entries])
    if outcomes is not None:
        combined.put("tests", outcomes)
    loads = [e.load_average for e in entries if e.load_average is not None]
    if loads:
        combined.put("load_average", max(loads))
    reasons = list(dict.fromkeys(e.reason for e in entries if e.reason))
    if reasons:
        combined.put("reason", "; ".join(reasons))
    errors = [f"{e.markers}: {e.error}" for e in entries if e.error]
    if errors:
        combined.put("error", "; ".join(errors))
    combined.put("parts", [{k: getattr(e, k) for k in ("markers", "session_dir", "log", "exit_code", "wall_time_s", "command")}
                             for e in entries])
    facts = {key: next((getattr(m, key) for m in sessions if getattr(m, key)), None) for key in PER_ARM_KEYS}
    return Arm(**facts, repeats=[combined])


def _worst_exit(codes: list[int | None]) -> int | None:
    """None while any part runs; else the first code that is neither 0 nor 1 (no results), else the highest."""
    if any(code is None for code in codes):
        return None
    broken = [code for code in codes if code not in (0, 1)]
    return broken[0] if broken else max(code for code in codes if code is not None)


def _refresh(merger: _Merger, running: list[_Session]) -> bool:
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
                entry = merger.merge(session, None)
            except SpecsuiteError:
                continue  # caught mid-rename or torn; the next refresh or the final merge reads it
            session.done_so_far = _done_so_far(entry)
            changed = True
    return changed


def _server_groups(pid: int) -> list[int]:
    """The process groups of the servers a session launched: its children that lead a group of their own
    (specsuite.server.launcher starts each server with start_new_session)."""
    groups = []
    for child in child_pids(parent=pid):
        try:
            if os.getpgid(child) == child:
                groups.append(child)
        except ProcessLookupError:
            continue
    return groups


def _kill_groups(groups: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for group in groups:
            try:
                os.killpg(group, sig)
                alive.append(group)
            except ProcessLookupError:
                continue
        if not alive:
            return
        time.sleep(SERVER_KILL_WAIT_S if sig == signal.SIGTERM else 0)
        groups = alive


def _stop(running: list[_Session], signum: int | None) -> None:
    """On an interrupt: a SIGTERM goes on to the sessions (a terminal's Ctrl-C has already reached them, and a second
    one would cut their cleanup short); each gets STOP_GRACE_S to save its results and stop its server, then it is
    killed and so are the servers it launched."""
    if signum == signal.SIGTERM:
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
            groups = _server_groups(session.process.pid)  # before the session goes: its servers are its children
            session.process.kill()
            session.process.wait()
            _kill_groups(groups)
            session.killed = True
            _mark_killed(session, signum)
        session.log.close()


def _mark_killed(session: _Session, signum: int | None) -> None:
    """A killed session could not say it was interrupted: its results.json says so now (its partial results kept)."""
    path = session.session_dir / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(data, dict):
        return
    session = Document.from_dict(data)
    if session.status == "running":
        how = signal.Signals(signum).name if signum else "an interrupt"
        session.update(status="interrupted", stopped_at=f"killed by specsuite run {STOP_GRACE_S:.0f} s after {how}, "
                                                        "before its own cleanup finished; its results so far are kept")
        write_json_atomic(path, session.to_dict())


class _InterruptWatch:
    """While sessions run: the first SIGINT or SIGTERM says at once what is being stopped, then interrupts the loop;
    a second one interrupts at once, whatever is under way. While a session starts (`deferred`), the first signal
    waits until the session is in the running list: landing between its Popen and the list, it would leave the
    session running, unstopped and unrecorded."""

    def __init__(self, running: list[_Session], on_progress: Callable[[str], None]) -> None:
        self.running = running
        self.on_progress = on_progress
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}
        self._deferring = False
        self._pending = False

    def __enter__(self) -> _InterruptWatch:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread: leave signals alone
            self.previous = {}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A first signal inside the block interrupts when the block ends, not inside it."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt(f"received {signal.Signals(self.signum).name}" if self.signum else "interrupted")

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}")
        self.signum = signum
        names = ", ".join(session.label for session in self.running if session.process.poll() is None) or "nothing"
        self.on_progress(f"interrupted ({signal.Signals(signum).name}): stopping {names} and the servers they launched "
                         f"(at most {STOP_GRACE_S:.0f} s), then writing the partial results and report")
        if self._deferring:
            self._pending = True
            return
        raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


def run_sessions(plan: RunPlan, run_dir: RunDirectory, on_progress: Callable[[str], None], merged: Document) -> Document:
    """Run every round, its sessions side by side, merging each result as it lands."""
    suites_location()  # one line now when the suites are missing, not one per session
    sessions_dir = run_dir.path.resolve() / "sessions"
    sessions_dir.mkdir(exist_ok=True)
    rounds = plan.rounds()
    total = sum(len(round_) for round_ in rounds)
    merger = _Merger(merged)
    # Side by side: some round ran sessions of two arms at once (a reference arm's parts at once are one arm).
    merged.put("side_by_side", any(len({s.arm.name for s in round_}) > 1 for round_ in rounds))
    merged.put("arm_schedule", "side-by-side" if plan.side_by_side else "sequential")
    merged.put("sessions", [{"arm": s.arm.name, "repeat": s.repeat, "seed": plan.session_seed(s.repeat), "markers": s.markers,
                            "run_id": s.run_id} for round_ in rounds for s in round_])
    bar = tqdm(total=total, desc="specsuite sessions", unit="session", disable=not sys.stderr.isatty())
    done = 0
    running: list[_Session] = []
    watch = _InterruptWatch(running, on_progress)
    config_dir = Path(tempfile.mkdtemp(prefix="specsuite-session-settings-"))  # owner-only, like the files in it
    try:
        for round_ in rounds:
            running[:] = []
            with watch:
                try:
                    for spec in round_:  # each one in `running` as soon as it starts, so an interrupt stops it
                        with watch.deferred():
                            running.append(_start(plan, spec, sessions_dir, config_dir))
                    done = _run_round(running, merger, run_dir, merged, on_progress, bar, done, total)
                except KeyboardInterrupt:
                    _stop(running, watch.signum)
                    for session in running:
                        merger.merge(session, session.process.returncode, interrupted=True)
                    merged.put("stopped_at", "during " + (", ".join(session.label for session in running) or "the start of a round"))
                    run_dir.write_results(merged)
                    bar.close()
                    raise
    finally:
        shutil.rmtree(config_dir, ignore_errors=True)
    bar.close()
    return merged


def _run_round(running: list[_Session], merger: _Merger, run_dir: RunDirectory, merged: Document,
               on_progress: Callable[[str], None], bar: Any, done: int, total: int) -> int:
    """Wait for one round's sessions, merging each result as it lands and printing a progress line now and then."""
    names = ", ".join(s.label for s in running)
    on_progress(f"[{done + 1}-{done + len(running)}/{total}] running {names}" + (" side by side" if len(running) > 1 else ""))
    last_refresh = last_note = time.monotonic()
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
            entry = merger.merge(session, exit_code)
            run_dir.write_results(merged)
            done += 1
            bar.update(1)
            on_progress(f"[{done}/{total}] {session.label}: {_outcome(exit_code, entry.reason)} ({entry.wall_time_s:.0f} s)")
        if running and time.monotonic() - last_refresh >= REFRESH_S:
            last_refresh = time.monotonic()
            if _refresh(merger, running):
                run_dir.write_results(merged)
        if running and time.monotonic() - last_note >= PROGRESS_S:
            last_note = time.monotonic()
            on_progress("still running: " + "; ".join(_progress(session) for session in running))
    return done


def _done_so_far(entry: Repeat) -> str:
    parts = [f"{len(entry.cases)} case(s)"] if entry.cases else []
    parts += list(entry.workloads.to_dict())
    return ", ".join(parts)


def _progress(session: _Session) -> str:
    """`nofix repeat 1 (correctness) 45 s: 3 case(s)`: a running session, for the progress line."""
    elapsed = time.perf_counter() - session.started
    return f"{session.label} {elapsed:.0f} s" + (f": {session.done_so_far}" if session.done_so_far else ": starting")


def _outcome(exit_code: int, reason: str | None = None) -> str:
    """What a session's exit means; for a session that tested nothing, its own one-line reason when it gave one
    (pytest exits 4 for a bad option and for a server it cannot reach or use alike)."""
    meanings = {0: "all checks passed", 1: "some checks failed", 4: "stopped before testing", 5: "no tests collected", -1: "timed out"}
    meaning = meanings.get(exit_code, f"pytest exit {exit_code}")
    return f"{meaning}: {reason}" if reason and exit_code not in (0, 1) else meaning


USAGE_ERROR_PREFIX = "ERROR: "  # how pytest prints a UsageError (the plugins' one-line reasons) on stderr
INTERRUPTED = re.compile(r"^!+ Interrupted: (.*?) !+$")  # how pytest prints session.shouldstop (the fault policy's stop)


def session_reason(log_path: Path) -> str | None:
    """The session's own one-line reason for stopping: the last `ERROR: ...` line pytest printed
    (a bad option, a server that is not reachable or not an LLM server), else the reason of pytest's
    `! Interrupted: ... !` line (the fault policy stopped the session), without pytest's and
    specsuite's prefixes; None when the log has neither."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in text.splitlines()]
    errors = [line[len(USAGE_ERROR_PREFIX):] for line in lines if line.startswith(USAGE_ERROR_PREFIX)]
    errors = errors or [match.group(1) for match in map(INTERRUPTED.match, lines) if match]
    if not errors:
        return None
    reason = errors[-1]
    return reason[len("specsuite: "):] if reason.startswith("specsuite: ") else reason


def _arm_description(arm: ArmSpec) -> dict[str, Any]:
    return {"name": arm.name, "url": arm.url, "launch": arm.launch}


def _session_entry(session_dir: Path, arm: ArmSpec, repeat: int, seed: int, exit_code: int | None, log_path: Path) -> Arm:
    """The arm as one session measured it: its facts (identity, vocab, how it was chosen) and the one repeat's entry;
    `exit_code` None while the session still runs (`running: true`)."""
    entry = Repeat(repeat=repeat, seed=seed, exit_code=exit_code, session_dir=str(session_dir), log=str(log_path),
                   key_order=("repeat", "seed", "exit_code", "session_dir", "log", "cases"))
    if exit_code is None:
        entry.put("running", True)
    if exit_code is not None and exit_code not in (0, 1):
        reason = session_reason(log_path)
        if reason:
            entry.put("reason", reason)
    outcomes = read_junit(junit_path(session_dir.parent, session_dir.name))
    if outcomes is not None:
        entry.put("tests", outcomes)
    results_file = session_dir / "results.json"
    if not results_file.is_file():
        if exit_code is not None:
            entry.put("error", entry.reason or _last_line(log_path) or "the session wrote no results")
        return Arm(repeats=[entry])
    session = load_results(results_file)
    measured_arm = session.arms.get(arm.name) or Arm()
    measured = measured_arm.repeats[0] if measured_arm.repeats else Repeat()  # a pytest session is one repeat of its arm
    entry.cases = measured.cases or []  # a session that wrote null here still merges
    entry.put("warnings", list(session.warnings or []))
    entry.put("workloads", measured.workloads or Workloads())
    entry.put("session_status", session.status)
    return Arm(server_under_test=measured_arm.server_under_test, identity=measured_arm.identity, vocab=measured_arm.vocab,
               repeats=[entry])


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""

