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
import sys
from collections.abc import Sequence
from pathlib import Path

from specsuite.analysis.absolute import rules as absolute_rules
from specsuite.analysis.absolute import verdict_lines as absolute_verdict_lines
from specsuite.cli.exit_codes import EXIT_CHECKS_FAILED, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from specsuite.errors import SpecsuiteError
from specsuite.orchestration.main_job import (  # noqa: F401 - RUN_GIVE_A_SERVER, selects and sessions_config: part of this module's API
    RUN_GIVE_A_SERVER,
    MainJobOptions,
    MainJobOutcome,
    analyse_interrupted,
    run_main_job,
    selects,
    sessions_config,
)
from specsuite.reports.server_under_test import server_under_test_line
from specsuite.reports.summary import run_verdict_lines, summary_document
from specsuite.reports.summary_table import summary_markdown
from specsuite.results.types import Document


def _render_report(document: Document, out_dir: Path) -> None:
    """The report's files; matplotlib loads when a report is drawn, not with the command line."""
    from specsuite.reports.render import render_report

    render_report(document, out_dir)

def command_run(args: argparse.Namespace) -> int:
    """The main job (specsuite/orchestration/main_job.py), then its summary and report, the printed lines and the exit code."""
    outcome = run_main_job(MainJobOptions.from_namespace(args, " ".join(sys.argv)), lambda line: print(f"specsuite: {line}", flush=True))
    if outcome.interrupted:
        return _finish_interrupted(outcome, no_report=args.no_report)
    merged, run_dir = outcome.merged, outcome.run_dir
    if not outcome.reached_a_server:
        print(f"specsuite: error: no session reached a server; {merged.error} "
              f"(logs under {outcome.sessions_dir}; no report written)", file=sys.stderr)
        return EXIT_ERROR
    written, rules, absolute = outcome.written, outcome.fail_on, outcome.absolute
    verdicts = run_verdict_lines(written) + absolute_verdict_lines(absolute)
    policy = exit_policy_line(args, rules, absolute, outcome.embedded, failed_checks=[f.arm for f in written.failures])
    gates = gate_lines(rules, absolute, given_rules=bool(args.fail_on))
    summary = summary_document(written, policy, gates, absolute_verdict_lines(absolute))
    outcome.summary_path.write_text(summary, encoding="utf-8")
    print(summary_markdown(written))
    if not args.no_report:
        _render_report(written, outcome.report_dir)
        print(f"specsuite: report in {outcome.report_dir / 'report.html'}")
    print(f"specsuite: wrote {run_dir.results_path} ({outcome.elapsed_s():.0f} s)")
    print(f"specsuite: {plain(server_under_test_line(written))}")
    for line in verdicts:  # last, where a terminal leaves them in view
        print(f"specsuite: verdict: {plain(line)}")
    if outcome.failed_sessions:
        print(f"specsuite: error: {merged.error} (see the session logs under {outcome.sessions_dir})", file=sys.stderr)
        return EXIT_ERROR
    for line in gates:
        print(f"specsuite: {line}")
    print(f"specsuite: {policy}")
    gated = (rules is not None and rules.failed) or (absolute is not None and absolute.failed) or (
        args.profile == "nightly" and bool(written.failures))
    return EXIT_CHECKS_FAILED if gated else EXIT_OK


def _finish_interrupted(outcome: MainJobOutcome, *, no_report: bool) -> int:
    """An interrupted run (results.json already says so and where it stopped): the partial summary and report follow
    when any session reached a server (a second Ctrl-C skips them)."""
    merged, run_dir = outcome.merged, outcome.run_dir
    if not outcome.reached_a_server:
        print(f"specsuite: interrupted {merged.stopped_at}, before any session reached its server; no report "
              f"({run_dir.results_path}); exit {EXIT_INTERRUPTED}", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        written = analyse_interrupted(outcome)
        summary = summary_document(written, "exit 130: interrupted; the verdicts cover what finished")
        outcome.summary_path.write_text(summary, encoding="utf-8")
        if not no_report:
            _render_report(written, outcome.report_dir)
    except KeyboardInterrupt:
        print("specsuite: interrupted again: no partial report", file=sys.stderr)
    except SpecsuiteError as exc:
        print(f"specsuite: no partial report: {exc}", file=sys.stderr)
    print(f"specsuite: interrupted {merged.stopped_at}; partial results in {run_dir.results_path}"
          + ("" if no_report else f", partial report in {outcome.report_dir / 'report.html'}")
          + f" ({outcome.elapsed_s():.0f} s); exit {EXIT_INTERRUPTED}", file=sys.stderr)
    return EXIT_INTERRUPTED


def plain(markdown: str) -> str:
    """A Markdown line for the terminal: without the bold marks."""
    return markdown.replace("**", "")


def gate_lines(outcome, absolute, given_rules: bool = True) -> list[str]:
    """What the gates found, one line each: fired `--fail-on` rules, the absolute rules' findings, and one line for
    the rules that need a comparison the results do not hold (naming the absolute rules that judged instead).
    `given_rules`: the user gave --fail-on (its rules are named); else the rules are the nightly gate's own, counted."""
    lines = [f"fail-on {trigger.rule}: {trigger.reason}" for trigger in (outcome.triggered if outcome else [])]
    lines += [f"absolute gate: {finding.line}" for finding in (absolute.findings if absolute else [])]
    unevaluated = [line.split(": no ")[0] for line in (outcome.unevaluated if outcome else [])]
    if unevaluated:
        judged = (f"the absolute rules judged {', '.join(absolute.arms) or 'no arm'} instead ({', '.join(absolute_rules())})"
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
