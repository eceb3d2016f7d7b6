"""`specsuite run`: the main job, every arm's pytest sessions into one results folder, then the A/B
analysis, `summary.md` and the report, and the exit code (the exit policy below).

Exit policy: 0 done; 1 when a `--fail-on` rule fires, or with `--profile nightly` when a candidate's
verdict on a correctness metric (a `corruption_sign` metric of specsuite/families/correctness/family.py, or
accept length) is "worse" or "suspect" (no `--fail-on` needed), or when any arm's session failed a test or had
requests fail or time out (specsuite/orchestration/failures.py; listed under every profile); 2 when a session tested nothing
(its own one-line reason is printed, and no report is written when no session reached a server);
130 interrupted.  The README's demo run (the embedded reference arms, profile smoke) exits 0 even
though its nofix arm is worse: it demonstrates the detectors, it does not gate anything.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specsuite.cli.exit_codes import EXIT_CHECKS_FAILED, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from specsuite.errors import SpecsuiteError

if TYPE_CHECKING:
    from specsuite.results.types import Document
    from specsuite.session.config import RunConfig

RUN_GIVE_A_SERVER = ("pass --server-url URL (the candidate; or set SPECSUITE_SERVER_URL) and --baseline-url URL, "
                     "or launch each arm with --arm NAME=CMD")


def command_run(args: argparse.Namespace) -> int:
    from specsuite.orchestration.arms import DEFAULT_REFERENCE_ARMS, free_ports, resolve_arms
    from specsuite.server.session import check_server_given
    from specsuite.session.dependencies import preflight
    from specsuite.session.main_job_profiles import MAIN

    started = time.perf_counter()
    if args.repeats < 1:
        raise SpecsuiteError(f"--repeats must be at least 1, got {args.repeats}")
    given = args.server_url or args.baseline_url or (args.arm[0] if args.arm else None)
    why = "--require-server-url" if args.require_server_url else "--profile nightly"
    check_server_given(given, None, args.require_server_url or args.profile == "nightly", why, how=RUN_GIVE_A_SERVER)
    # The default arms run side by side, so each needs its own port.
    arms = resolve_arms(args.server_url, args.baseline_url, args.arm, free_ports(len(DEFAULT_REFERENCE_ARMS)), args.reference_sampler)
    embedded = given is None  # resolve_arms fell back to the reference server's nofix and fix arms
    markers = args.markers or MAIN.markers
    config, extra = sessions_config(args)  # a bad --pytest-arg value fails here, in one line, not in every session
    missing = preflight(gsm8k_path=config.gsm8k.path, uses_gsm8k=selects(markers, "gsm8k"), tokenizer=config.server.tokenizer,
                        results_dir=args.results_dir)
    if missing:  # an optional package or a local path the settings need: one line, before any session (and the imports below)
        raise SpecsuiteError(missing)

    from specsuite.analysis.absolute import judge_absolute
    from specsuite.analysis.absolute import verdict_lines as absolute_verdict_lines
    from specsuite.analysis.fail_on import evaluate_fail_on, parse_fail_on, with_nightly_gate
    from specsuite.analysis.verdicts import compare_arms
    from specsuite.orchestration.failures import run_failures
    from specsuite.orchestration.runner import RunPlan, run_sessions
    from specsuite.reports.render import render_report
    from specsuite.reports.server_under_test import server_under_test_line
    from specsuite.reports.summary import run_verdict_lines, summary_document
    from specsuite.reports.summary_table import summary_markdown
    from specsuite.results.builder import run_document
    from specsuite.results.model import ANALYSIS_KEY, FAIL_ON_KEY
    from specsuite.results.store import RunDirectory, load_results
    from specsuite.server.secrets import load_secrets

    rules_text = with_nightly_gate(args.fail_on, args.profile)
    rules = parse_fail_on(rules_text) if rules_text else None  # a bad rule fails before any server starts
    # The main job's reference arms run as parts, each on a server of its own; a -m of the user's runs whole.
    plan = RunPlan(arms=arms, repeats=args.repeats, seed=args.seed, markers=markers, config=config, pytest_options=extra,
                   parts=MAIN.parts if args.markers is None else (), side_by_side=side_by_side(args.arm_schedule, embedded))
    run_dir = RunDirectory(args.results_dir, run_id=args.run_id, secrets=load_secrets())
    merged = run_document(embedded=embedded, seed=args.seed, profile=args.profile, repeats=args.repeats, markers=markers,
                          pytest_options=args.pytest_arg, command=" ".join(sys.argv), arm_order=[a.name for a in arms])
    print(f"specsuite: results in {run_dir.path}", flush=True)
    try:
        run_sessions(plan, run_dir, lambda line: print(f"specsuite: {line}", flush=True), merged)
    except KeyboardInterrupt:
        return _finish_interrupted(merged, run_dir, args, started, embedded)
    failed = [f"{name} r{r.repeat}" for name, arm in merged.arms.items() for r in arm.repeats if r.exit_code not in (0, 1)]
    mark_reference_emulation(merged, embedded)
    merged.put("warnings", [f"{name} r{r.repeat}: {line}" for name, arm in merged.arms.items() for r in arm.repeats for line in r.warnings])
    merged.put("status", "failed" if failed else "complete")
    if failed:
        merged.put("error", sessions_error(merged))
    if not reached_a_server(merged):
        return _no_server_reached(merged, run_dir, started)
    analysis = compare_arms(merged)
    merged.put(ANALYSIS_KEY, analysis)
    outcome = evaluate_fail_on(rules, analysis) if rules else None
    if outcome is not None:
        merged.put(FAIL_ON_KEY, outcome.to_dict())
    # --profile nightly: the absolute rules judge each candidate on its own, with or without a baseline.
    absolute = judge_absolute(merged) if args.profile == "nightly" else None
    if absolute is not None:
        merged.put("absolute_gate", absolute.to_dict())
    # Failed tests, failed and timed-out requests: listed whatever the profile; --profile nightly exits 1 on them.
    merged.put("failures", [failure.to_dict() for failure in run_failures(merged, config.server.request_timeout_s)])
    merged.put("sessions_wall_time_s", time.perf_counter() - started)
    run_dir.write_results(merged)
    written = load_results(run_dir.results_path)  # as a reader will see it: with created_utc, specsuite_version, run_id
    verdicts = run_verdict_lines(written) + absolute_verdict_lines(absolute)
    policy = exit_policy_line(args, outcome, absolute, embedded, failed_checks=[f.arm for f in written.failures])
    gates = gate_lines(outcome, absolute, given_rules=bool(args.fail_on))
    summary = summary_document(written, policy, gates, absolute_verdict_lines(absolute))
    (run_dir.path / "summary.md").write_text(summary, encoding="utf-8")
    print(summary_markdown(written))
    if not args.no_report:
        render_report(written, run_dir.path / "report")
        print(f"specsuite: report in {run_dir.path / 'report' / 'report.html'}")
    print(f"specsuite: wrote {run_dir.results_path} ({time.perf_counter() - started:.0f} s)")
    print(f"specsuite: {plain(server_under_test_line(written))}")
    for line in verdicts:  # last, where a terminal leaves them in view
        print(f"specsuite: verdict: {plain(line)}")
    if failed:
        print(f"specsuite: error: {merged.error} (see the session logs under {run_dir.path / 'sessions'})", file=sys.stderr)
        return EXIT_ERROR
    for line in gates:
        print(f"specsuite: {line}")
    print(f"specsuite: {policy}")
    gated = (outcome is not None and outcome.failed) or (absolute is not None and absolute.failed) or (
        args.profile == "nightly" and bool(written.failures))
    return EXIT_CHECKS_FAILED if gated else EXIT_OK


def _finish_interrupted(merged: Document, run_dir, args: argparse.Namespace, started: float, embedded: bool) -> int:
    """An interrupted run: results.json says so and where it stopped; the partial summary and report follow when
    any session reached a server (a second Ctrl-C skips them)."""
    from specsuite.analysis.verdicts import compare_arms
    from specsuite.reports.render import render_report
    from specsuite.reports.summary import summary_document
    from specsuite.results.model import ANALYSIS_KEY
    from specsuite.results.store import load_results

    merged.put("status", "interrupted")
    merged.put("stopped_at", merged.stopped_at or "during the pytest sessions")
    merged.put("sessions_wall_time_s", time.perf_counter() - started)
    mark_reference_emulation(merged, embedded)
    run_dir.write_results(merged)
    if not reached_a_server(merged):
        print(f"specsuite: interrupted {merged.stopped_at}, before any session reached its server; no report "
              f"({run_dir.results_path}); exit {EXIT_INTERRUPTED}", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        merged.put(ANALYSIS_KEY, compare_arms(merged))
        run_dir.write_results(merged)
        written = load_results(run_dir.results_path)
        summary = summary_document(written, "exit 130: interrupted; the verdicts cover what finished")
        (run_dir.path / "summary.md").write_text(summary, encoding="utf-8")
        if not args.no_report:
            render_report(written, run_dir.path / "report")
    except KeyboardInterrupt:
        print("specsuite: interrupted again: no partial report", file=sys.stderr)
    except SpecsuiteError as exc:
        print(f"specsuite: no partial report: {exc}", file=sys.stderr)
    print(f"specsuite: interrupted {merged.stopped_at}; partial results in {run_dir.results_path}"
          + ("" if args.no_report else f", partial report in {run_dir.path / 'report' / 'report.html'}")
          + f" ({time.perf_counter() - started:.0f} s); exit {EXIT_INTERRUPTED}", file=sys.stderr)
    return EXIT_INTERRUPTED


def plain(markdown: str) -> str:
    """A Markdown line for the terminal: without the bold marks."""
    return markdown.replace("**", "")


def gate_lines(outcome, absolute, given_rules: bool = True) -> list[str]:
    """What the gates found, one line each: fired `--fail-on` rules, the absolute rules' findings, and one line for
    the rules that need a comparison the results do not hold (naming the absolute rules that judged instead).
    `given_rules`: the user gave --fail-on (its rules are named); else the rules are the nightly gate's own, counted."""
    from specsuite.analysis.absolute import RULES

    lines = [f"fail-on {trigger.rule}: {trigger.reason}" for trigger in (outcome.triggered if outcome else [])]
    lines += [f"absolute gate: {finding.line}" for finding in (absolute.findings if absolute else [])]
    unevaluated = [line.split(": no ")[0] for line in (outcome.unevaluated if outcome else [])]
    if unevaluated:
        judged = (f"the absolute rules judged {', '.join(absolute.arms) or 'no arm'} instead ({', '.join(RULES)})"
                  if absolute is not None else "no absolute rules judged instead (they come with --profile nightly)")
        which = (f"no comparison in these results for {', '.join(unevaluated)}" if given_rules else
                 f"{len(unevaluated)} of the nightly gate's comparison rules had nothing to compare (no baseline arm, or their families did not run)")
        lines.append(f"fail-on: {which}; {judged}")
    return lines


