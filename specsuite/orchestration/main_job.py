"""The main job's steps (`specsuite run`): the arms, the sessions' settings, every arm's pytest sessions into one results
folder, then the A/B analysis, the `--fail-on` rules, the nightly absolute gate and the failures list, written to
results.json. The command line (specsuite/cli/run.py) parses the options, renders the summary and the report from
what `run_main_job` returns, prints and picks the exit code; the renderers are the command line's to call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specsuite.analysis.absolute import AbsoluteOutcome, judge_absolute
from specsuite.analysis.fail_on import FailOnOutcome, evaluate_fail_on, parse_fail_on, with_nightly_gate
from specsuite.analysis.verdicts import compare_arms
from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k.family import FAMILY as GSM8K
from specsuite.orchestration import runner
from specsuite.orchestration.arms import DEFAULT_REFERENCE_ARMS, free_ports, resolve_arms
from specsuite.orchestration.failures import run_failures
from specsuite.results.builder import run_document
from specsuite.results.model import ANALYSIS_KEY, FAIL_ON_KEY
from specsuite.results.store import RunDirectory, load_results
from specsuite.results.types import Document
from specsuite.server.secrets import load_secrets
from specsuite.server.session import check_server_given
from specsuite.session.config import RunConfig, with_options
from specsuite.session.dependencies import preflight
from specsuite.session.main_job_profiles import MAIN
from specsuite.session.option_table import check_values, find_option, given_options, options_for

RUN_GIVE_A_SERVER = ("pass --server-url URL (the candidate; or set SPECSUITE_SERVER_URL) and --baseline-url URL, "
                     "or launch each arm with --arm NAME=CMD")

# The settings `specsuite run` gives each session itself (specsuite/orchestration/runner.py `RunPlan.session_config`);
# --pytest-arg cannot set them, or the merge would not find the session's results.
PER_SESSION_OPTIONS = ("--results-dir", "--run-id", "--arm-name", "--seed", "--server-url", "--launch", "--specsuite-config")


@dataclass(frozen=True)
class MainJobOptions:
    """What `specsuite run` was asked, as its command line parsed it (`from_namespace`)."""

    server_url: str | None
    baseline_url: str | None
    arm: Sequence[str]
    reference_sampler: Any
    repeats: int
    require_server_url: bool
    profile: str
    markers: str | None
    fail_on: str | None
    arm_schedule: str | None
    results_dir: str
    run_id: str | None
    seed: int
    pytest_arg: Sequence[str]
    temperatures: Any
    top_p: Any
    tokenizer: str | None
    vocab_size: Any
    command: str

    @classmethod
    def from_namespace(cls, args: Any, command: str) -> MainJobOptions:
        names = [name for name in cls.__dataclass_fields__ if name not in ("arm", "pytest_arg", "command")]
        return cls(**{name: getattr(args, name) for name in names}, arm=list(args.arm or []), pytest_arg=list(args.pytest_arg),
                   command=command)


@dataclass
class MainJobOutcome:
    """Where the job stands when `run_main_job` returns: the merged document (as written, `written`, once the analysis
    ran), the rules' and the absolute gate's findings, the sessions that did not finish, and the folder's paths."""

    merged: Document
    run_dir: RunDirectory
    started: float
    embedded: bool
    interrupted: bool = False
    reached_a_server: bool = True
    written: Document | None = None
    fail_on: FailOnOutcome | None = None
    absolute: AbsoluteOutcome | None = None
    failed_sessions: list[str] | None = None

    @property
    def summary_path(self) -> Path:
        return self.run_dir.path / "summary.md"

    @property
    def report_dir(self) -> Path:
        return self.run_dir.path / "report"

    @property
    def sessions_dir(self) -> Path:
        return self.run_dir.path / "sessions"

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started


