"""The generic options of specsuite: the server under test, the session's policy, the history, the kernel suite, and
the `specsuite` verbs that belong to no workload family (run, report, history, serve-*).

Each workload family declares its own options in its package (specsuite/families/<name>/options.py); the table every
front end is built from is these options followed by every registered family's (specsuite/session/option_table.py).
A server option's default is ServerOptions' own (specsuite/server/session.py), so it is declared once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from typing import Any

from specsuite.config.option import (
    BENCH_SERVING,
    COUNT,
    FAIL_ON_RULES,
    PORT,
    PYTEST_RUN,
    SECONDS,
    SEED,
    SERVER_FRONT_ENDS,
    SIGNIFICANCE,
    Alias,
    Option,
    Range,
    json_object,
    server_url,
)
from specsuite.errors import SpecsuiteError
from specsuite.project_paths import RESULTS_DIR
from specsuite.server import kinds, refserver_contract
from specsuite.server.launcher import READY_TIMEOUT_S
from specsuite.server.session import SERVER_URL_ENV, ServerOptions

RESULTS_DB_ENV = "SPECSUITE_RESULTS_DB"
HISTORY_ALL = ("history", "history ingest", "history list")
HISTORY_FILTERS = ("history", "history list")


def results_db_default() -> str | None:
    """`--results-db`'s default on every front end: env SPECSUITE_RESULTS_DB, else none."""
    return os.environ.get(RESULTS_DB_ENV) or None


def _server_default(name: str) -> Any:
    """A ServerOptions field's default: the option that sets the field states no default of its own."""
    return {item.name: item.default for item in dataclasses.fields(ServerOptions)}[name]


def _fault_policy(text: str, option: str) -> None:
    from specsuite.server.faults import RunPolicy  # only when the option is given a value

    try:
        RunPolicy.parse(text)
    except SpecsuiteError as exc:
        raise SpecsuiteError(f"{option}: {str(exc).removeprefix('fault policy: ')}") from None



def _kernel_default(name: str) -> Callable[[], Any]:
    def default() -> Any:
        import importlib

        # numpy (and scipy) load only when a pytest parser is built; DEFAULT_ROWS lives beside the distribution tests
        module = importlib.import_module("specsuite.kernels.distribution" if name == "DEFAULT_ROWS" else "specsuite.kernels.inputs")
        return getattr(module, name)

    return default


