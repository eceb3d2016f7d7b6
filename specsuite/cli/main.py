"""The `specsuite` command line.

    specsuite run                       # reference server, nofix vs fix, one results folder
    specsuite run --server-url A --baseline-url B --repeats 3
    specsuite serve-reference --arm nofix --port 30000 ...
    specsuite serve-vllm --method eagle --port 8141 [-- more vLLM args]
    specsuite serve-sglang --sglang-version 0.5.23 --method eagle --port 30000 [-- more SGLang args]
    specsuite gsm8k --server-url URL --gsm8k-num-questions 200

Every error the harness can name is printed as one line (`specsuite: error: ...`) with exit
code 2; Ctrl-C and SIGTERM exit 130 after saving what was measured (specsuite/server/interrupts.py: pytest
sessions that `run` started get to finish their own cleanup first).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from specsuite.cli import bench as bench_command
from specsuite.cli import history as history_command
from specsuite.cli.exit_codes import EXIT_CHECKS_FAILED, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK  # noqa: F401 - part of this module's API
from specsuite.cli.run import command_run
from specsuite.cli.serve_sglang import serve_sglang
from specsuite.cli.serve_vllm import serve_vllm
from specsuite.errors import SpecsuiteError
from specsuite.orchestration.gsm8k_job import run_gsm8k_job
from specsuite.results.store import specsuite_version
from specsuite.server import refserver_contract
from specsuite.server.interrupts import interrupt_after_children
from specsuite.server.secrets import load_admin_api_key, load_api_key
from specsuite.server.session import describe_server_under_test
from specsuite.session.config import run_config_from_options
from specsuite.session.option_table import add_arguments, check_values, deprecation_notes, front_end_of


def _add_run_parser(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser("run", help="run the suites against one or more arms and write one results folder")
    add_arguments(run, "run")


def _add_report_parser(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser("report", help="re-render a run's report from its results.json (no server needed)")
    add_arguments(report, "report")


def _add_gsm8k_parser(subparsers: argparse._SubParsersAction) -> None:
    gsm8k = subparsers.add_parser("gsm8k", help="few-shot GSM8K accuracy, invalid rate and accept length")
    add_arguments(gsm8k, "gsm8k")


def _add_serve_parser(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve-reference", help="run the embedded reference server (same flags as python -m specsuite.refserver)", add_help=False)
    add_arguments(serve, "serve-reference")


def _add_serve_vllm_parser(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve-vllm", help="run vLLM with one speculation method and the flags the suites need, until Ctrl-C")
    add_arguments(serve, "serve-vllm")


def _add_serve_sglang_parser(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve-sglang", help="run a real SGLang release on this CPU, on the project's ops, until Ctrl-C")
    add_arguments(serve, "serve-sglang")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specsuite", description="Correctness tests and benchmarks for speculative-decoding servers.")
    parser.add_argument("--version", action="version", version=f"specsuite {specsuite_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(subparsers)
    _add_serve_parser(subparsers)
    _add_serve_vllm_parser(subparsers)
    _add_serve_sglang_parser(subparsers)
    _add_gsm8k_parser(subparsers)
    _add_report_parser(subparsers)
    bench_command.add_parser(subparsers)
    history_command.add_parser(subparsers)
    return parser


def command_gsm8k(args: argparse.Namespace) -> int:
    """`specsuite gsm8k`: the GSM8K job (specsuite/orchestration/gsm8k_job.py, through the driver the suites use too),
    printed as one table row per temperature."""
    """`specsuite gsm8k`: a thin adapter over the RunSession (specsuite/session/), whose GSM8K driver the suites use too."""
    from specsuite.families.gsm8k.records import AcceptLengthSummary

    config = run_config_from_options(lambda name: getattr(args, name, None), front_end="gsm8k", api_key=load_api_key(),
                                     admin_api_key=load_admin_api_key())
    outcome = run_gsm8k_job(config, command=" ".join(sys.argv), progress=sys.stderr.isatty(),
                            echo=lambda line: print(f"specsuite: {line}", file=sys.stderr, flush=True))
    print("| temperature | accuracy (last integer) | 95% CI | invalid | strict #### | flexible | accept length | invalid ids | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, run in outcome.runs.items():
        acc, accept = run.scoring("sglang").accuracy, AcceptLengthSummary.from_dict(run.accept_length).mean
        print(f"| {key} | {acc.value:.3f} ({acc.k}/{acc.n}) | {acc.ci_exact[0]:.3f}-{acc.ci_exact[1]:.3f} | "
              f"{run.scoring('sglang').invalid.value:.3f} | {run.scoring('lmeval_strict').accuracy.value:.3f} | "
              f"{run.scoring('lmeval_flexible').accuracy.value:.3f} | {'-' if accept is None else f'{accept:.3f}'} | "
              f"{run.detector('invalid_id'):.0f} | {run.wall_time_s:.1f} |")
    print(f"specsuite: wrote {outcome.results_path}")
    print(f"specsuite: {describe_server_under_test(outcome.server_under_test)}")
    return EXIT_OK


def command_report(args: argparse.Namespace) -> int:
    from specsuite.cli.report import command_report as render_report_command  # matplotlib loads for a report only

    return render_report_command(args.results, args.out)


def command_serve_reference(args: argparse.Namespace) -> int:
    return refserver_contract.serve(args.args, prog="specsuite serve-reference")


COMMANDS = {"run": command_run, "serve-reference": command_serve_reference, "serve-vllm": serve_vllm,
            "serve-sglang": serve_sglang, "gsm8k": command_gsm8k, "report": command_report,
            "bench": bench_command.run, "history": history_command.run}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve-reference"]:  # every flag belongs to the reference server's own parser
        return command_serve_reference(argparse.Namespace(args=argv[1:]))
    args = build_parser().parse_args(argv)
    args.argv = argv  # what was given, for a default that depends on it (specsuite bench's --num-prompts)
    for note in deprecation_notes(argv, front_end_of(args)):
        print(f"specsuite: {note}", file=sys.stderr)
    restore_signals = interrupt_after_children()
    try:
        check_values(vars(args), front_end_of(args))  # comma lists: one line naming the option, before any server starts
        return COMMANDS[args.command](args)
    except SpecsuiteError as exc:
        print(f"specsuite: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("specsuite: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        restore_signals()


if __name__ == "__main__":
    sys.exit(main())
