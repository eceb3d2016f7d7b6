"""Nightly regression suite (`--results-db URL --compare-to last-good|RUN_ID`): tonight against the history.

Every sampling case tonight is compared with the same case of the baseline run taken from the
history (by default the newest run of this configuration and arm whose checks passed), with the
A/B suite's exact tests: the conditional rate-ratio test for the detectors' event rates and the
server's fallback and non-finite counters, Mann-Whitney with a Hodges-Lehmann shift for accept
length, Holm across the case's metrics.  A case fails when a metric is significantly AND
practically worse than the baseline; the failure names the metric, both values, the effect with
its interval and the adjusted p-value.  Skips (with the reason) without `--compare-to`, on the
first night of a configuration, or when the baseline never ran the case.
"""

from __future__ import annotations

import pytest

from specsuite.history import compare_case
from specsuite.results.types import Case, ComparisonRow, Effect

pytestmark = pytest.mark.ab


def _effect(row: ComparisonRow) -> str:
    effect = row.effect or Effect()
    value = "from zero" if effect.value is None else f"{effect.value:.3g}"
    low, high = (effect.ci or [None, None])
    return f"{effect.name} {value} (95% CI {low if low is None else f'{low:.3g}'} to {'inf' if high is None else f'{high:.3g}'})"


def test_not_worse_than_history_baseline(specsuite, history_baseline, sampling_case):
    if not history_baseline.case_runs(sampling_case.case_id):
        pytest.skip(f"baseline {history_baseline.describe()} did not run {sampling_case.case_id}")
    tonight = Case.from_dict(specsuite.case_result(sampling_case).to_dict())
    comparison = compare_case(history_baseline, tonight, alpha=specsuite.run_config.alpha)
    lines = [f"{row.label}: {row.candidate_value:.4g} tonight vs {row.baseline_value:.4g} ({row.unit}), {_effect(row)}, "
             f"{row.test}, p_adj={row.p_adjusted:.2e}" for row in comparison.worse]
    skipped = f" (not compared: {'; '.join(comparison.skipped)})" if comparison.skipped else ""
    regressed = bool(comparison.worse)
    assert not regressed, (f"worse than the history baseline {history_baseline.describe()} at {sampling_case.case_id}: "
                           + " | ".join(lines) + skipped)