def exit_policy_line(args: argparse.Namespace, outcome, absolute=None, demo: bool = False, failed_checks: Sequence[str] = ()) -> str:
    """Why the run exits as it does: which rules judged it, and what they found.  The demo's wording (its nofix arm
    is meant to be worse) only for the demo: the embedded reference arms with no server option.  `failed_checks`: the
    arm of each failure the run listed (failed tests, failed or timed-out requests), which fail a nightly."""
    reasons = [trigger.rule for trigger in (outcome.triggered if outcome is not None else [])]
    reasons += list(dict.fromkeys(f"absolute {finding.rule} ({finding.arm})" for finding in (absolute.findings if absolute else [])))
    if args.profile == "nightly":
        reasons += [f"failed checks ({arm})" for arm in dict.fromkeys(failed_checks)]
    if reasons:
        return f"exit 1: {', '.join(reasons)} fired" + (
            " (--profile nightly fails an absolute correctness rule, a worse or suspect correctness verdict, a failed test, "
            "or a failed or timed-out request)" if args.profile == "nightly" else "")
    if args.profile == "nightly":
        return ("exit 0: no absolute correctness rule broken, no worse or suspect correctness verdict, no failed test and no "
                "failed or timed-out request (the --profile nightly gate)" + (" and no --fail-on rule fired" if args.fail_on else ""))
    if args.fail_on:
        return "exit 0: no --fail-on rule fired"
    if demo:
        return ("exit 0: verdicts do not set the exit code of a smoke run (the demo's nofix arm is meant to be worse); "
                "--profile nightly or --fail-on RULES make them do so")
    return "exit 0: verdicts do not set the exit code of a smoke run; --profile nightly or --fail-on RULES make them do so"


