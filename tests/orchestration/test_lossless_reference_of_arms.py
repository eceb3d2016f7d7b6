"""Which speculation-off reference each session of `specsuite run` gives its lossless tests: a candidate given by URL
is compared with the baseline server given by URL (it is up while the candidate runs, whatever the schedule); the
baseline itself, launched baselines and a --lossless-reference-url of the user's keep the suite's own choice."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specsuite.orchestration.arms import ArmSpec
from specsuite.orchestration.runner import RunPlan, SessionSpec
from specsuite.session.config import RunConfig

CANDIDATE = ArmSpec("candidate", url="http://candidate:30000")
BASELINE = ArmSpec("baseline", url="http://nightly:30000")
LAUNCHED = ArmSpec("last_good", launch="python -m sglang.launch_server --port 30001")


def reference_of(arm: ArmSpec, arms: list[ArmSpec], config: RunConfig | None = None) -> str | None:
    plan = RunPlan(arms=arms, repeats=1, seed=0, markers="lossless", pytest_options=[], config=config or RunConfig())
    return plan.session_config(SessionSpec(arm, 1, "lossless"), Path("/tmp/sessions")).lossless.reference_url


def test_a_candidate_is_compared_with_the_baseline_server_given_by_url() -> None:
    assert reference_of(CANDIDATE, [CANDIDATE, BASELINE]) == BASELINE.url
    assert reference_of(BASELINE, [CANDIDATE, BASELINE]) is None  # its own: the suite's choice


def test_a_launched_baseline_or_the_users_reference_keep_the_suites_choice() -> None:
    assert reference_of(CANDIDATE, [CANDIDATE, LAUNCHED]) is None  # not up while the candidate runs one at a time
    given = RunConfig()
    given = replace(given, lossless=replace(given.lossless, reference_url="http://spec-off:30000"))
    assert reference_of(CANDIDATE, [CANDIDATE, BASELINE], given) == "http://spec-off:30000"
