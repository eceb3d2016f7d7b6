"""`specsuite bench`: the serving benchmark against a running server, a launched one, or the
embedded reference server.

    specsuite bench --server-url http://node:30000 --dataset-name random --random-input-len 1024 \\
        --random-output-len 512 --random-range-ratio 1.0 --max-concurrency 1 --num-prompts 64
    specsuite bench --reference-arg=--step-time-ms=2.56 --num-prompts 16 --max-concurrency 1
    specsuite bench --backend vllm --server-url http://node:8000 --dataset-name sharegpt --dataset-path prompts.json \
        --sharegpt-output-len 128 --max-concurrency 1 --num-prompts 8 --keep-alive

Flags carry bench_serving's names and defaults (profile "bench_serving", specsuite/config/bench_profiles.py). The
result is appended as one JSONL line to --output-file (default: bench_serving's file name
inside --results-dir) and bench_serving's table is printed. Exit 0 when every request
succeeded, 1 when some failed, 2 on an error; Ctrl-C saves the finished requests first.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from specsuite.cli.exit_codes import EXIT_OK, EXIT_REQUESTS_FAILED
from specsuite.errors import SpecsuiteError
from specsuite.orchestration.serving_benchmark import run_serving_benchmark
from specsuite.server.secrets import load_admin_api_key, load_api_key
from specsuite.server.session import describe_server_under_test
from specsuite.session.bench import BENCH_SERVING as BENCH_SERVING_PROFILE
from specsuite.session.bench import chosen_from_cli
from specsuite.session.config import run_config_from_options
from specsuite.session.option_table import BENCH_SERVING, add_arguments
from specsuite.session.run_session import RunSession


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser("bench", help="serving benchmark with bench_serving's metrics (TTFT, ITL, TPOT, throughput, accept length)")
    add_arguments(bench, "bench", groups={"server": bench.add_argument_group("server")}, except_group=BENCH_SERVING)
    add_bench_arguments(bench)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's own flags (bench_serving's names and defaults; specsuite/session/option_table.py)."""
    group = parser.add_argument_group("benchmark (bench_serving's flags)")
    add_arguments(parser, "bench", groups={BENCH_SERVING: group}, only_group=BENCH_SERVING)


def default_output_file(args: argparse.Namespace) -> Path:
    """bench_serving's automatic name, inside --results-dir."""
    day = datetime.now().strftime("%m%d")
    if args.dataset_name.startswith("random"):
        name = f"{args.backend}_{day}_{args.num_prompts}_{args.random_input_len}_{args.random_output_len}.jsonl"
    else:
        name = f"{args.backend}_{day}_{args.num_prompts}_{args.dataset_name}.jsonl"
    return Path(args.results_dir) / name


def fit_num_prompts(args: argparse.Namespace) -> str | None:
    """`--dataset-name random` cuts its prompts from a text source with one prompt per request; bench_serving's
    default of 1000 requests is more than the bundled source's prompts.  Left at its default, --num-prompts becomes
    the number of usable prompts (one line says so); given explicitly and too large, it is refused in one line
    before any server starts.  Returns the line to print about a fitted default."""
    from specsuite.families.bench.datasets import load_conversations  # aiohttp loads with the benchmark's modules only

    if args.dataset_name != "random" or args.dataset_path == "hf":  # the Hub's ShareGPT has plenty
        return None
    usable = sum(1 for prompt, _ in load_conversations(args.dataset_path) if prompt.strip())
    if usable >= args.num_prompts:
        return None
    given = any(token == "--num-prompts" or token.startswith("--num-prompts=") for token in getattr(args, "argv", None) or [])
    source = args.dataset_path or "the bundled prompts"
    if given or usable == 0:
        raise SpecsuiteError(f"--num-prompts {args.num_prompts}: {source} has {usable} usable prompts; "
                             "ask for fewer or give --dataset-path a ShareGPT file with more")
    note = (f"--num-prompts {usable} ({source} has {usable} usable prompts, fewer than bench_serving's default "
            f"{args.num_prompts}; --dataset-path FILE|hf for more)")
    args.num_prompts = usable
    return note


def run(args: argparse.Namespace) -> int:
    """`specsuite bench`: a thin adapter over the RunSession (specsuite/session/), which starts the server (asking it
    nothing: bench_serving asks nothing of a server but its answers, so a URL is used as given), runs the benchmark,
    and stops a launched server whatever happens; here only the flags, the output file's name and the printing."""
    from specsuite.families.bench.record import format_table  # aiohttp loads with the benchmark's modules only
    from specsuite.families.bench.records import BenchRun

    run_config = run_config_from_options(lambda name: getattr(args, name, None), front_end="bench", api_key=load_api_key(),
                                         admin_api_key=load_admin_api_key())
    note = fit_num_prompts(args)
    chosen = chosen_from_cli(lambda name: getattr(args, name, None))  # a bad --extra-request-body fails before any server starts
    output = Path(args.output_file) if args.output_file else default_output_file(args)
    with RunSession(run_config) as session:
        session.start_endpoint(reference_args=args.reference_arg)
        if note:  # once the server is there (a refused server is the one line a run without one prints)
            print(f"specsuite: {note}", file=sys.stderr)
        record = run_serving_benchmark(session, chosen, BENCH_SERVING_PROFILE, output_file=str(output),
                                       progress=not args.disable_tqdm and sys.stderr.isatty())
    print(format_table(record))
    print(f"specsuite: appended the result to {output}")
    summary = BenchRun.from_dict(record)  # the record appended to the output file, read typed
    print(f"specsuite: {describe_server_under_test(summary.server_under_test or {})}")
    return EXIT_OK if summary.failed == 0 else EXIT_REQUESTS_FAILED
