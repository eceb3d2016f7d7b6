"""`specsuite run`'s main job as a named, typed profile: what its pytest sessions run (markers), how a reference
arm's run is split (parts), and the settings each workload family chooses for it (its `WorkloadFamily.main_job`: the
GSM8K data set and temperatures, the sizes of the lossless check), as option values the parent applies to the
RunConfig every session gets, before the user's --pytest-arg.

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

from dataclasses import dataclass, field
from typing import Any

from specsuite.families.registry import families
from specsuite.session.config import RunConfig, family_sections, with_options


def families_main_job() -> tuple[tuple[str, Any], ...]:
    """Every registered family's main-job option values, family by family."""
    return tuple(value for family in families() for value in family.main_job)


def _either(expressions: list[str]) -> str:
    """Marker expressions joined by `or`, each one of more than one word in parentheses."""
    return " or ".join(expression if " " not in expression else f"({expression})" for expression in expressions)


def families_main_job_markers() -> str:
    """The main job's marker expression: every registered family's `main_job_markers`, in registry order."""
    return _either([family.main_job_markers for family in families() if family.main_job_markers])


def families_main_job_parts() -> tuple[str, ...]:
    """The sessions a reference arm's main-job run is split into: one per `main_job_part`, its families' markers joined."""
    parts: dict[str, list[str]] = {}
    for family in families():
        if family.main_job_markers:
            parts.setdefault(family.main_job_part, []).append(family.main_job_markers)
    return tuple(_either(markers) if len(markers) > 1 else markers[0] for markers in parts.values())


@dataclass(frozen=True)
class MainJobProfile:
    """One main job: its marker expression, the parts a reference arm's run is split into, and the option values its
    families choose (the serving benchmark keeps the suite's own profile, specsuite/config/bench_profiles.py SUITE)."""

    name: str
    markers: str = field(default_factory=families_main_job_markers)
    parts: tuple[str, ...] = field(default_factory=families_main_job_parts)
    options: tuple[tuple[str, Any], ...] = field(default_factory=families_main_job)  # (pytest flag, value as pytest parses it)

    def applied_to(self, config: RunConfig) -> RunConfig:
        """`config` with the profile's settings (the user's --pytest-arg go on top)."""
        return with_options(config, dict(self.options))

    def settings(self, name: str) -> Any:
        """A family's settings section as the profile's sessions start with it (`MAIN.settings("gsm8k")`)."""
        return getattr(self.applied_to(RunConfig()), name)

    def __getattr__(self, name: str) -> Any:
        """A family's section by its name, as for RunConfig (`MAIN.gsm8k.temperatures`); only called for non-fields."""
        if name.startswith("_") or name not in family_sections():
            raise AttributeError(f"MainJobProfile has no attribute {name!r}")
        return self.settings(name)


# The bug report's tables: correctness, GSM8K and the bench. GSM8K at T=0 (greedy, clean) and T=1 (sampled) on the bundled
# synthetic set (specsuite/families/gsm8k/options.py MAIN_JOB); the main job split for the reference arms into parts of
# about equal work (each family's `main_job_part`).
# The lossless check (specsuite/families/lossless/options.py MAIN_JOB): the sampled tests at T=1 (PIT, two-sample and
# log-likelihood against the speculation-off reference, the mode rate and the acceptance betting pooled over their
# draws); greedy equality is the lossless suite's.
# The embedded arms' reference is launched speculation-off (specsuite/families/lossless/reference.py); a candidate given
# with --baseline-url is compared with the baseline server (specsuite/orchestration/runner.py); a launched server of
# another model runs the PIT and the directed tests alone (they need no second server).  T=1 because the mode-rate
# test is exact there (the scoring is raw logprobs) and acceptance moves most at high temperature.  Sizes: the PIT at
# the suite's default (300 generations: at 900 it failed the correct fix arm once in 6 runs, p 3e-5), the two-sample
# draws at 4 x 600 (3x the default), so that the mode-rate test pools about 18,000 positions: there the reference
# server's --accept-inflation 1.25 arm fails it at alpha 0.001 in every measured run, at the suite's default sizes
# (about 9,000) in half of them (tools/calibration/README.md, "The main job's lossless check").
MAIN = MainJobProfile("main")
MAIN_JOB_PROFILES = {profile.name: profile for profile in (MAIN,)}
