"""A/B suite (`--baseline-url`): the candidate must not be worse than the baseline on any metric.

Both servers run the same cases with the same seeds; `specsuite.analysis.verdicts` applies the exact tests
(rate ratio for event rates, Mann-Whitney/Hodges-Lehmann for accept length) with Holm's correction
across the case's metrics, and "worse" needs significance and a practical effect (asv style).  A
"suspect" accept length (higher, in a candidate worse on invalid ids) is quoted with the failure.  A higher accept
length with no corruption sign reads "unverified" here: this session does not run the baseline's lossless tests, so
it cannot tell a better draft from a sampler that accepts too often (`specsuite run` runs both arms' and judges it);
it is printed, not failed.
"""

from __future__ import annotations

import pytest

from specsuite.analysis.verdicts import UNVERIFIED, compare_arms
from specsuite.results.builder import comparison_of
from specsuite.results.types import Case, Document, Repeat

pytestmark = pytest.mark.ab


def _as_merged(candidate: str, candidate_case: dict, baseline_case: dict) -> Document:
    return comparison_of({candidate: [Repeat(cases=[Case.from_dict(candidate_case)])],
                          "baseline": [Repeat(cases=[Case.from_dict(baseline_case)])]}, "baseline")


def test_not_worse_than_baseline(specsuite, sampling_case):
    if not specsuite.run_config.baseline_url:
        pytest.skip("no --baseline-url: nothing to compare against")
    candidate = specsuite.case_result(sampling_case).to_dict()
    baseline = specsuite.baseline_case_result(sampling_case).to_dict()
    analysis = compare_arms(_as_merged(specsuite.server.arm, candidate, baseline), alpha=specsuite.run_config.alpha)
    worse = [row for row in analysis.comparisons if row.verdict == "worse"]
    # A suspect row comes only with a worse one; it is quoted so the failure names the signature of corrupt draft probabilities.
    quoted = worse + [row for row in analysis.comparisons if row.verdict == "suspect"]
    lines = [f"{row.metric} {row.verdict}: {row.candidate_value} vs baseline {row.baseline_value} ({row.unit}), "
             f"effect {row.effect.name} {row.effect.value} CI {row.effect.ci}, p_adj={row.p_adjusted}, MDE {row.mde.to_dict()}"
             + (f" ({row.note})" if row.verdict == "suspect" else "")
             for row in quoted]
    for row in analysis.comparisons:
        if row.verdict == UNVERIFIED:
            print(f"{row.metric} unverified at {sampling_case.case_id}: {row.candidate_value} vs baseline {row.baseline_value} ({row.note})")
    assert not worse, f"worse than baseline at {sampling_case.case_id}: " + "; ".join(lines)