GENERIC_OPTIONS: tuple[Option, ...] = (
    # ---- the server under test (specsuite/pytest_plugin/plugin.py) and the baseline
    Option("--server-url", "base URL of a running server under test; `specsuite run` compares it against --baseline-url. "
           "The API key comes from SPECSUITE_API_KEY", SERVER_FRONT_ENDS, env=SERVER_URL_ENV,
           default_text="--launch, else the embedded reference server", pytest_area="plugin", cli_group="server",
           help_for=(("pytest", "base URL of a running server under test. The API key comes from SPECSUITE_API_KEY"),
                     ("run", "base URL of the candidate server, compared against --baseline-url. The API key comes from SPECSUITE_API_KEY"),
                     ("gsm8k", "base URL of the server to measure. The API key comes from SPECSUITE_API_KEY"),
                     ("bench", "base URL of the server to benchmark. The API key comes from SPECSUITE_API_KEY")),
           default_text_for=(("run", "env SPECSUITE_SERVER_URL, else the embedded reference arms (nofix against fix)"),),
           aliases=(Alias("--base-url", ("bench",), deprecated=False),), check=server_url, server_field="server_url"),  # bench_serving's name for it
    Option("--baseline-url", "a baseline server for the A/B: the ab suite runs the same cases on both, the perf suite interleaves "
           "benchmark runs; `specsuite run` makes it the last arm", PYTEST_RUN, pytest_area="plugin",
           help_for=(("pytest", "a baseline server for the A/B: the ab suite runs the same cases on both, the perf suite interleaves "
                                "benchmark runs"),
                     ("run", "base URL of the baseline server: the last arm, the one every other arm is compared against")),
           aliases=(Alias("--bench-baseline-url", ("pytest",)),), check=server_url),
    Option("--launch", "start this server command, wait until ready, log to the results folder, stop it after", ("pytest", "gsm8k", "bench"),
           metavar="CMD", pytest_area="plugin", cli_group="server", server_field="launch"),
    Option("--launch-url", "URL the --launch command serves on", ("pytest", "bench"), metavar="URL",
           default_text="parsed from its --host/--port, else http://127.0.0.1:30000", pytest_area="plugin", cli_group="server", server_field="launch_url"),
    Option("--launch-timeout", "seconds to wait for a launched server", ("pytest",), default=_server_default("ready_timeout_s"), type=float,
           pytest_area="plugin",
           bounds=SECONDS, server_field="ready_timeout_s"),
    Option("--request-timeout", "seconds the harness waits for one answer (or between two stream chunks) before it gives up on "
           "the request; results name such requests 'timed out', apart from requests the server failed", ("pytest", "gsm8k"),
           default=_server_default("request_timeout_s"), type=float, pytest_area="plugin", bounds=SECONDS, server_field="request_timeout_s"),
    Option("--server-kind", "SGLang or vLLM; auto asks the server (/model_info for SGLang, /version and /v1/models for vLLM)",
           ("pytest", "gsm8k"), default=kinds.AUTO, choices=kinds.choices(), pytest_area="plugin", cli_group="server", server_field="server_kind"),
    Option("--arm-name", "label for this server in results and A/B reports", ("pytest", "gsm8k"),
           default_text="the reference arm, or 'candidate'", pytest_area="plugin", server_field="arm"),
    Option("--profile", "token budget per case; nightly also implies --require-server-url", PYTEST_RUN, default="smoke",
           choices=("smoke", "nightly"), pytest_area="plugin", pytest_flag="--specsuite-profile",
           pytest_flag_why="pytest-profiling declares --profile (its cProfile switch)",
           help_for=(("run", "token budget per case; nightly also implies --require-server-url and exits 1 when a candidate is "
                             "worse or suspect on a correctness metric (no --fail-on needed)"),)),
    Option("--results-dir", "where run folders go (`specsuite bench`: its JSONL and server logs)", SERVER_FRONT_ENDS,
           default=RESULTS_DIR, pytest_area="plugin", cli_group="server",
           help_for=(("pytest", "where run folders go"), ("run", "where run folders go"), ("gsm8k", "where run folders go"),
                     ("bench", "where the JSONL results and server logs go"))),
    Option("--run-id", "name of this run's results folder", PYTEST_RUN, default_text="UTC time plus a suffix", pytest_area="plugin"),
    Option("--tokenizer", "local tokenizer folder", SERVER_FRONT_ENDS, default_text="the server's tokenizer_path, if it exists here",
           pytest_area="plugin", cli_group=BENCH_SERVING, server_field="tokenizer", bench_field="tokenizer"),
    Option("--vocab-size", "the model's vocab_size (embedding rows); overrides config.json", ("pytest", "run", "gsm8k"), type=int,
           pytest_area="plugin", bounds=COUNT, server_field="vocab_size"),
    Option("--prompts", "JSONL prompt set", ("pytest",), default_text="specsuite/fixtures/data/correctness_prompts.jsonl", pytest_area="plugin"),
    Option("--seed", "base seed for per-request sampling seeds (recorded); `specsuite run`'s repeat k uses seed + k - 1",
           ("pytest", "run", "gsm8k"), default=0, type=int, pytest_area="plugin", pytest_flag="--specsuite-seed",
           pytest_flag_why="a generic name that test projects' own conftest.py files often declare",
           help_for=(("pytest", "base seed for per-request sampling seeds (recorded)"),
                     ("gsm8k", "base seed for per-request sampling seeds and the shots (recorded)"),
                     ("run", "base seed for per-request sampling seeds (recorded); repeat k uses seed + k - 1")), bounds=SEED,
           bench_field="seed"),
    Option("--alpha", "significance level of the suites' statistical checks (lossless: the run's budget, split over its tests)", ("pytest",),
           default=0.001, type=float, pytest_area="plugin", bounds=SIGNIFICANCE),
    # ---- session policy (specsuite/pytest_plugin/core.py)
    Option("--fault-policy", "when request failures stop the run, e.g. consecutive=3,retries=3,retry_cap=10,backoff=1 "
           "(the defaults; see specsuite/server/faults.py)", ("pytest",), default="", metavar="SPEC", pytest_area="pytest_plugin", check=_fault_policy),
    Option("--require-server-url", "refuse to fall back to the embedded reference server when no server is given "
           "(--server-url or SPECSUITE_SERVER_URL, --launch; `specsuite run`: also --baseline-url, --arm); pytest exits 4, specsuite 2; "
           "--profile nightly implies it", SERVER_FRONT_ENDS, action="store_true", pytest_area="pytest_plugin", cli_group="server",
           help_for=(("pytest", "refuse to fall back to the embedded reference server when no server is given (--server-url or "
                                "SPECSUITE_SERVER_URL, --launch): exit 4; --specsuite-profile nightly implies it"),
                     ("run", "refuse to fall back to the embedded reference arms when no server is given (--server-url, "
                             "--baseline-url, --arm): exit 2; --profile nightly implies it"),
                     ("gsm8k", "refuse to fall back to the embedded reference server when no server is given (--server-url or "
                               "SPECSUITE_SERVER_URL, --launch): exit 2"),
                     ("bench", "refuse to fall back to the embedded reference server when no server is given (--server-url or "
                               "SPECSUITE_SERVER_URL, --launch): exit 2")), server_field="require_server_url"),
    Option("--specsuite-config", "every setting of the session from this JSON file (a whole RunConfig, as "
           "specsuite/session/config_file.py writes it); no other specsuite option may be given with it", ("pytest",), metavar="PATH",
           pytest_area="pytest_plugin"),
    # ---- the history database (specsuite/pytest_plugin/history.py and `specsuite history`)
    Option("--results-db", "history database: a file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB. Not given: a pytest "
           "session stores nothing, `specsuite history` reads specsuite-results/history.sqlite", ("pytest", *HISTORY_ALL),
           default_factory=results_db_default, env=RESULTS_DB_ENV, metavar="URL", pytest_area="history",
           help_for=(("pytest", "history database: a file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB; not given, "
                                "the session stores nothing"),
                     *((verb, "history database: a file path, sqlite:///FILE or postgresql://USER@HOST:PORT/DB (default "
                              "specsuite-results/history.sqlite)") for verb in HISTORY_ALL))),
    Option("--compare-to", "the nightly regression test's baseline, from the history: the newest passed run of tonight's "
           "configuration and arm, or that run id (needs --results-db)", ("pytest",), metavar="last-good|RUN_ID", pytest_area="history"),
    Option("--build-hash", "the server build under test, stored with the run", ("pytest", "history ingest"), env="SPECSUITE_BUILD_HASH",
           pytest_area="history"),
    Option("--accelerator", "the accelerator, e.g. MI355X, stored with the run; part of the configuration fingerprint, so runs on "
           "different accelerators are never compared", ("pytest", "history ingest"), env="SPECSUITE_ACCELERATOR",
           cli_dest="ingest_accelerator", pytest_area="history"),
    # ---- the kernel suite (specsuite/pytest_plugin/kernel.py)
    Option("--kernel", "the sampler under test: installed, sglang==VERSION, a path to reject_sampling.py (each may end in :block), "
           "refserver[:nofix], vllm==VERSION or vllm-installed (each may end in :expand-fix)",
           ("pytest",), metavar="SOURCE", default_text="installed when SGLang is importable, else the suite skips", pytest_area="kernel",
           pytest_group="specsuite kernel"),
    Option("--kernel-vocab", "the kernel's vocab width (embedding rows)", ("pytest",), default_factory=_kernel_default("DEFAULT_VOCAB"),
           type=int, pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--tokenizer-vocab", "the tokenizer's length; ids from it to --kernel-vocab are padded rows", ("pytest",), type=int,
           default_text="--kernel-vocab", pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--kernel-batch", "rows per kernel call", ("pytest",), default_factory=_kernel_default("DEFAULT_BATCH"), type=int,
           pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--kernel-steps", "draft steps per row", ("pytest",), default_factory=_kernel_default("DEFAULT_STEPS"), type=int,
           pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    Option("--kernel-seed", "seed of every kernel input", ("pytest",), type=int, default_text="--specsuite-seed", pytest_area="kernel",
           pytest_group="specsuite kernel", bounds=SEED),
    Option("--kernel-dist-rows", "rows per distribution scenario (the stated power is for this many)", ("pytest",),
           default_factory=_kernel_default("DEFAULT_ROWS"), type=int, pytest_area="kernel", pytest_group="specsuite kernel", range_checked_by_plugin=True),
    # ---- `specsuite run`
    Option("--arm", "launch an arm per session (repeatable)", ("run",), action="append", default_factory=list, metavar="NAME=LAUNCH_CMD"),
    Option("--reference-sampler", "with the default reference arms, each one's --sampler, e.g. nofix=sglang==0.5.20,fix=sglang==0.5.23",
           ("run",), metavar="ARM=SAMPLER[,ARM=SAMPLER]"),
    Option("--repeats", "interleaved repeats per arm (A B A B ...); launched arms restart each time", ("run",), default=1, type=int, bounds=COUNT),
    Option("--arm-schedule", "sequential: one arm's session at a time, A B A B (each server has the host to itself, so timing "
           "verdicts compare servers); side-by-side: every arm of a repeat at once (half the wall time; the arms share the "
           "host's CPUs, memory bandwidth and, for launched servers, its GPUs unless each arm's CUDA_VISIBLE_DEVICES differs)",
           ("run",), choices=("sequential", "side-by-side"),
           default_text="sequential; side-by-side for the embedded demo arms (CPU emulations; their timing gates nothing)"),
    Option("--markers", "pytest marker expression that narrows the run "
           "(default: the main job, correctness or gsm8k or perf or (lossless and not greedy_equality))", ("run",),
           default=None, short="-m"),
    Option("--pytest-arg", "extra argument passed to every pytest session (repeatable)", ("run",), action="append", default_factory=list,
           metavar="ARG"),
    Option("--fail-on", "exit 1 when a rule fires, e.g. invalid_ids:any,stray_per_1200:worse,itl_median:+1%,gsm8k_accuracy:-2pt "
           "(--profile nightly adds its own gate: worse or suspect on a correctness metric)", ("run",),
           metavar="RULES", check=FAIL_ON_RULES),
    Option("--no-report", "skip rendering report.md/report.html/PNGs", ("run",), action="store_true"),
    # ---- the embedded reference server, when no server is given (`specsuite gsm8k`, `specsuite bench`)
    Option("--reference-arm", "arm of the embedded reference server when no server is given", ("gsm8k", "bench"),
           default=_server_default("reference_arm"), choices=(*reversed(refserver_contract.ARMS), *refserver_contract.ABLATION_ARMS),
           cli_group="server", server_field="reference_arm"),
    Option("--reference-arg", "extra flag for the embedded reference server, e.g. --reference-arg=--step-time-ms=2.56 (repeatable)",
           ("bench",), action="append", default_factory=list, metavar="ARG", cli_group="server"),
    # ---- `specsuite report`
    Option("results", "a results.json, or the run folder holding it", ("report",), action="positional", metavar="RESULTS.json"),
    Option("--out", "folder for report.md, report.html, results.csv and PNGs", ("report",), required=True, metavar="DIR"),
    # ---- `specsuite history` (render) and its verbs
    Option("--out", "folder for trends.json, regressions.json/.md and trend PNGs", ("history",), metavar="DIR"),
    Option("--alpha", "significance level of each step test (the suites' --alpha is 0.001)", ("history",), default=0.01, type=float, bounds=SIGNIFICANCE),
    Option("--min-size", "nights needed on each side of a step", ("history",), default=2, type=int, bounds=COUNT),
    Option("--metric", "only this metric (repeatable)", ("history",), action="append"),
    Option("--arm", "only runs of this arm", HISTORY_FILTERS),
    Option("--accelerator", "only runs on this accelerator", HISTORY_FILTERS),
    Option("--config-key", "only runs of this configuration fingerprint", HISTORY_FILTERS),
    Option("--latest", "only the newest N nights of each series", HISTORY_FILTERS, type=int, metavar="N", bounds=COUNT),
    Option("results", "results.json files or the run folders holding them", ("history ingest",), action="positional", nargs="+",
           metavar="RESULTS.json"),
    Option("--arm", "only this arm of each file (repeatable)", ("history ingest",), action="append", dest="ingest_arm"),
    Option("--outcome", "whether the run's checks passed; only passed runs can be last-good", ("history ingest",),
           choices=("passed", "failed", "unknown"), default_text="from the file's recorded session exit codes, else unknown"),
    Option("--date", "the run's date, YYYY-MM-DD[THH:MM:SSZ]", ("history ingest",), default_text="the file's created_utc"),
    Option("--node", "the machine that ran the suites", ("history ingest",), default_text="this one"),
    # ---- `specsuite serve-reference`: every flag is the reference server's own (python -m specsuite.refserver --help)
    Option("args", "the reference server's flags (python -m specsuite.refserver --help)", ("serve-reference",), action="positional",
           nargs=argparse.REMAINDER, metavar="ARGS"),
    # ---- `specsuite serve-vllm`: vLLM with one speculation method (specsuite/server/kinds/vllm/launch.py)
    Option("--method", "vLLM's speculation method, or none", ("serve-vllm",), default="eagle", choices=("eagle", "draft_model", "ngram", "none")),
    Option("--port", "port to serve on", ("serve-vllm",), default=8141, type=int, bounds=PORT),
    Option("--host", "address to serve on", ("serve-vllm",), default="127.0.0.1"),
    Option("--model", "the target model folder", ("serve-vllm",), default_text="the project's tiny Llama, specsuite/fixtures/vllm_models/target"),
    Option("--spec-model", "the draft or EAGLE head folder", ("serve-vllm",), default_text="specsuite/fixtures/vllm_models/draft or eagle, by --method"),
    Option("--spec-config", "JSON object merged over the method's --speculative-config, e.g. '{\"num_speculative_tokens\": 5}'", ("serve-vllm",),
           metavar="JSON", parse=json_object),
    Option("--vllm-python", "the Python that has vLLM", ("serve-vllm",), default_text="env SPECSUITE_VLLM_PYTHON, else this Python"),
    Option("--ready-timeout", "seconds to wait for vLLM's /health", ("serve-vllm",), default=READY_TIMEOUT_S, type=float, bounds=SECONDS),
    Option("--patch", "the project's patch on vLLM's PYTHONPATH (specsuite/fixtures/vllm_patches): expand_fix corrects the CPU expand bug "
           "(docs/findings/vllm-spec-padded-ids.md); planted_bias adds acceptance min(1, c*p/q) on top, for power tests. "
           "The server must log the patch's activation line or serve-vllm exits 1", ("serve-vllm",), default="none",
           choices=("none", "expand_fix", "planted_bias")),
    Option("--planted-bias-c", "c of --patch planted_bias (1 is the correct sampler)", ("serve-vllm",), type=float,
           bounds=Range("a bias factor c of min(1, c*p/q) (1 is the correct sampler)", low=0.0, low_open=True)),
    Option("vllm_args", "more vLLM arguments, after --", ("serve-vllm",), action="positional", nargs=argparse.REMAINDER, metavar="-- VLLM_ARGS"),
    # ---- `specsuite serve-sglang`: a real SGLang release on this CPU, on the project's ops (specsuite/server/kinds/sglang/launch.py)
    Option("--sglang-version", "the SGLang release to serve", ("serve-sglang",), default="0.5.23", choices=("0.5.20", "0.5.23")),
    Option("--method", "SGLang's speculation: EAGLE with the project's head, or none", ("serve-sglang",), default="eagle",
           choices=("eagle", "none"), dest="sglang_method"),
    Option("--port", "port to serve on", ("serve-sglang",), default=30000, type=int, dest="sglang_port", metavar="PORT", bounds=PORT),
    Option("--host", "address to serve on", ("serve-sglang",), default="127.0.0.1", dest="sglang_host", metavar="HOST"),
    Option("--sglang-dir", "the folder holding the installed releases (install_sglang.sh DIR VERSION)", ("serve-sglang",),
           default_text="env SPECSUITE_SGLANG_DIR, else .sglang in the checkout"),
    Option("--install", "install the release first if it is not installed", ("serve-sglang",), action="store_true"),
    Option("--ready-timeout", "seconds to wait for SGLang's /health", ("serve-sglang",), default=READY_TIMEOUT_S, type=float,
           dest="sglang_ready_timeout", metavar="SECONDS", bounds=SECONDS),
    Option("sglang_args", "more SGLang arguments, after --", ("serve-sglang",), action="positional", nargs=argparse.REMAINDER,
           metavar="-- SGLANG_ARGS"),
)
