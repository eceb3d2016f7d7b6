"""The serving benchmark's options and settings: the in-suite benchmark's --bench-* options (pytest), `specsuite bench`'s
bench_serving flags, and the suites' A/B settings (repeats, TOST margin, fail-on rules). Both front ends take their
sizes from one table of named profiles (specsuite/config/bench_profiles.py) and name the BenchConfig field each option
chooses (`Option.bench_field`), read by one builder (specsuite/session/bench.py). Listed by its FAMILY entry; the table
and RunConfig read them from there (specsuite/session/option_table.py, specsuite/session/config.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specsuite.config.bench_profiles import BENCH_SERVING as BENCH_SERVING_PROFILE
from specsuite.config.bench_profiles import SUITE
from specsuite.config.option import (
    BENCH_SERVING,
    COUNT,
    FAIL_ON_RULES,
    MARGIN,
    NON_NEGATIVE_COUNT,
    PROBABILITY,
    RATE,
    SEED,
    TEMPERATURE,
    TOP_P,
    Alias,
    Option,
    json_object,
    setting_from,
)
from specsuite.server import kinds


def _bench_backend_defaults() -> str:
    """--bench-backend's default, said per server kind: "vllm on a vLLM server, else sglang"."""
    others = [f"{kind.default_bench_backend} on a {kind.display_name} server" for kind in kinds.all_kinds()[1:]]
    return ", ".join([*others, f"else {kinds.fallback().default_bench_backend}"])


