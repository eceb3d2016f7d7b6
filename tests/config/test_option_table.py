"""The option table (specsuite/session/option_table.py) against what pytest and `specsuite` really accept.

docs/options.md must be the table's current rendering; every option pytest knows and every
argparse option of every `specsuite` subcommand must be in the table, and nothing else; an option
that pytest and a subcommand share has one default; comma lists follow one rule; old names work.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.config.argparsing import Parser

from specsuite.cli.main import build_parser, main
from specsuite.config.option import CLI_FRONT_ENDS, FRONT_ENDS, PYTEST_GROUPS, Alias, Option
from specsuite.errors import SpecsuiteError
from specsuite.session import option_table as table

PLUGIN_MODULES = ("specsuite.pytest_plugin.plugin", "specsuite.pytest_plugin.core", "specsuite.pytest_plugin.correctness",
                  "specsuite.pytest_plugin.gsm8k", "specsuite.pytest_plugin.integrity", "specsuite.pytest_plugin.lossless",
                  "specsuite.pytest_plugin.bench", "specsuite.pytest_plugin.history", "specsuite.pytest_plugin.kernel")
SPECSUITE_GROUPS = set(PYTEST_GROUPS)
ROOT_CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"
ENV_VARS = ("SPECSUITE_SERVER_URL", "SPECSUITE_RESULTS_DB", "SPECSUITE_BUILD_HASH", "SPECSUITE_ACCELERATOR")


def _plugin(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_the_checkout_conftest_loads_the_installed_plugin() -> None:
    """conftest.py declares nothing itself: it names specsuite.pytest_plugin.plugin (the pytest11 entry point), which brings every plugin."""
    spec = importlib.util.spec_from_file_location("specsuite_root_conftest", ROOT_CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.pytest_plugins == ("specsuite.pytest_plugin.plugin",) and not hasattr(module, "pytest_addoption")
    assert set(_plugin("specsuite.pytest_plugin.plugin").pytest_plugins) == set(PLUGIN_MODULES) - {"specsuite.pytest_plugin.plugin"}


def pytest_parser() -> Parser:
    """A pytest option parser with every suites/ plugin, as a session builds it."""
    parser = Parser(_ispytest=True)
    for name in PLUGIN_MODULES:
        if hasattr(_plugin(name), "pytest_addoption"):  # a family's parametrization module adds no option
            _plugin(name).pytest_addoption(parser)
    return parser


def pytest_option_names(parser: Parser) -> set[str]:
    return {name for group in parser._groups if group.name in SPECSUITE_GROUPS for option in group.options for name in option.names()}


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every `specsuite` front end's argparse parser, verbs included ('history ingest')."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    front_end = f"{prefix} {name}".strip()
                    found[front_end] = child
                    walk(child, front_end)

    walk(build_parser(), "")
    return found


def argparse_names(parser: argparse.ArgumentParser) -> set[str]:
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names.update(action.option_strings or [action.dest])
    return names


def table_names(front_end: str) -> set[str]:
    return {name for option in table.options_for(front_end)
            for name in ([option.key] if option.positional else option.names_for(front_end))}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_docs_options_md_is_the_current_table():
    committed = table.DOCS_PATH.read_text(encoding="utf-8")
    assert committed == table.markdown_table(), "docs/options.md is stale: run `python -m specsuite.session.option_table --write`"


def test_every_pytest_option_is_in_the_table_and_back():
    known = pytest_option_names(pytest_parser())
    declared = table_names("pytest")
    assert known - declared == set(), "pytest options missing from the table"
    assert declared - known == set(), "table options that pytest does not declare"


def test_the_pytest_help_lists_the_table(clean_env):
    """`pytest --help`'s specsuite sections, as a user sees them, hold every pytest option of the table."""
    import subprocess
    import sys

    output = subprocess.run([sys.executable, "-m", "pytest", "suites", "--help", "-p", "no:cacheprovider"], capture_output=True, text=True,
                            check=True, cwd=table.DOCS_PATH.parents[1]).stdout
    section = output[output.index(PYTEST_GROUPS["specsuite"]):]
    missing = [name for name in table_names("pytest") if name not in section]
    assert missing == []


def test_every_subcommand_option_is_in_the_table_and_back():
    parsers = subcommand_parsers()
    assert set(parsers) == set(CLI_FRONT_ENDS), "a subcommand without a front end in the table, or the reverse"
    for front_end, parser in parsers.items():
        known, declared = argparse_names(parser), table_names(front_end)
        assert (front_end, known - declared) == (front_end, set())
        assert (front_end, declared - known) == (front_end, set())


