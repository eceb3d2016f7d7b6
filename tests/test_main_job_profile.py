"""The main job's profile (harness/config/main_job_profiles.py): the argv `specsuite run` gives its sessions parses,
through the real option table and `run_config_from_options`, back into the profile's own GSM8K settings, so the
parent and the child sessions cannot drift apart."""

from __future__ import annotations

import dataclasses

import pytest

from harness.config.main_job_profiles import MAIN, MAIN_JOB_PROFILES, gsm8k_argv
from harness.session.config import GSM8KSettings, run_config_from_options
from tests.test_session_config import cli_options, getter, pytest_options


def session_gsm8k(argv: tuple[str, ...]) -> GSM8KSettings:
    """What a child pytest session builds from these options (every suites plugin's declarations)."""
    return run_config_from_options(getter(pytest_options(list(argv))), front_end="pytest").gsm8k


@pytest.mark.parametrize("profile", list(MAIN_JOB_PROFILES.values()), ids=list(MAIN_JOB_PROFILES))
def test_the_rendered_argv_parses_back_into_the_profiles_settings(profile) -> None:
    assert session_gsm8k(profile.session_argv()) == profile.gsm8k


def test_the_cli_reads_the_same_argv_into_the_same_settings() -> None:
    from_cli = run_config_from_options(getter(cli_options(["gsm8k", *MAIN.session_argv()])), front_end="gsm8k").gsm8k
    assert from_cli == MAIN.gsm8k


def test_every_setting_round_trips_also_off_its_default() -> None:
    changed = GSM8KSettings(path="/data/gsm8k.jsonl", num_questions=13, num_shots=2, parallel=3, shots_from_eval=True,
                            temperatures=(0.0, 0.7, 1.25), min_accuracy=0.5, max_invalid=0.25)
    argv = gsm8k_argv(changed)
    assert session_gsm8k(argv) == changed
    assert {"--gsm8k-num-shots", "--gsm8k-parallel", "--gsm8k-shots-from-eval", "--gsm8k-min-accuracy", "--gsm8k-max-invalid"} <= set(argv)


def test_the_round_trip_is_not_vacuous() -> None:
    """A session given a different argv builds different settings, field by field."""
    for name, value in (("num_questions", 199), ("temperatures", (0.0,)), ("path", "hf"), ("num_shots", 4), ("parallel", 1),
                        ("shots_from_eval", True), ("min_accuracy", 0.75), ("max_invalid", 0.1)):
        other = dataclasses.replace(MAIN.gsm8k, **{name: value})
        assert session_gsm8k(gsm8k_argv(other)) == other != MAIN.gsm8k


def test_the_main_jobs_argv_is_what_sessions_have_always_been_given() -> None:
    """Recorded results hold this argv (results.json `pytest_options`): rendering it must not change it."""
    assert MAIN.session_argv() == ("--gsm8k-path", "synthetic", "--gsm8k-num-questions", "200", "--gsm8k-temperatures", "0,1")
    assert MAIN.parts == ("correctness", "gsm8k or perf") and MAIN.markers == "correctness or gsm8k or perf"
