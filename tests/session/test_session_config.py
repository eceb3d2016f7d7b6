"""The CLI and pytest build equal configurations from equal options: the run configuration (server, results, seed,
GSM8K) of `specsuite gsm8k` and of a pytest session, its correctness grid of `specsuite run`, its history labels of
`specsuite history ingest`, and the serving benchmark's BenchConfig of `specsuite bench` and of `pytest -m perf`; each
front end's defaults are its named profile's (specsuite/config/bench_profiles.py); and every option pytest offers is a
field of the run configuration (or is listed, with its reason, as not a run setting)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
from typing import Any

import pytest
from _pytest.config.argparsing import Parser

from specsuite.cli.main import build_parser
from specsuite.config.bench_profiles import BENCH_SERVING, SUITE
from specsuite.config.option import Option, count_list, temperature_list, top_p_list
from specsuite.families.lossless.options import lossless_settings
from specsuite.server.session import ServerOptions
from specsuite.session import option_table as table
from specsuite.session.bench import build_bench_config, chosen_from_cli, chosen_from_pytest
from specsuite.session.config import NOT_RUN_SETTINGS, RunConfig, mapped_options, run_config_from_options

PLUGINS = ("specsuite.pytest_plugin.plugin", "specsuite.pytest_plugin.core", "specsuite.pytest_plugin.integrity",
           "specsuite.pytest_plugin.lossless", "specsuite.pytest_plugin.bench", "specsuite.pytest_plugin.history",
           "specsuite.pytest_plugin.kernel")
URL = "http://127.0.0.1:1"
PYTEST_RENAMED = {option.flag for option in table.options_for("pytest") if option.pytest_flag}


def pytest_spelling(args: list[str]) -> list[str]:
    """The same command line under pytest's names (`--seed` is `--specsuite-seed` there: docs/options.md says why)."""
    return [table.find_option(arg, "pytest").flag_on("pytest") if arg in PYTEST_RENAMED else arg for arg in args]


def pytest_options(args: list[str]) -> argparse.Namespace:
    """pytest's options as a session parses them (every suites plugin's declarations); the table's flags are written
    as every front end shares them and given to pytest under its names."""
    parser = Parser(_ispytest=True)
    for name in PLUGINS:
        importlib.import_module(name).pytest_addoption(parser)
    return parser.parse(pytest_spelling(args))