# The settings `specsuite run` gives each session itself (specsuite/orchestration/runner.py `RunPlan.session_config`);
# --pytest-arg cannot set them, or the merge would not find the session's results.
PER_SESSION_OPTIONS = ("--results-dir", "--run-id", "--arm-name", "--seed", "--server-url", "--launch", "--specsuite-config")


def sessions_config(args: argparse.Namespace) -> tuple[RunConfig, list[str]]:
    """The RunConfig every session starts from (the runner adds each one's server, folder, name and seed), and the
    --pytest-arg arguments the option table does not know, which go to pytest as they are.

    A session gets the main job's settings (each family's: GSM8K's data and temperatures, the lossless sizes), the run's --profile, --temperatures, --top-p,
    --tokenizer and --vocab-size, then the table's options among --pytest-arg (last, so the user's settings win),
    each checked as a session would check it: one line naming the option."""
    from dataclasses import replace

    from specsuite.session.config import RunConfig, with_options
    from specsuite.session.main_job_profiles import MAIN
    from specsuite.session.option_table import check_values, find_option, given_options, options_for

    junit = [token for token in args.pytest_arg if token.split("=", 1)[0] in ("--junitxml", "--junit-xml")]
    if junit:  # pytest keeps one: a session's own file is what the gate and the report read
        raise SpecsuiteError(f"--pytest-arg {junit[0]}: specsuite run writes each session's JUnit XML itself, to "
                             "<results>/<run>/sessions/<arm>-r<k>.junit.xml; collect those")
    try:
        given, extra = given_options(args.pytest_arg, "pytest")
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
    run_options = {"--profile": args.profile, "--temperatures": args.temperatures, "--top-p": args.top_p,
                   "--tokenizer": args.tokenizer, "--vocab-size": args.vocab_size}
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


def _no_server_reached(merged: Document, run_dir, started: float) -> int:
    """Every session stopped before it reached a server: the sessions' own reason, and no report (there is nothing to show)."""
    merged.put("status", "failed")
    merged.put("error", merged.error or "no session reached a server")
    merged.put("sessions_wall_time_s", time.perf_counter() - started)
    run_dir.write_results(merged)
    (run_dir.path / "summary.md").write_text(f"**Run failed before reaching any server**: {merged.error}.\n\nNo report was written.\n",
                                             encoding="utf-8")
    print(f"specsuite: error: no session reached a server; {merged.error} "
          f"(logs under {run_dir.path / 'sessions'}; no report written)", file=sys.stderr)
    return EXIT_ERROR


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