@pytest.mark.parametrize("env", [None, "set"])
def test_shared_options_have_one_default_under_pytest_and_the_cli(clean_env, env):
    if env:
        for name in ENV_VARS:
            clean_env.setenv(name, f"value-of-{name.lower()}")
    pytest_defaults = vars(pytest_parser().parse([]))
    minimal = {"report": ["--out", "d", "r.json"], "history ingest": ["r.json"]}
    checked = 0
    for front_end in CLI_FRONT_ENDS:
        if front_end == "serve-reference":
            continue
        argv = [*front_end.split(), *minimal.get(front_end, [])]
        cli_defaults = vars(build_parser().parse_args(argv))
        for option in table.options_for(front_end):
            if "pytest" in option.front_ends and not option.positional:
                assert cli_defaults[option.dest_for(front_end)] == pytest_defaults[option.dest_for("pytest")], (front_end, option.flag)
                checked += 1
    assert checked >= 30


def test_env_defaults_reach_both_front_ends(clean_env):
    clean_env.setenv("SPECSUITE_SERVER_URL", "http://node:1")
    clean_env.setenv("SPECSUITE_RESULTS_DB", "sqlite:////data/h.sqlite")
    assert pytest_parser().parse([]).server_url == "http://node:1"
    assert build_parser().parse_args(["gsm8k"]).server_url == "http://node:1"
    assert build_parser().parse_args(["history", "list"]).results_db == "sqlite:////data/h.sqlite"
    assert table.results_db_default() == "sqlite:////data/h.sqlite"


def test_the_table_is_consistent():
    assert table.table_problems() == []
    broken = Option("--x", "x", ("pytest", "vllm"), aliases=(Alias("--y", ("run",)),))
    assert table.table_problems([broken]) == ["--x: unknown front end 'vllm'", "--x: alias --y on 'run', which the option is not on"]


def test_adding_an_option_is_one_entry(monkeypatch):
    """A new entry reaches pytest (default area: specsuite/pytest_plugin/plugin.py's) and each subcommand it names, with nothing else to edit."""
    extra = Option("--draft-flavour", "a made-up option", ("pytest", "run", "gsm8k", "bench"), default="plain", choices=("plain", "spiced"))
    options = table.all_options()
    monkeypatch.setattr(table, "all_options", lambda: (*options, extra))
    assert pytest_parser().parse(["--draft-flavour", "spiced"]).draft_flavour == "spiced"
    for front_end in ("run", "gsm8k", "bench"):
        assert build_parser().parse_args([front_end]).draft_flavour == "plain"
    assert "`--draft-flavour`" in table.markdown_table()


def test_a_flag_used_twice_means_one_thing_per_front_end():
    for front_end in FRONT_ENDS:
        names = [name for option in table.options_for(front_end) for name in option.names_for(front_end)]
        assert len(names) == len(set(names)), front_end
        dests = [option.dest_for(front_end) for option in table.options_for(front_end)]
        assert len(dests) == len(set(dests)), front_end


def test_computed_defaults_are_the_workloads_own():
    from specsuite.families.lossless.workload import LosslessConfig
    from specsuite.kernels.distribution import DEFAULT_ROWS
    from specsuite.kernels.inputs import DEFAULT_VOCAB

    defaults = vars(pytest_parser().parse([]))
    config = LosslessConfig()
    assert defaults["lossless_samples"] == config.pit_requests
    assert table.parse_option("--lossless-concurrencies", defaults["lossless_concurrencies"]) == config.greedy_concurrencies
    assert tuple(table.parse_option("--lossless-temperatures", defaults["lossless_temperatures"])) == config.settings
    assert (defaults["kernel_vocab"], defaults["kernel_dist_rows"]) == (DEFAULT_VOCAB, DEFAULT_ROWS)


# ---------------------------------------------------------------- the list rule


def test_the_list_parser_reads_blank_items_and_spaces():
    assert table.parse_option("--temperatures", " 0, 0.6,,1.0 ,") == [0.0, 0.6, 1.0]
    assert table.parse_option("--lossless-concurrencies", "1,8") == (1, 8)


@pytest.mark.parametrize(("flag", "text", "message"), [
    ("--temperatures", "0,-0.5", r"--temperatures: a temperature must be >= 0, got '-0.5'"),
    ("--gsm8k-temperatures", "-1", r"--gsm8k-temperatures: a temperature must be >= 0, got '-1'"),
    ("--top-p", "1.5", r"--top-p: top_p must be in \(0, 1\], got '1.5'"),
    ("--temperatures", "0,hot", r"--temperatures expects comma-separated numbers, got 'hot'"),
    ("--top-p", " , ", r"--top-p is empty: give one or more comma-separated values"),
    ("--lossless-concurrencies", "0,8", r"--lossless-concurrencies: a count must be >= 1, got '0'"),
    ("--lossless-concurrencies", "1.5", r"--lossless-concurrencies expects comma-separated integers, got '1.5'"),
    ("--lossless-temperatures", "1.0,0:0.9", r"--lossless-temperatures: a sampled temperature .* must be > 0, got '0:0.9'"),
    ("--lossless-temperatures", "0.7:0", r"--lossless-temperatures: top_p must be in \(0, 1\], got '0.7:0'"),
])
def test_the_list_parser_names_the_option_in_one_line(flag, text, message):
    with pytest.raises(SpecsuiteError, match=f"^{message}$"):
        table.parse_option(flag, text)


