"""`specsuite run`'s main job as a named, typed profile: what its pytest sessions run (markers), how a reference
arm's run is split (parts), and the GSM8K settings every session gets, as the same `GSM8KSettings` a pytest session
builds from its options (harness/session/config.py).

Why a module of its own next to bench_profiles.py (not inside the option table): the option table declares flags and
their defaults; a profile is a set of values chosen for one job. The parent (`specsuite run`) hands the profile to its
child sessions as argv, and `session_argv` is the one renderer of that argv; tests/test_main_job_profile.py parses the
rendered argv through the real option table and `run_config_from_options` back into the same settings, so the parent
and the child cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.options import find_option
from harness.session.config import GSM8KSettings, option_values, table_default

# The GSM8K options the main job always states in argv, whatever the table's default (a session's results record the
# options it was given, so the job's data set, size and temperatures read from them); the others are written only
# where a profile differs from the option table's default.
PINNED = ("--gsm8k-path", "--gsm8k-num-questions", "--gsm8k-temperatures")


@dataclass(frozen=True)
class MainJobProfile:
    """One main job: its marker expression, the parts a reference arm's run is split into, and its GSM8K settings
    (the serving benchmark keeps the suite's own profile, harness/config/bench_profiles.py SUITE)."""

    name: str
    markers: str
    parts: tuple[str, ...]
    gsm8k: GSM8KSettings

    def session_argv(self) -> tuple[str, ...]:
        """The pytest options that give every session this profile's workload settings."""
        return gsm8k_argv(self.gsm8k)


def _number(value: float) -> str:
    """A temperature as the option parses it back to the same float: 0.0 as "0", 0.7 as "0.7"."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def gsm8k_argv(settings: GSM8KSettings) -> tuple[str, ...]:
    """GSM8K settings as pytest options, each under the flag its field is read from (harness/session/config.py): the
    PINNED ones always, the others where they differ from the table."""
    argv: list[str] = []
    for flag, value in option_values(settings).items():
        if flag not in PINNED and value == table_default(flag):
            continue
        if find_option(flag).action == "store_true":
            argv += [flag] if value else []
        elif isinstance(value, tuple):
            argv += [flag, ",".join(_number(item) for item in value)]
        else:
            argv += [flag, str(value)]
    return tuple(argv)


# The bug report's tables: correctness, GSM8K and the bench. GSM8K at T=0 (greedy, clean) and T=1 (sampled) on the bundled
# synthetic set; the main job split for the reference arms into about equal halves of its work.
MAIN = MainJobProfile("main", markers="correctness or gsm8k or perf", parts=("correctness", "gsm8k or perf"),
                      gsm8k=GSM8KSettings(path="synthetic", num_questions=200, temperatures=(0.0, 1.0)))
MAIN_JOB_PROFILES = {profile.name: profile for profile in (MAIN,)}