def run_main_job(options: MainJobOptions, echo: Callable[[str], None]) -> MainJobOutcome:
    """Every step from the options to results.json; `echo` shows a line as it comes (the results folder, the sessions'
    progress). A bad setting raises its one line before any session starts."""
    started = time.perf_counter()
    if options.repeats < 1:
        raise SpecsuiteError(f"--repeats must be at least 1, got {options.repeats}")
    given = options.server_url or options.baseline_url or (options.arm[0] if options.arm else None)
    why = "--require-server-url" if options.require_server_url else "--profile nightly"
    check_server_given(given, None, options.require_server_url or options.profile == "nightly", why, how=RUN_GIVE_A_SERVER)
    # The default arms run side by side, so each needs its own port.
    arms = resolve_arms(options.server_url, options.baseline_url, options.arm, free_ports(len(DEFAULT_REFERENCE_ARMS)), options.reference_sampler)
    embedded = given is None  # resolve_arms fell back to the reference server's nofix and fix arms
    markers = options.markers or MAIN.markers
    config, extra = sessions_config(options)  # a bad --pytest-arg value fails here, in one line, not in every session
    missing = preflight(gsm8k_path=config.gsm8k.path, uses_gsm8k=selects(markers, GSM8K.marker[0]), tokenizer=config.server.tokenizer,
                        results_dir=options.results_dir)
    if missing:  # an optional package or a local path the settings need: one line, before any session
        raise SpecsuiteError(missing)
    rules_text = with_nightly_gate(options.fail_on, options.profile)
    rules = parse_fail_on(rules_text) if rules_text else None  # a bad rule fails before any server starts
    # The main job's reference arms run as parts, each on a server of its own; a -m of the user's runs whole.
    plan = runner.RunPlan(arms=arms, repeats=options.repeats, seed=options.seed, markers=markers, config=config, pytest_options=extra,
                   parts=MAIN.parts if options.markers is None else (), side_by_side=side_by_side(options.arm_schedule, embedded))
    run_dir = RunDirectory(options.results_dir, run_id=options.run_id, secrets=load_secrets())
    merged = run_document(embedded=embedded, seed=options.seed, profile=options.profile, repeats=options.repeats, markers=markers,
                          pytest_options=options.pytest_arg, command=options.command, arm_order=[a.name for a in arms])
    outcome = MainJobOutcome(merged, run_dir, started, embedded)
    echo(f"results in {run_dir.path}")
    try:
        runner.run_sessions(plan, run_dir, echo, merged)  # looked up at the call: tests stand in for it
    except KeyboardInterrupt:
        return record_interruption(outcome)
    failed = [f"{name} r{r.repeat}" for name, arm in merged.arms.items() for r in arm.repeats if r.exit_code not in (0, 1)]
    outcome.failed_sessions = failed
    mark_reference_emulation(merged, embedded)
    merged.put("warnings", [f"{name} r{r.repeat}: {line}" for name, arm in merged.arms.items() for r in arm.repeats for line in r.warnings])
    merged.put("status", "failed" if failed else "complete")
    if failed:
        merged.put("error", sessions_error(merged))
    if not reached_a_server(merged):
        return _no_server_reached(outcome)
    analysis = compare_arms(merged)
    merged.put(ANALYSIS_KEY, analysis)
    outcome.fail_on = evaluate_fail_on(rules, analysis) if rules else None
    if outcome.fail_on is not None:
        merged.put(FAIL_ON_KEY, outcome.fail_on.to_dict())
    # --profile nightly: the absolute rules judge each candidate on its own, with or without a baseline.
    outcome.absolute = judge_absolute(merged) if options.profile == "nightly" else None
    if outcome.absolute is not None:
        merged.put("absolute_gate", outcome.absolute.to_dict())
    # Failed tests, failed and timed-out requests: listed whatever the profile; --profile nightly exits 1 on them.
    merged.put("failures", [failure.to_dict() for failure in run_failures(merged, config.server.request_timeout_s)])
    merged.put("sessions_wall_time_s", outcome.elapsed_s())
    run_dir.write_results(merged)
    outcome.written = load_results(run_dir.results_path)  # as a reader will see it: with created_utc, specsuite_version, run_id
    return outcome


def record_interruption(outcome: MainJobOutcome) -> MainJobOutcome:
    """An interrupted run: results.json says so and where it stopped (the partial analysis is `analyse_interrupted`)."""
    outcome.interrupted = True
    merged = _ended_early(outcome, "interrupted", "stopped_at", "during the pytest sessions")
    mark_reference_emulation(merged, outcome.embedded)
    outcome.run_dir.write_results(merged)
    outcome.reached_a_server = reached_a_server(merged)
    return outcome


def analyse_interrupted(outcome: MainJobOutcome) -> Document:
    """The verdicts over what finished, written to results.json; the document as a reader will see it."""
    outcome.merged.put(ANALYSIS_KEY, compare_arms(outcome.merged))
    outcome.run_dir.write_results(outcome.merged)
    outcome.written = load_results(outcome.run_dir.results_path)
    return outcome.written


def _no_server_reached(outcome: MainJobOutcome) -> MainJobOutcome:
    """Every session stopped before it reached a server: the sessions' own reason, and no report (there is nothing to show)."""
    outcome.reached_a_server = False
    merged = _ended_early(outcome, "failed", "error", "no session reached a server")
    outcome.run_dir.write_results(merged)
    outcome.summary_path.write_text(f"**Run failed before reaching any server**: {merged.error}.\n\nNo report was written.\n",
                                    encoding="utf-8")
    return outcome