@pytest.mark.parametrize("argv", [["gsm8k", "--gsm8k-temperatures", "0,-1"], ["run", "--temperatures=-1"], ["gsm8k", "--temperatures=-1"],
                                  ["run", "--top-p", "0"]])
def test_a_bad_list_is_one_line_before_anything_runs(argv, capsys, clean_env):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("specsuite: error: --") and "must be" in err[-1]
    assert len([line for line in err if "error" in line]) == 1


def test_a_negative_temperature_stops_pytest_with_one_line(pytester_free_run):
    result = pytester_free_run("--temperatures=0,-1")
    assert result.returncode == 4
    assert "specsuite: --temperatures: a temperature must be >= 0, got '-1'" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.fixture
def pytester_free_run(clean_env):
    """`pytest suites/ --co` in a subprocess with extra options (collection only: no server is started)."""
    import subprocess
    import sys

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-q", "--co", "-m", "correctness", *extra],
                              capture_output=True, text=True, cwd=table.DOCS_PATH.parents[1])

    return run


# ---------------------------------------------------------------- old names


def test_old_names_still_work(clean_env):
    parser = pytest_parser()
    assert parser.parse(["--bench-baseline-url", "http://b:1"]).baseline_url == "http://b:1"
    assert parser.parse(["--reference-url", "http://r:1"]).lossless_reference_url == "http://r:1"
    gsm8k = build_parser().parse_args(["gsm8k", "--num-questions", "3", "--num-shots", "2", "--temperatures", "0,1", "--parallel", "4",
                                       "--shots-from-eval"])
    assert (gsm8k.gsm8k_num_questions, gsm8k.gsm8k_num_shots, gsm8k.gsm8k_temperatures, gsm8k.gsm8k_parallel, gsm8k.gsm8k_shots_from_eval) == (
        3, 2, "0,1", 4, True)
    assert build_parser().parse_args(["bench", "--warmup", "3"]).warmup_requests == 3
    assert build_parser().parse_args(["run", "-m", "gsm8k"]).markers == "gsm8k"


def test_a_deprecated_name_prints_one_note():
    assert table.deprecation_notes(["--bench-baseline-url=http://b:1", "-q"], "pytest") == [
        "--bench-baseline-url is deprecated; use --baseline-url (same meaning)"]
    assert table.deprecation_notes(["gsm8k", "--num-questions", "3"], "gsm8k") == [
        "--num-questions is deprecated; use --gsm8k-num-questions (same meaning)"]
    assert table.deprecation_notes(["bench", "--warmup", "3"], "bench") == []  # a short form, not deprecated
    assert table.deprecation_notes(["run", "--temperatures", "0"], "run") == []  # run's own --temperatures


def test_verbs_keep_the_parents_values():
    args = build_parser().parse_args(["history", "--results-db", "a.sqlite", "--arm", "fix", "list"])
    assert (args.results_db, args.arm) == ("a.sqlite", "fix")
    args = build_parser().parse_args(["history", "ingest", "r.json", "--arm", "nofix", "--accelerator", "MI355X"])
    assert (args.ingest_arm, args.ingest_accelerator, args.arm, args.accelerator) == (["nofix"], "MI355X", None, None)


def test_the_options_module_runs_without_pytest():
    import subprocess
    import sys

    code = "import sys, specsuite.session.option_table, specsuite.cli.main; sys.exit('pytest' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=table.DOCS_PATH.parents[1]).returncode == 0


def test_names_that_collide_with_other_plugins_are_prefixed_under_pytest():
    """pytest-profiling's --profile (or a project's conftest --seed) beside the suites' plugin: pytest still starts."""
    names = pytest_option_names(pytest_parser())
    assert {"--specsuite-seed", "--specsuite-profile"} <= names and not {"--seed", "--profile"} & names
    parser = Parser(_ispytest=True)
    parser.getgroup("profiling").addoption("--profile", action="store_true")
    parser.addoption("--seed", type=int)
    for name in PLUGIN_MODULES:
        if hasattr(_plugin(name), "pytest_addoption"):  # a family's parametrization module adds no option
            _plugin(name).pytest_addoption(parser)  # a ValueError here is pytest refusing to start
    parsed = parser.parse(["--profile", "--specsuite-profile", "nightly", "--seed", "1", "--specsuite-seed", "2"])
    assert (parsed.profile, parsed.specsuite_profile, parsed.seed, parsed.specsuite_seed) == (True, "nightly", 1, 2)
    assert "| `--specsuite-seed` | `--seed` |" in table.markdown_table()