OPTIONS: tuple[Option, ...] = (
    # the in-suite serving benchmark (specsuite/pytest_plugin/bench.py); `specsuite bench` has bench_serving's flags instead.
    # Both take their sizes from one table of named profiles (specsuite/config/bench_profiles.py: "suite", "bench_serving"),
    # and each option names the BenchConfig field it chooses (`bench_field`), read one way (specsuite/session/bench.py).
    Option("--bench-backend", "benchmark backend (vllm: streamed /v1/completions as `vllm bench serve` sends it)", ("pytest",),
           default_text=_bench_backend_defaults(), choices=kinds.bench_backend_names(),
           pytest_area="bench", bench_field="backend"),
    Option("--bench-dataset", "benchmark dataset", ("pytest",), default="random", choices=("random", "random-ids", "sharegpt"),
           pytest_area="bench", bench_field="dataset_name"),
    Option("--bench-dataset-path", "ShareGPT JSON/JSONL file or 'hf'", ("pytest",), default_text="the bundled prompts",
           pytest_area="bench", bench_field="dataset_path"),
    Option("--bench-num-prompts", "measured requests per benchmark run", ("pytest",), default=SUITE.num_prompts,
           type=int, pytest_area="bench", bounds=COUNT, bench_field="num_prompts"),
    Option("--bench-input-len", "random prompt length in tokens", ("pytest",), default=SUITE.random_input_len,
           type=int, pytest_area="bench", bounds=COUNT, bench_field="random_input_len"),
    Option("--bench-output-len", "output tokens per request", ("pytest",), default=SUITE.random_output_len,
           type=int, pytest_area="bench", bounds=COUNT, bench_field="random_output_len"),
    Option("--bench-range-ratio", "bench_serving range ratio (1.0 = fixed lengths; 0 means [1, L])", ("pytest",), default=SUITE.random_range_ratio,
           type=float, pytest_area="bench", bounds=PROBABILITY, bench_field="random_range_ratio"),
    Option("--bench-max-concurrency", "concurrent requests", ("pytest",), default=SUITE.max_concurrency,
           type=int, pytest_area="bench", bounds=COUNT, bench_field="max_concurrency"),
    Option("--bench-request-rate", "Poisson arrivals per second", ("pytest",), default=math.inf,
           type=float, pytest_area="bench", bounds=RATE, bench_field="request_rate"),
    Option("--bench-warmup", "warmup requests", ("pytest",), default=1,
           type=int, pytest_area="bench", bounds=NON_NEGATIVE_COUNT, bench_field="warmup_requests"),
    Option("--bench-no-flush", "do not flush the server after warmup (accept length then includes earlier traffic)", ("pytest",),
           action="store_true", pytest_area="bench", bench_field="flush_cache", bench_when_set=False),
    Option("--bench-text-prompts", "send decoded text instead of token ids (bench_serving's default)", ("pytest",), action="store_true",
           pytest_area="bench", bench_field="tokenize_prompt", bench_when_set=False),
    Option("--bench-repeats", "interleaved runs per arm when a baseline is given", ("pytest",), default=3,
           type=int, pytest_area="bench", bounds=COUNT),
    Option("--bench-margin", "equivalence margin for TOST, relative (0.01 = ±1%)", ("pytest",), default=0.01,
           type=float, pytest_area="bench", bounds=MARGIN),
    Option("--bench-fail-on", "fail-on rules for the bench metrics (itl_median, output_throughput)", ("pytest",), default="itl_median:+1%",
           metavar="RULES", pytest_area="bench", check=FAIL_ON_RULES),
    # `specsuite bench`: bench_serving's flags, names and defaults (the in-suite benchmark has its own --bench-* options)
    Option("--output-file", "JSONL file to append to", ("bench",), default_text="bench_serving's name in --results-dir", cli_group="server"),
    Option("--backend", "benchmark backend (bench_serving's flag; vllm: streamed /v1/completions with usage and token ids, as "
           "`vllm bench serve` sends it)", ("bench",), default=kinds.fallback().default_bench_backend, choices=kinds.bench_backend_names(),
           cli_group=BENCH_SERVING, bench_field="backend"),
    Option("--model", "model name for the OpenAI backends", ("bench",), default_text="the first of /v1/models", cli_group=BENCH_SERVING, bench_field="model"),
    Option("--dataset-name", "benchmark dataset (bench_serving's flag)", ("bench",), default="random", choices=("random", "random-ids", "sharegpt"),
           cli_group=BENCH_SERVING, bench_field="dataset_name"),
    Option("--dataset-path", "ShareGPT JSON/JSONL file, or 'hf'", ("bench",), default_text="the bundled prompts", cli_group=BENCH_SERVING,
           bench_field="dataset_path"),
    Option("--num-prompts", "measured requests (bench_serving's flag)", ("bench",), default=BENCH_SERVING_PROFILE.num_prompts, type=int,
           cli_group=BENCH_SERVING, bounds=COUNT, bench_field="num_prompts"),
    Option("--random-input-len", "random prompt length in tokens (bench_serving's flag)", ("bench",), default=BENCH_SERVING_PROFILE.random_input_len,
           type=int,
           cli_group=BENCH_SERVING, bounds=COUNT, bench_field="random_input_len"),
    Option("--random-output-len", "output tokens per request (bench_serving's flag)", ("bench",), default=BENCH_SERVING_PROFILE.random_output_len,
           type=int, cli_group=BENCH_SERVING, bounds=COUNT, bench_field="random_output_len"),
    Option("--random-range-ratio", "lengths uniform on [max(L*r,1), L]; 1.0 = fixed length. The default 0.0 means [1, L], NOT fixed",
           ("bench",), default=BENCH_SERVING_PROFILE.random_range_ratio, type=float, cli_group=BENCH_SERVING, bounds=PROBABILITY,
           bench_field="random_range_ratio"),
    Option("--tokenize-prompt", "send token ids (exact prompt lengths) instead of decoded text", ("bench",), action="store_true",
           cli_group=BENCH_SERVING, bench_field="tokenize_prompt"),
    Option("--sharegpt-output-len", "override the ShareGPT output length (bench_serving's flag)", ("bench",), type=int, cli_group=BENCH_SERVING,
           bounds=COUNT, bench_field="sharegpt_output_len"),
    Option("--sharegpt-context-len", "skip ShareGPT requests longer than this (bench_serving's flag)", ("bench",), type=int, cli_group=BENCH_SERVING,
           bounds=COUNT, bench_field="sharegpt_context_len"),
    Option("--request-rate", "Poisson arrivals per second (inf: all at once)", ("bench",), default=math.inf,
           type=float, cli_group=BENCH_SERVING, bounds=RATE,
           bench_field="request_rate"),
    Option("--max-concurrency", "concurrent requests at most (bench_serving's flag)", ("bench",), type=int, default_text="no limit",
           cli_group=BENCH_SERVING, bounds=COUNT, bench_field="max_concurrency"),
    Option("--warmup-requests", "warmup requests", ("bench",), default=1, type=int, cli_group=BENCH_SERVING,
           aliases=(Alias("--warmup", ("bench",), deprecated=False),), bounds=NON_NEGATIVE_COUNT, bench_field="warmup_requests"),
    Option("--flush-cache", "POST /flush_cache after warmup (resets the server's accept-length counters); sends SPECSUITE_ADMIN_API_KEY "
           "when set. A refused flush is a warning and leaves accept_length out", ("bench",), action="store_true", cli_group=BENCH_SERVING,
           bench_field="flush_cache"),
    Option("--seed", "seed of the dataset draw and arrivals (bench_serving's flag and default; the suites' --seed defaults to 0)",
           ("bench",), default=BENCH_SERVING_PROFILE.seed, type=int, cli_group=BENCH_SERVING, bounds=SEED, bench_field="seed"),
    Option("--temperature", "native and vllm backends, as in bench_serving: its OpenAI backends send temperature 0.0 (see --oai-sampling)",
           ("bench",), default=0.0, type=float, cli_group=BENCH_SERVING, bounds=TEMPERATURE, bench_field="temperature"),
    Option("--top-p", "native and vllm backends, sent when below 1, as in bench_serving: its OpenAI backends send no top_p (see --oai-sampling). "
           "One value, unlike the suites' --top-p list", ("bench",), default=1.0, type=float, cli_group=BENCH_SERVING, bounds=TOP_P, bench_field="top_p"),
    Option("--oai-sampling", "specsuite only, a difference from bench_serving: send --temperature and --top-p (below 1) on sglang-oai and "
           "sglang-oai-chat too (bench_serving sends temperature 0.0 and no top_p there unless --extra-request-body has them)", ("bench",),
           action="store_true", cli_group=BENCH_SERVING, bench_field="oai_sampling"),
    Option("--disable-ignore-eos", "stop at EOS (bench_serving's flag; default: ignore_eos)", ("bench",), action="store_true", cli_group=BENCH_SERVING,
           bench_field="ignore_eos", bench_when_set=False),
    Option("--extra-request-body", "merged into every request body (top level)", ("bench",), metavar="JSON", cli_group=BENCH_SERVING,
           bench_field="extra_request_body", parse=json_object),
    Option("--keep-alive", "share keep-alive connections (default: a new connection per request, as bench_serving)", ("bench",),
           action="store_true", cli_group=BENCH_SERVING, bench_field="keep_alive"),
    Option("--tag", "a label stored with the result (bench_serving's flag)", ("bench",), cli_group=BENCH_SERVING, bench_field="tag"),
    Option("--output-details", "also store the generated texts", ("bench",), action="store_true", cli_group=BENCH_SERVING, bench_field="output_details"),
    Option("--disable-tqdm", "no progress bar", ("bench",), action="store_true", cli_group=BENCH_SERVING),
)
setting = setting_from(OPTIONS)


