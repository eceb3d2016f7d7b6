"""`specsuite run`'s main job as a named, typed profile: what its pytest sessions run (markers), how a reference
arm's run is split (parts), and the GSM8K settings every session gets, as the same `GSM8KSettings` a pytest session
builds from its options (specsuite/session/config.py), and the sizes of its lossless check (as the `--lossless-*`
options' values, which the parent applies before the user's --pytest-arg).

Why the main job runs a lossless check: it compares accept length, and a sampler that accepts drafts more often than
p/q allows raises it with no corruption sign.  Without a lossless test in both arms the A/B engine cannot tell that
from a better draft model (specsuite/analysis/verdicts.py `_guard_acceptance`: "unverified"); with one, the
over-accepting arm fails it where its baseline passes and its higher acceptance reads "worse".

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
    lossless_options: tuple[tuple[str, str | int], ...] = ()  # (--lossless-* flag, value as pytest parses it): its sizes


# The bug report's tables: correctness, GSM8K and the bench. GSM8K at T=0 (greedy, clean) and T=1 (sampled) on the bundled
# synthetic set; the main job split for the reference arms into about equal halves of its work.
# The lossless check: the sampled tests at T=1 (PIT, two-sample and log-likelihood against the speculation-off
# reference, the mode rate and the acceptance betting pooled over their draws); greedy equality is the lossless suite's.
# The embedded arms' reference is launched speculation-off (specsuite/families/lossless/reference.py); a candidate given
# with --baseline-url is compared with the baseline server (specsuite/orchestration/runner.py); a launched server of
# another model runs the PIT and the directed tests alone (they need no second server).  T=1 because the mode-rate
# test is exact there (the scoring is raw logprobs) and acceptance moves most at high temperature.  Sizes: the PIT at
# the suite's default (300 generations: at 900 it failed the correct fix arm once in 6 runs, p 3e-5), the two-sample
# draws at 4 x 600 (3x the default), so that the mode-rate test pools about 18,000 positions: there the reference
# server's --accept-inflation 1.25 arm fails it at alpha 0.001 in every measured run, at the suite's default sizes
# (about 9,000) in half of them (tools/calibration/README.md, "The main job's lossless check").
MAIN_LOSSLESS_MARKERS = "lossless and not greedy_equality"
MAIN = MainJobProfile("main", markers=f"correctness or gsm8k or perf or ({MAIN_LOSSLESS_MARKERS})",
                      parts=("correctness", "gsm8k or perf", MAIN_LOSSLESS_MARKERS),
                      gsm8k=GSM8KSettings(path="synthetic", num_questions=200, temperatures=(0.0, 1.0)),
                      lossless_options=(("--lossless-temperatures", "1.0"), ("--lossless-two-sample-size", 600)))
MAIN_JOB_PROFILES = {profile.name: profile for profile in (MAIN,)}
