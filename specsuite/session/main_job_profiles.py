"""`specsuite run`'s main job as a named, typed profile: what its pytest sessions run (markers), how a reference
arm's run is split (parts), and the GSM8K settings every session gets, as the same `GSM8KSettings` a pytest session
builds from its options (specsuite/session/config.py).

Why a module of its own (not inside the option table): the option table declares flags and their defaults; a profile
is a set of values chosen for one job. The parent (`specsuite run`) puts the profile's settings in the RunConfig it
hands every child session as a file (specsuite/session/config_file.py), so the child reads the very values the profile
holds; tests/session/test_main_job_profile.py checks that round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.session.config import GSM8KSettings


@dataclass(frozen=True)
class MainJobProfile:
    """One main job: its marker expression, the parts a reference arm's run is split into, and its GSM8K settings
    (the serving benchmark keeps the suite's own profile, specsuite/config/bench_profiles.py SUITE)."""

    name: str
    markers: str
    parts: tuple[str, ...]
    gsm8k: GSM8KSettings


# The bug report's tables: correctness, GSM8K and the bench. GSM8K at T=0 (greedy, clean) and T=1 (sampled) on the bundled
# synthetic set; the main job split for the reference arms into about equal halves of its work.
MAIN = MainJobProfile("main", markers="correctness or gsm8k or perf", parts=("correctness", "gsm8k or perf"),
                      gsm8k=GSM8KSettings(path="synthetic", num_questions=200, temperatures=(0.0, 1.0)))
MAIN_JOB_PROFILES = {profile.name: profile for profile in (MAIN,)}