@dataclass(frozen=True)
class BenchSettings:
    """The suites' serving benchmark: what its --bench-* options chose (profile "suite" supplies the rest, through the one
    BenchConfig builder, specsuite/session/bench.py) and its A/B against the baseline: repeats, TOST margin, fail-on rules."""

    backend: str | None = setting("--bench-backend")
    dataset: str = setting("--bench-dataset")
    dataset_path: str | None = setting("--bench-dataset-path")
    num_prompts: int = setting("--bench-num-prompts")
    input_len: int = setting("--bench-input-len")
    output_len: int = setting("--bench-output-len")
    range_ratio: float = setting("--bench-range-ratio")
    max_concurrency: int = setting("--bench-max-concurrency")
    request_rate: float = setting("--bench-request-rate")
    warmup: int = setting("--bench-warmup")
    no_flush: bool = setting("--bench-no-flush")
    text_prompts: bool = setting("--bench-text-prompts")
    repeats: int = setting("--bench-repeats")
    margin: float = setting("--bench-margin")
    fail_on: str = setting("--bench-fail-on")  # empty: the table's default rules

    @property
    def fail_on_rules(self) -> str:
        return self.fail_on or DEFAULT_FAIL_ON


DEFAULT_FAIL_ON = next(option.default for option in OPTIONS if option.flag == "--bench-fail-on")
