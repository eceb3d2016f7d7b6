"""`specsuite run` hands each child pytest session its settings as one RunConfig file (`--specsuite-config`), not as
options rendered back to argv: the child's command line carries no specsuite setting (the server URL least of all),
and the configuration the child builds equals the one the parent wrote, field by field."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from specsuite.cli.run import sessions_config
from specsuite.errors import SpecsuiteError
from specsuite.orchestration import runner
from specsuite.orchestration.arms import ArmSpec
from specsuite.pytest_plugin.core import SpecsuiteSession
from specsuite.session import option_table as table
from specsuite.session.config import RunConfig, mapped_options, run_config_from_options
from specsuite.session.config_file import config_from_json, config_to_json, read_config_file, write_config_file
from specsuite.session.main_job_profiles import MAIN
from tests.session.test_session_config import PYTEST_FLAGS, cli_options, getter, off_default, pytest_options

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = "http://candidate.example:30000"


def test_a_configuration_reads_back_equal() -> None:
    assert config_from_json(config_to_json(RunConfig())) == RunConfig()
    every_option_off_default = [token for flag in mapped_options() for token in off_default(table.find_option(flag))]
    config = run_config_from_options(getter(pytest_options(every_option_off_default)), front_end="pytest")
    assert config != RunConfig()
    assert config_from_json(config_to_json(config)) == config
    assert math.isinf(config_from_json(config_to_json(RunConfig())).bench.request_rate)  # JSON's Infinity reads back


def test_the_api_keys_are_never_written(tmp_path: Path) -> None:
    config = dataclasses.replace(RunConfig(), server=dataclasses.replace(RunConfig().server, api_key="k-secret", admin_api_key="a-secret"))
    path = write_config_file(config, tmp_path / "c.json")
    assert "secret" not in path.read_text() and (path.stat().st_mode & 0o777) == 0o600
    assert read_config_file(path, api_key="k-secret", admin_api_key="a-secret") == config


def test_a_stale_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"seed": 1, "gone": 2}')
    with pytest.raises(SpecsuiteError, match="unknown setting.*gone"):
        read_config_file(path)


def _session(tmp_path: Path, *run_argv: str) -> tuple[RunConfig, list[str]]:
    """What `specsuite run RUN_ARGV` writes for the candidate's first session, and that session's command line."""
    args = cli_options(["run", "--server-url", CANDIDATE, "--baseline-url", "http://baseline.example:1", *run_argv])
    config, extra = sessions_config(args)
    plan = runner.RunPlan(arms=[ArmSpec("candidate", url=args.server_url)], repeats=2, seed=args.seed, markers="correctness",
                          pytest_options=extra, config=config)
    spec = runner.SessionSpec(plan.arms[0], 2, "correctness")
    written = plan.session_config(spec, tmp_path)
    runner.write_config_file(written, runner.config_path(tmp_path, spec.run_id))
    return written, runner.session_command(plan, spec, tmp_path, tmp_path)


def test_the_server_url_reaches_the_child_in_its_settings_file_not_its_argv(tmp_path: Path) -> None:
    written, command = _session(tmp_path, "--seed", "4", "--temperatures", "0,0.5", "--pytest-arg=--gsm8k-num-questions=9",
                                "--pytest-arg=-x")
    argv = command[command.index("pytest") + 1:]
    given, _ = table.given_options(argv, "pytest")
    assert list(given) == ["--specsuite-config"]  # no --server-url, --seed or any other setting on the command line
    assert CANDIDATE not in " ".join(command) and "-x" in argv  # pytest's own arguments still pass through
    # The child: pytest parses its command line (its own options left to pytest here), and the session builds its
    # RunConfig from the file that names.
    parsed = pytest_options([token for token in argv if token not in table.given_options(argv, "pytest")[1]])
    child = SpecsuiteSession(SimpleNamespace(getoption=lambda name, default=None: getattr(parsed, name, default)))
    assert child.run_config == written
    assert (written.server.server_url, written.seed, written.correctness.temperatures, written.gsm8k.num_questions) == (
        CANDIDATE, 5, (0.0, 0.5), 9)  # repeat 2 of seed 4
    assert written.baseline_url is None and written.run_id == "candidate-r2" and written.results_dir == str(tmp_path)


def test_the_child_equals_what_the_same_options_on_argv_gave_before(tmp_path: Path) -> None:
    """The file carries what the rendered options used to: a session given them on its command line builds the same."""
    written, _ = _session(tmp_path, "--profile", "nightly", "--top-p", "0.9", "--pytest-arg=--alpha=0.01")
    argv = ["--results-dir", str(tmp_path), "--run-id", "candidate-r2", "--arm-name", "candidate", "--seed", "1",
            "--server-url", CANDIDATE, "--profile", "nightly", "--temperatures", "0,0.6,1.0", "--top-p", "0.9",
            "--alpha", "0.01",
            # the main job's settings (each family's `main_job`: GSM8K's data and temperatures, the lossless check's sizes)
            *(str(part) for option in MAIN.options for part in option)]
    from_argv = run_config_from_options(getter(pytest_options(argv)), front_end="pytest")
    history = dataclasses.replace(from_argv.history, results_db=None)  # a session's environment has no SPECSUITE_RESULTS_DB
    assert written == dataclasses.replace(from_argv, history=history)


@pytest.mark.parametrize("flag", ["--specsuite-seed", "--server-url", "--results-dir"])
def test_pytest_arg_cannot_set_what_the_run_sets_per_session(flag: str, tmp_path: Path) -> None:
    value = "http://x:1" if flag == "--server-url" else "3"
    with pytest.raises(SpecsuiteError, match=f"--pytest-arg {flag}: specsuite run sets it"):
        sessions_config(cli_options(["run", f"--pytest-arg={flag}={value}"]))


def test_every_pytest_setting_can_travel_in_the_file() -> None:
    assert set(mapped_options()) | {"--specsuite-config"} == set(PYTEST_FLAGS)


def test_another_setting_beside_the_file_is_refused(tmp_path: Path) -> None:
    path = write_config_file(RunConfig(), tmp_path / "c.json")
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "suites"), "-p", "no:cacheprovider", "--specsuite-config", str(path),
                           "--alpha", "0.01"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    assert "ERROR: specsuite: --specsuite-config holds every setting of the session; --alpha cannot be given with it" in out
