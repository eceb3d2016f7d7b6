"""A workload family declares its options, its settings section, its main-job values and its nightly rules in its own
package (`WorkloadFamily.options`, `settings`, `main_job`, `nightly_gate`); the option table, RunConfig, the main job
and `--profile nightly` read them from the registry, so a new family edits nothing else. And each default the
harness shares (the launch ready-timeout, the reference arm, the benchmark's sizes) is declared once."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from _pytest.config.argparsing import Parser

from specsuite.cli.main import build_parser
from specsuite.config.bench_profiles import SUITE
from specsuite.config.generic_options import GENERIC_OPTIONS
from specsuite.config.option import COUNT, Option, setting_from
from specsuite.families.bench.options import BenchSettings
from specsuite.families.lossless import reference
from specsuite.families.registry import families, registered
from specsuite.families.workload_family import WorkloadFamily
from specsuite.server import launcher, refserver_contract
from specsuite.server.session import ServerOptions
from specsuite.session import option_table as table
from specsuite.session.bench import chosen_from_cli, chosen_from_pytest
from specsuite.session.config import RunConfig, mapped_options, run_config_from_options, with_options
from specsuite.session.config_file import config_from_json, config_to_json
from specsuite.session.main_job_profiles import MainJobProfile

STUB_OPTIONS = (
    Option("--stub-depth", "how deep the stub family digs", ("pytest", "gsm8k"), default=3, type=int, bounds=COUNT),
    Option("--stub-label", "the stub family's label", ("pytest",), default="plain"),
)
stub_setting = setting_from(STUB_OPTIONS)


@dataclass(frozen=True)
class StubSettings:
    depth: int = stub_setting("--stub-depth")
    label: str = stub_setting("--stub-label")


STUB = WorkloadFamily(name="stub_options", label="stub", results_key="workloads.stub_options", suite_module="test_stub_options",
                      records=lambda repeat: [], metrics=(), verdict_rules=(), state=lambda view, arm: "",
                      options=STUB_OPTIONS, settings=StubSettings, main_job=(("--stub-depth", 7),))


@pytest.fixture
def stub_family() -> Iterator[WorkloadFamily]:
    with registered(STUB):
        yield STUB


def test_a_new_family_reaches_the_table_the_parsers_the_run_config_and_the_main_job(stub_family: WorkloadFamily) -> None:
    assert [option.flag for option in table.options_for("pytest")][-2:] == ["--stub-depth", "--stub-label"]
    assert "`--stub-depth`" in table.markdown_table() and table.table_problems() == []
    parser = Parser(_ispytest=True)
    table.add_pytest_options(parser.getgroup, "plugin")
    assert parser.parse(["--stub-depth", "5"]).stub_depth == 5
    assert build_parser().parse_args(["gsm8k", "--stub-depth", "4"]).stub_depth == 4
    # RunConfig builds its section from the family's options, on every front end that carries them, one way
    assert RunConfig().stub_options == StubSettings(depth=3, label="plain")
    assert mapped_options()["--stub-depth"] == "stub_options.depth"
    given = run_config_from_options(lambda name: {"stub_depth": 9}.get(name), front_end="gsm8k")
    assert given.stub_options == StubSettings(depth=9, label="plain")
    assert with_options(RunConfig(), {"--stub-label": "spiced"}).stub_options.label == "spiced"
    assert config_from_json(config_to_json(given)) == given
    assert dataclasses.replace(given, stub_options=StubSettings(depth=1)).stub_options.depth == 1
    # the main job asks every family for its values
    assert MainJobProfile("job", markers="", parts=()).settings("stub_options").depth == 7


def test_without_the_family_its_options_are_gone() -> None:
    assert "--stub-depth" not in {option.flag for option in table.all_options()}
    with pytest.raises(AttributeError, match="stub_options"):
        RunConfig().stub_options  # noqa: B018


def test_the_generic_table_names_no_family_option() -> None:
    family_flags = {option.flag for family in families() for option in family.options if "pytest" in option.front_ends}
    generic_pytest = {option.flag for option in GENERIC_OPTIONS if "pytest" in option.front_ends}
    assert not family_flags & generic_pytest
    assert {"--gsm8k-temperatures", "--lossless-samples", "--bench-num-prompts", "--temperatures", "--integrity-batch-size"} <= family_flags


def test_the_launch_ready_timeout_is_declared_once() -> None:
    declared = launcher.READY_TIMEOUT_S
    assert ServerOptions().ready_timeout_s == declared
    assert table.find_option("--launch-timeout").default == declared
    assert table.find_option("--ready-timeout", "serve-vllm").default == declared
    assert table.find_option("--ready-timeout", "serve-sglang").default == declared
    for function in (launcher.launch_reference_server, launcher.LaunchedServer.__init__, reference.open_reference):
        assert inspect.signature(function).parameters["ready_timeout_s"].default == declared, function


def test_the_reference_arm_is_declared_once() -> None:
    assert refserver_contract.DEFAULT_ARM in refserver_contract.ARMS
    assert ServerOptions().reference_arm == table.find_option("--reference-arm", "bench").default == refserver_contract.DEFAULT_ARM
    for function in (launcher.launch_reference_server, launcher.reference_server_command):
        assert inspect.signature(function).parameters["arm"].default == refserver_contract.DEFAULT_ARM


def test_both_benchmark_front_ends_choose_through_the_options_bench_fields() -> None:
    """pytest's --bench-* options and `specsuite bench`'s flags name the BenchConfig field they set; nothing else maps them."""
    chosen = chosen_from_pytest(RunConfig())
    assert {key: chosen[key] for key in ("num_prompts", "random_input_len", "random_output_len", "random_range_ratio", "max_concurrency")} == {
        key: getattr(SUITE, key) for key in ("num_prompts", "random_input_len", "random_output_len", "random_range_ratio", "max_concurrency")}
    assert chosen["seed"] == RunConfig().seed and chosen["flush_cache"] is None and chosen["tokenize_prompt"] is None
    switched = with_options(RunConfig(), {"--bench-no-flush": True, "--bench-text-prompts": True, "--bench-input-len": 64})
    assert chosen_from_pytest(switched) | {} == chosen | {"flush_cache": False, "tokenize_prompt": False, "random_input_len": 64}
    ab_only = {"repeats", "margin", "fail_on"}  # the suites' A/B, not the benchmark run
    for item in dataclasses.fields(BenchSettings):
        option = table.find_option(item.metadata["specsuite_option"])
        assert (option.bench_field is None) == (item.name in ab_only), item.name
    args = build_parser().parse_args(["bench", "--num-prompts", "5", "--disable-ignore-eos"])
    assert chosen_from_cli(lambda name: getattr(args, name, None))["num_prompts"] == 5
    assert chosen_from_cli(lambda name: getattr(args, name, None))["ignore_eos"] is False
