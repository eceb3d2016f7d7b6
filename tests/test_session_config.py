"""The CLI and pytest build equal configurations from equal options: the run configuration (server, results, seed,
GSM8K) of `specsuite gsm8k` and of a pytest session, and the serving benchmark's BenchConfig of `specsuite bench` and
of `pytest -m perf`; and each front end's defaults are its named profile's (harness/config/bench_profiles.py)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from typing import Any

import pytest
from _pytest.config.argparsing import Parser

from harness.cli.main import build_parser
from harness.config.bench_profiles import BENCH_SERVING, SUITE
from harness.server.session import ServerOptions
from harness.session.bench import build_bench_config, chosen_from_cli, chosen_from_pytest
from harness.session.config import RunConfig, run_config_from_options

PLUGINS = ("suites.plugin", "suites.pytest_plugin", "suites.plugin_integrity", "suites.plugin_lossless", "suites.plugin_bench",
           "suites.plugin_history", "suites.plugin_kernel")
URL = "http://127.0.0.1:1"


def pytest_options(args: list[str]) -> argparse.Namespace:
    """pytest's options as a session parses them (every suites plugin's declarations)."""
    parser = Parser(_ispytest=True)
    for name in PLUGINS:
        importlib.import_module(name).pytest_addoption(parser)
    return parser.parse(args)


def cli_options(args: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(args)


def getter(namespace: argparse.Namespace):
    return lambda name: getattr(namespace, name, None)


SHARED_RUN_OPTIONS = ["--server-url", "http://node:30000", "--tokenizer", "/models/tok", "--vocab-size", "1000", "--arm-name", "cand",
                      "--server-kind", "sglang", "--results-dir", "out", "--seed", "7", "--gsm8k-path", "synthetic",
                      "--gsm8k-num-questions", "12", "--gsm8k-num-shots", "3", "--gsm8k-parallel", "4", "--gsm8k-temperatures", "0,0.7",
                      "--gsm8k-shots-from-eval"]


def test_the_cli_and_pytest_build_equal_run_configurations() -> None:
    from_pytest = run_config_from_options(getter(pytest_options(SHARED_RUN_OPTIONS)), front_end="pytest", api_key="k")
    from_cli = run_config_from_options(getter(cli_options(["gsm8k", *SHARED_RUN_OPTIONS])), front_end="gsm8k", api_key="k")
    assert from_pytest == from_cli
    assert from_cli.server == ServerOptions(server_url="http://node:30000", arm="cand", tokenizer="/models/tok", vocab_size=1000,
                                            server_kind="sglang", api_key="k")
    assert (from_cli.seed, from_cli.gsm8k.num_questions, from_cli.gsm8k.temperatures, from_cli.gsm8k.shots_from_eval) == (7, 12, (0.0, 0.7), True)


def test_a_different_option_gives_a_different_run_configuration() -> None:
    """The equality above is not vacuous: one changed value shows."""
    base = run_config_from_options(getter(pytest_options(SHARED_RUN_OPTIONS)), front_end="pytest")
    changed = run_config_from_options(getter(cli_options(["gsm8k", *SHARED_RUN_OPTIONS, "--gsm8k-num-questions", "13"])), front_end="gsm8k")
    assert base != changed and dataclasses.replace(changed, gsm8k=base.gsm8k) == base


def test_the_require_options_refuse_the_fallback_alike() -> None:
    assert run_config_from_options(getter(pytest_options(["--require-server-url"])), front_end="pytest").server.require_server_url
    nightly = run_config_from_options(getter(pytest_options(["--profile", "nightly"])), front_end="pytest").server
    assert nightly.require_server_url and nightly.require_reason == "--profile nightly"
    assert run_config_from_options(getter(cli_options(["gsm8k", "--require-server-url"])), front_end="gsm8k").server.require_server_url
    assert not RunConfig().server.require_server_url


def test_the_keys_stay_out_of_the_configuration_repr() -> None:
    config = run_config_from_options(getter(pytest_options([])), front_end="pytest", api_key="sk-secret", admin_api_key="adm-secret")
    assert "secret" not in repr(config)


# The same benchmark asked of each front end, under its own flag names.
BENCH_PYTEST = ["--bench-backend", "sglang", "--bench-dataset", "random", "--bench-num-prompts", "16", "--bench-input-len", "64",
                "--bench-output-len", "32", "--bench-range-ratio", "0.5", "--bench-max-concurrency", "2", "--bench-warmup", "2",
                "--bench-request-rate", "4", "--seed", "5", "--tokenizer", "/models/tok"]
BENCH_CLI = ["bench", "--backend", "sglang", "--dataset-name", "random", "--num-prompts", "16", "--random-input-len", "64",
             "--random-output-len", "32", "--random-range-ratio", "0.5", "--max-concurrency", "2", "--warmup-requests", "2",
             "--request-rate", "4", "--seed", "5", "--tokenizer", "/models/tok", "--tokenize-prompt", "--flush-cache"]


def _bench(chosen: dict[str, Any], profile, **kwargs: Any):
    return build_bench_config(chosen, profile, base_url=URL, **kwargs)


def test_the_cli_and_pytest_build_equal_bench_configurations() -> None:
    from_pytest = _bench(chosen_from_pytest(getter(pytest_options(BENCH_PYTEST))), SUITE, server_kind="sglang")
    from_cli = _bench(chosen_from_cli(getter(cli_options(BENCH_CLI))), BENCH_SERVING)
    assert from_pytest == from_cli
    assert (from_cli.num_prompts, from_cli.random_input_len, from_cli.max_concurrency, from_cli.seed, from_cli.flush_cache) == (16, 64, 2, 5, True)


@pytest.mark.parametrize(("pytest_extra", "cli_extra"), [(["--bench-text-prompts"], []), (["--bench-no-flush"], ["--tokenize-prompt"])])
def test_the_text_and_flush_switches_mean_the_same_on_both_sides(pytest_extra: list[str], cli_extra: list[str]) -> None:
    cli = [flag for flag in BENCH_CLI if flag not in ("--tokenize-prompt", "--flush-cache")] + cli_extra
    if "--bench-text-prompts" in pytest_extra:
        cli.append("--flush-cache")
    from_pytest = _bench(chosen_from_pytest(getter(pytest_options(BENCH_PYTEST + pytest_extra))), SUITE, server_kind="sglang")
    assert from_pytest == _bench(chosen_from_cli(getter(cli_options(cli))), BENCH_SERVING)


def test_each_front_end_defaults_to_its_named_profile() -> None:
    suite = _bench(chosen_from_pytest(getter(pytest_options(["--seed", "3"]))), SUITE, server_kind="sglang")
    assert {key: getattr(suite, key) for key in SUITE.defaults()} == {**SUITE.defaults(), "seed": 3}  # the suite's seed is the run's
    cli = _bench(chosen_from_cli(getter(cli_options(["bench"]))), BENCH_SERVING)
    assert {key: getattr(cli, key) for key in BENCH_SERVING.defaults()} == BENCH_SERVING.defaults()
    assert (SUITE.num_prompts, SUITE.flush_cache, SUITE.seed) != (BENCH_SERVING.num_prompts, BENCH_SERVING.flush_cache, BENCH_SERVING.seed)


def test_vllm_gets_no_flush_unless_asked_and_chat_or_sharegpt_send_text() -> None:
    on_vllm = _bench(chosen_from_pytest(getter(pytest_options([]))), SUITE, server_kind="vllm")
    assert on_vllm.backend == "vllm" and on_vllm.flush_cache is False
    asked = _bench(chosen_from_cli(getter(cli_options(["bench", "--backend", "vllm", "--flush-cache"]))), BENCH_SERVING)
    assert asked.flush_cache is True  # an explicit flag stands (the runner then warns and skips it on vLLM)
    chat = _bench(chosen_from_pytest(getter(pytest_options(["--bench-backend", "sglang-oai-chat"]))), SUITE)
    assert chat.tokenize_prompt is False
