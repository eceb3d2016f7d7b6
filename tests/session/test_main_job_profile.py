"""The main job's profile (specsuite/session/main_job_profiles.py) reaches every child session of `specsuite run` as the
profile's own GSM8K settings: the parent puts them in the RunConfig it writes for each session, and the child reads
that file back into the same settings, so the parent and the child sessions cannot drift apart."""

from __future__ import annotations

import dataclasses

import pytest

from specsuite.cli.run import sessions_config
from specsuite.families.gsm8k.options import Gsm8kSettings
from specsuite.session.config_file import config_from_json, config_to_json
from specsuite.session.main_job_profiles import MAIN, MAIN_JOB_PROFILES
from tests.session.test_session_config import cli_options


def sessions_gsm8k(*run_argv: str) -> Gsm8kSettings:
    """What a child session of `specsuite run RUN_ARGV` reads back from its settings file."""
    config, _ = sessions_config(cli_options(["run", *run_argv]))
    return config_from_json(config_to_json(config)).gsm8k


@pytest.mark.parametrize("profile", list(MAIN_JOB_PROFILES.values()), ids=list(MAIN_JOB_PROFILES))
def test_every_session_reads_back_the_profiles_settings(profile) -> None:
    assert sessions_gsm8k() == profile.settings("gsm8k")


def test_every_setting_round_trips_also_off_its_default() -> None:
    changed = Gsm8kSettings(path="/data/gsm8k.jsonl", num_questions=13, num_shots=2, parallel=3, shots_from_eval=True,
                            temperatures=(0.0, 0.7, 1.25), min_accuracy=0.5, max_invalid=0.25)
    config, _ = sessions_config(cli_options(["run"]))
    assert config_from_json(config_to_json(dataclasses.replace(config, gsm8k=changed))).gsm8k == changed


def test_a_pytest_arg_wins_over_the_profile() -> None:
    assert sessions_gsm8k("--pytest-arg=--gsm8k-num-questions=5").num_questions == 5
    assert sessions_gsm8k("--pytest-arg=--gsm8k-num-questions=5") == dataclasses.replace(MAIN.settings("gsm8k"), num_questions=5)


def test_the_main_job() -> None:
    assert MAIN.settings("gsm8k") == Gsm8kSettings(path="synthetic", num_questions=200, temperatures=(0.0, 1.0))
    assert MAIN.parts == ("correctness", "gsm8k or perf", "lossless and not greedy_equality")
    assert MAIN.markers == "correctness or gsm8k or perf or (lossless and not greedy_equality)"


def test_the_main_job_runs_its_lossless_check_at_t1_unless_a_pytest_arg_says_otherwise() -> None:
    config, _ = sessions_config(cli_options(["run"]))
    lossless = config_from_json(config_to_json(config)).lossless
    assert [setting.key for setting in lossless.settings] == ["t=1-top_p=1"] and lossless.two_sample_size == 600
    config, _ = sessions_config(cli_options(["run", "--pytest-arg=--lossless-temperatures=0.7:0.9"]))
    assert [setting.key for setting in config.lossless.settings] == ["t=0.7-top_p=0.9"]