def _ended_early(outcome: MainJobOutcome, status: str, where: str, default: str) -> Document:
    """A run that ends before its analysis: its status, where or why it ended (a session's own account kept), the wall time."""
    merged = outcome.merged
    merged.put("status", status)
    merged.put(where, getattr(merged, where) or default)
    merged.put("sessions_wall_time_s", outcome.elapsed_s())
    return merged


def sessions_config(options: Any) -> tuple[RunConfig, list[str]]:
    """The RunConfig every session starts from (the runner adds each one's server, folder, name and seed), and the
    --pytest-arg arguments the option table does not know, which go to pytest as they are. `options`: the run's
    options (MainJobOptions, or the parsed command line).

    A session gets the main job's settings (each family's: GSM8K's data and temperatures, the lossless sizes), the run's --profile, --temperatures, --top-p,
    --tokenizer and --vocab-size, then the table's options among --pytest-arg (last, so the user's settings win),
    each checked as a session would check it: one line naming the option."""
    junit = [token for token in options.pytest_arg if token.split("=", 1)[0] in ("--junitxml", "--junit-xml")]
    if junit:  # pytest keeps one: a session's own file is what the gate and the report read
        raise SpecsuiteError(f"--pytest-arg {junit[0]}: specsuite run writes each session's JUnit XML itself, to "
                             "<results>/<run>/sessions/<arm>-r<k>.junit.xml; collect those")
    try:
        given, extra = given_options(options.pytest_arg, "pytest")
    except SpecsuiteError as exc:
        raise SpecsuiteError(f"--pytest-arg: {exc}") from None
    try:
        check_values({option.dest_for("pytest"): given[option.flag] for option in options_for("pytest") if option.flag in given}, "pytest")
    except SpecsuiteError as exc:
        raise SpecsuiteError(f"{exc} (a pytest option given to every session)") from None
    fixed = [flag for flag in PER_SESSION_OPTIONS if flag in given]
    if fixed:
        raise SpecsuiteError(f"--pytest-arg {find_option(fixed[0]).flag_on('pytest')}: specsuite run sets it for each session itself; "
                             "use specsuite run's own options")
    defaults = RunConfig()
    # A session stores nothing in the history itself (the runner leaves SPECSUITE_RESULTS_DB out of its environment).
    config = MAIN.applied_to(replace(defaults, history=replace(defaults.history, results_db=None)))  # --pytest-arg wins below
    run_options = {"--profile": options.profile, "--temperatures": options.temperatures, "--top-p": options.top_p,
                   "--tokenizer": options.tokenizer, "--vocab-size": options.vocab_size}
    config = with_options(config, {flag: value for flag, value in run_options.items() if value})
    return with_options(config, given), extra


def sessions_error(merged: Document) -> str:
    """`sessions that did not finish: nofix r1, fix r1: <the sessions' own reason>`, one reason once (a session stopped
    by the fault policy has partial results; one stopped by a bad option none)."""
    by_reason: dict[str, list[str]] = {}
    for name, arm in merged.arms.items():
        for r in arm.repeats:
            if r.exit_code not in (0, 1):
                reason = r.reason or r.error or f"pytest exit {r.exit_code}"
                by_reason.setdefault(reason, []).append(f"{name} r{r.repeat}")
    return "sessions that did not finish: " + "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())


def mark_reference_emulation(merged: Document, embedded: bool) -> None:
    """The run's `server_under_test.reference_emulation`: the embedded demo, or any arm whose server was the emulation."""
    emulated = embedded or any(arm.server_choice().reference_emulation for arm in merged.arms.values())
    merged.put("server_under_test", {**(merged.server_under_test or {}), "reference_emulation": emulated})


def reached_a_server(merged: Document) -> bool:
    """Whether any session reached its arm's server (it then wrote the arm's identity)."""
    return any(arm.identity for arm in merged.arms.values())


class _Marks(dict):
    """Every marker name is False but the one asked about (a marker expression evaluated for one marker)."""

    def __missing__(self, key: str) -> bool:
        return False


def selects(markers: str, marker: str) -> bool:
    """Whether a `-m` expression (names with and/or/not and parentheses) selects tests carrying only `marker`;
    an expression that is not of that form counts as selecting it (the sessions then decide)."""
    if not re.fullmatch(r"[\w\s()]*", markers):
        return True
    try:  # only names, parentheses and and/or/not reach eval (the pattern above)
        return bool(eval(compile(markers, "-m", "eval"), {"__builtins__": {}}, _Marks({marker: True})))  # noqa: S307
    except (SyntaxError, NameError, TypeError):
        return True


def side_by_side(schedule: str | None, embedded: bool) -> bool:
    """`--arm-schedule`: given, as given; by default one arm at a time (timing verdicts then compare servers, not two
    servers contending for one host), except the embedded demo's CPU emulations, which gate nothing on timing."""
    return schedule == "side-by-side" if schedule else embedded
