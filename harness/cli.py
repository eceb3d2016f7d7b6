"""The `specsuite` command line.

    specsuite run                       # reference server, nofix vs fix, one results folder
    specsuite run --server-url A --baseline-url B --repeats 3
    specsuite serve-reference --arm nofix --port 30000 ...
    specsuite gsm8k --server-url URL --num-questions 200

Every error the harness can name is printed as one line (`specsuite: error: ...`) with exit
code 2; Ctrl-C exits 130 after saving what was measured.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from harness.errors import SpecsuiteError

EXIT_OK = 0
EXIT_CHECKS_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _add_run_parser(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser("run", help="run the suites against one or more arms and write one results folder")
    run.add_argument("--server-url", help="candidate server URL (compared against --baseline-url when given)")
    run.add_argument("--baseline-url", help="baseline server URL")
    run.add_argument("--arm", action="append", default=[], metavar="NAME=LAUNCH_CMD", help="launch an arm per session (repeatable)")
    run.add_argument("--repeats", type=int, default=1, help="interleaved repeats per arm (A B A B ...); launched arms restart each time")
    run.add_argument("--results-dir", default="specsuite-results", help="where the run folder goes (default ./specsuite-results)")
    run.add_argument("--run-id", default=None, help="name of the run folder (default: UTC time plus a suffix)")
    run.add_argument("-m", "--markers", default="correctness", help="pytest marker expression for the suites (default correctness)")
    run.add_argument("--profile", choices=("smoke", "nightly"), default="smoke")
    run.add_argument("--temperatures", default="0,0.6,1.0")
    run.add_argument("--top-p", default="0.95,1.0")
    run.add_argument("--seed", type=int, default=0, help="base seed; repeat k uses seed + k - 1 (recorded)")
    run.add_argument("--tokenizer", default=None)
    run.add_argument("--vocab-size", type=int, default=None)
    run.add_argument("--pytest-arg", action="append", default=[], metavar="ARG", help="extra argument passed to every pytest session")


def _add_serve_parser(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve-reference", help="run the embedded reference server (same flags as python -m fixtures.refserver)", add_help=False)
    serve.add_argument("args", nargs=argparse.REMAINDER)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specsuite", description="Correctness tests and benchmarks for speculative-decoding servers.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(subparsers)
    _add_serve_parser(subparsers)
    return parser


def command_run(args: argparse.Namespace) -> int:
    from harness.ab_run import RunPlan, run_sessions
    from harness.arms import resolve_arms
    from harness.launcher import find_free_port
    from harness.results import RunDirectory
    from harness.secrets import load_api_key
    from reports.summary_table import summary_markdown

    if args.repeats < 1:
        raise SpecsuiteError(f"--repeats must be at least 1, got {args.repeats}")
    arms = resolve_arms(args.server_url, args.baseline_url, args.arm, find_free_port())
    options = ["--profile", args.profile, "--temperatures", args.temperatures, "--top-p", args.top_p, *args.pytest_arg]
    if args.tokenizer:
        options += ["--tokenizer", args.tokenizer]
    if args.vocab_size:
        options += ["--vocab-size", str(args.vocab_size)]
    plan = RunPlan(arms=arms, repeats=args.repeats, seed=args.seed, markers=args.markers, pytest_options=options)
    run_dir = RunDirectory(args.results_dir, run_id=args.run_id, secrets=[load_api_key()])
    merged = {"status": "running", "seed": args.seed, "profile": args.profile, "repeats": args.repeats,
              "command": " ".join(sys.argv), "arm_order": [a.name for a in arms], "baseline_arm": arms[-1].name, "arms": {}}
    print(f"specsuite: results in {run_dir.path}", flush=True)
    try:
        run_sessions(plan, run_dir, lambda line: print(f"specsuite: {line}", flush=True), merged)
    except KeyboardInterrupt:
        run_dir.mark_interrupted("during the pytest sessions")
        print(f"specsuite: interrupted; partial results in {run_dir.results_path}", file=sys.stderr)
        return EXIT_INTERRUPTED
    failed = [f"{name} r{r['repeat']}" for name, arm in merged["arms"].items() for r in arm["repeats"] if r["exit_code"] not in (0, 1)]
    merged["status"] = "failed" if failed else "complete"
    if failed:
        merged["error"] = f"sessions without results: {', '.join(failed)}"
    run_dir.write_results(merged)
    summary = summary_markdown(merged)
    (run_dir.path / "summary.md").write_text(summary, encoding="utf-8")
    print(summary)
    print(f"specsuite: wrote {run_dir.results_path}")
    if failed:
        print(f"specsuite: error: {merged['error']} (see the session logs under {run_dir.path / 'sessions'})", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def command_serve_reference(args: argparse.Namespace) -> int:
    from fixtures.refserver.cli import main as serve_main

    return serve_main(args.args, prog="specsuite serve-reference")


COMMANDS = {"run": command_run, "serve-reference": command_serve_reference}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve-reference"]:  # every flag belongs to the reference server's own parser
        return command_serve_reference(argparse.Namespace(args=argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except SpecsuiteError as exc:
        print(f"specsuite: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("specsuite: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