def cli_options(args: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(args)


def getter(namespace: argparse.Namespace):
    return lambda name: getattr(namespace, name, None)


SHARED_RUN_OPTIONS = ["--server-url", "http://node:30000", "--tokenizer", "/models/tok", "--vocab-size", "1000", "--arm-name", "cand",
                      "--server-kind", "sglang", "--results-dir", "out", "--seed", "7", "--gsm8k-path", "synthetic",
                      "--gsm8k-num-questions", "12", "--gsm8k-num-shots", "3", "--gsm8k-parallel", "4", "--gsm8k-temperatures", "0,0.7",
                      "--gsm8k-shots-from-eval"]


def test_the_cli_and_pytest_build_equal_run_configurations() -> None:
    """Every section: those `specsuite gsm8k` has no options for take the table's defaults on both sides."""
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
    assert nightly.require_server_url and nightly.require_reason == "--specsuite-profile nightly"
    assert run_config_from_options(getter(cli_options(["gsm8k", "--require-server-url"])), front_end="gsm8k").server.require_server_url
    assert not RunConfig().server.require_server_url


def test_the_keys_stay_out_of_the_configuration_repr() -> None:
    config = run_config_from_options(getter(pytest_options(["--results-db", "postgresql://u:db-secret@db:5432/h"])), front_end="pytest",
                                     api_key="sk-secret", admin_api_key="adm-secret")
    assert config.history.results_db == "postgresql://u:db-secret@db:5432/h"
    assert "secret" not in repr(config)


# `specsuite run` gives its sessions the correctness grid, profile, seed and run id as these same options.
RUN_OPTIONS = ["--server-url", "http://node:30000", "--baseline-url", "http://base:30000", "--temperatures", "0,0.7", "--top-p", "0.9",
               "--profile", "nightly", "--seed", "3", "--run-id", "r1", "--vocab-size", "1000", "--results-dir", "out"]


def test_specsuite_run_and_pytest_build_equal_run_configurations() -> None:
    """Everything but GSM8K (`specsuite run` has no GSM8K options: its sessions get the main job's) is equal."""
    from_pytest = run_config_from_options(getter(pytest_options(RUN_OPTIONS)), front_end="pytest")
    from_cli = run_config_from_options(getter(cli_options(["run", *RUN_OPTIONS])), front_end="run")
    # The refusal names the option as each front end spells it.
    assert (from_cli.server.require_reason, from_pytest.server.require_reason) == ("--profile nightly", "--specsuite-profile nightly")
    server = dataclasses.replace(from_cli.server, require_reason=from_pytest.server.require_reason)
    assert dataclasses.replace(from_cli, gsm8k=from_pytest.gsm8k, server=server) == from_pytest
    assert (from_cli.correctness.temperatures, from_cli.correctness.top_p, from_cli.baseline_url) == ((0.0, 0.7), (0.9,), "http://base:30000")
    assert from_cli.server.require_server_url and from_cli.profile == "nightly"


def test_the_history_labels_are_read_alike_under_pytest_and_history_ingest() -> None:
    """`history ingest` stores --accelerator under another dest (beside `history list`'s filter of that name): read by
    the option, not by the dest, both front ends label the run the same."""
    labels = ["--build-hash", "abc123", "--accelerator", "MI355X", "--results-db", "h.sqlite"]
    from_pytest = run_config_from_options(getter(pytest_options(labels)), front_end="pytest").history
    from_cli = run_config_from_options(getter(cli_options(["history", "ingest", "r.json", *labels])), front_end="history ingest").history
    assert from_pytest == from_cli
    assert (from_cli.build_hash, from_cli.accelerator, from_cli.results_db) == ("abc123", "MI355X", "h.sqlite")


def test_a_verbs_flag_of_the_same_name_is_not_read_as_the_suites_option() -> None:
    """`specsuite bench --top-p` is one number and `specsuite history --alpha` a step test's level: neither is the suites'."""
    bench = run_config_from_options(getter(cli_options(["bench", "--top-p", "0.5"])), front_end="bench")
    assert bench.correctness.top_p == RunConfig().correctness.top_p
    history = run_config_from_options(getter(cli_options(["history", "--alpha", "0.05"])), front_end="history")
    assert history.alpha == RunConfig().alpha == 0.001


# ---------------------------------------------------------------- every pytest option is a run setting

PYTEST_FLAGS = [option.flag for option in table.options_for("pytest")]
SAMPLE_LISTS = {temperature_list: "0.3", top_p_list: "0.5", count_list: "3", lossless_settings: "0.5:0.8"}


def suite_settings(args: list[str]) -> RunConfig:
    """The run configuration a pytest session builds from these options (what the suites' benchmark reads)."""
    return run_config_from_options(getter(pytest_options(args)), front_end="pytest")


def off_default(option: Option) -> list[str]:
    """A command line that gives this option a value other than its default."""
    default = option.resolved_default()
    if option.action == "store_true":
        return [option.flag]
    if option.choices:
        value: Any = next(choice for choice in option.choices if choice != default)
    elif option.parse is not None:
        value = SAMPLE_LISTS[option.parse]
    elif option.type is int:
        value = (default or 0) + 1
    elif option.type is float:
        value = 0.5 if default is None or not math.isfinite(default) or default == 0.5 else default / 2
    else:
        value = "http://elsewhere:1" if default != "http://elsewhere:1" else "x"
    return [option.flag, str(value)]


def field_at(config: RunConfig, path: str) -> Any:
    value: Any = config
    for name in path.split("."):
        value = getattr(value, name)
    return value


@pytest.mark.parametrize("flag", PYTEST_FLAGS)
def test_every_pytest_option_is_a_run_setting(flag: str) -> None:
    """Each option pytest offers sets a RunConfig field (given off its default, the field changes), or is listed as not
    a run setting: a new option that nobody maps fails here."""
    mapped = mapped_options()
    assert flag in mapped or flag in NOT_RUN_SETTINGS, (
        f"{flag} is offered to pytest but RunConfig has no field for it: add one (specsuite/session/config.py `setting`), or list it "
        "in NOT_RUN_SETTINGS with the reason")
    if flag in NOT_RUN_SETTINGS:
        return
    path = mapped[flag]
    given = run_config_from_options(getter(pytest_options(off_default(table.find_option(flag)))), front_end="pytest")
    default = run_config_from_options(getter(pytest_options([])), front_end="pytest")
    assert field_at(given, path) != field_at(default, path), f"{flag} given {off_default(table.find_option(flag))} left {path} unchanged"


def test_the_mapping_names_only_pytest_options_and_real_fields() -> None:
    mapped = mapped_options()
    assert set(mapped) <= set(PYTEST_FLAGS), "a RunConfig field names an option pytest does not offer"
    assert not set(mapped) & set(NOT_RUN_SETTINGS), "an option is both mapped and listed as not a run setting"
    config = RunConfig()
    for path in mapped.values():
        field_at(config, path)  # an AttributeError names a stale path


def test_the_defaults_are_the_option_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """RunConfig() and a pytest session given nothing agree field by field: the table is the one source of defaults."""
    monkeypatch.delenv("SPECSUITE_SERVER_URL", raising=False)
    parsed = run_config_from_options(getter(pytest_options([])), front_end="pytest")
    built = RunConfig()
    assert parsed == built
    assert built.gsm8k.temperatures == (0.0,) and built.seed == 0 and built.profile == "smoke"
    for section in ("correctness", "integrity", "lossless", "kernel", "history", "bench"):
        assert getattr(parsed, section) == getattr(built, section), section
    assert parsed.alpha == built.alpha == table.find_option("--alpha").default
    assert built.lossless.pit_requests == table.find_option("--lossless-samples").resolved_default()


def test_the_lossless_section_gives_the_workloads_config() -> None:
    config = run_config_from_options(getter(pytest_options(["--lossless-temperatures", "0.5:0.8", "--lossless-concurrencies", "1,4",
                                                            "--alpha", "0.01", "--seed", "9"])), front_end="pytest")
    workload = config.lossless.workload_config(alpha=config.alpha, seed=config.seed)
    assert ([s.key for s in workload.settings], workload.greedy_concurrencies, workload.alpha, workload.seed) == (
        ["t=0.5-top_p=0.8"], (1, 4), 0.01, 9)


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
    from_pytest = _bench(chosen_from_pytest(suite_settings(BENCH_PYTEST)), SUITE, server_kind="sglang")
    from_cli = _bench(chosen_from_cli(getter(cli_options(BENCH_CLI))), BENCH_SERVING)
    assert from_pytest == from_cli
    assert (from_cli.num_prompts, from_cli.random_input_len, from_cli.max_concurrency, from_cli.seed, from_cli.flush_cache) == (16, 64, 2, 5, True)


@pytest.mark.parametrize(("pytest_extra", "cli_extra"), [(["--bench-text-prompts"], []), (["--bench-no-flush"], ["--tokenize-prompt"])])
def test_the_text_and_flush_switches_mean_the_same_on_both_sides(pytest_extra: list[str], cli_extra: list[str]) -> None:
    cli = [flag for flag in BENCH_CLI if flag not in ("--tokenize-prompt", "--flush-cache")] + cli_extra
    if "--bench-text-prompts" in pytest_extra:
        cli.append("--flush-cache")
    from_pytest = _bench(chosen_from_pytest(suite_settings(BENCH_PYTEST + pytest_extra)), SUITE, server_kind="sglang")
    assert from_pytest == _bench(chosen_from_cli(getter(cli_options(cli))), BENCH_SERVING)


def test_each_front_end_defaults_to_its_named_profile() -> None:
    suite = _bench(chosen_from_pytest(suite_settings(["--seed", "3"])), SUITE, server_kind="sglang")
    assert {key: getattr(suite, key) for key in SUITE.defaults()} == {**SUITE.defaults(), "seed": 3}  # the suite's seed is the run's
    cli = _bench(chosen_from_cli(getter(cli_options(["bench"]))), BENCH_SERVING)
    assert {key: getattr(cli, key) for key in BENCH_SERVING.defaults()} == BENCH_SERVING.defaults()
    assert (SUITE.num_prompts, SUITE.flush_cache, SUITE.seed) != (BENCH_SERVING.num_prompts, BENCH_SERVING.flush_cache, BENCH_SERVING.seed)


def test_vllm_gets_no_flush_unless_asked_and_chat_or_sharegpt_send_text() -> None:
    on_vllm = _bench(chosen_from_pytest(suite_settings([])), SUITE, server_kind="vllm")
    assert on_vllm.backend == "vllm" and on_vllm.flush_cache is False
    asked = _bench(chosen_from_cli(getter(cli_options(["bench", "--backend", "vllm", "--flush-cache"]))), BENCH_SERVING)
    assert asked.flush_cache is True  # an explicit flag stands (the runner then warns and skips it on vLLM)
    chat = _bench(chosen_from_pytest(suite_settings(["--bench-backend", "sglang-oai-chat"])), SUITE)
    assert chat.tokenize_prompt is False
