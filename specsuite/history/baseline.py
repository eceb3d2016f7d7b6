"""The nightly baseline from history (`--compare-to last-good|RUN_ID`) and tonight's comparison with it.

`last-good` is the newest stored run of tonight's configuration (`config_key`) and arm whose
checks passed.  An explicit run id must have tonight's configuration too: otherwise the
comparison is refused, naming every field that differs.

Tonight's case is compared with the baseline's stored case by specsuite.analysis.verdicts.compare_arms,
the A/B suite's exact tests (rate-ratio test for event rates, Mann-Whitney / Hodges-Lehmann for
accept length, Holm across the case's metrics, verdicts that need significance AND a practical
effect).  A metric whose definition changed since the baseline was stored (its version differs)
is not compared, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specsuite.analysis.verdicts import compare_arms
from specsuite.errors import SpecsuiteError
from specsuite.history.metrics import METRIC_VERSIONS, MetricRecord
from specsuite.history.runs import RunRecord, config_differences
from specsuite.history.store import HistoryStore
from specsuite.results.builder import comparison_of
from specsuite.results.types import Arm, Case, ComparisonRow, Repeat

LAST_GOOD = "last-good"
TONIGHT = "tonight"
HISTORY = "history"


@dataclass
class HistoryBaseline:
    """A stored run chosen as tonight's baseline: its row, document and metrics."""

    run: RunRecord
    document: Arm  # the stored run's repeats
    metrics: list[MetricRecord]

    def describe(self) -> str:
        return f"run {self.run.id} ({self.run.label}, {self.run.started_utc}, {self.run.outcome})"

    def case_runs(self, case_id: str) -> list[Repeat]:
        """The baseline's repeats reduced to this case (empty when it never ran the case)."""
        repeats: list[Repeat] = []
        for repeat in self.document.repeats:
            cases = [case for case in repeat.cases if case.case_id == case_id]
            if cases:
                repeats.append(Repeat.written(repeat=repeat.repeat if repeat.has("repeat") else len(repeats) + 1, cases=cases))
        return repeats

    def stale_metrics(self) -> dict[str, int]:
        """{metric: stored version} for metrics whose definition changed since the baseline was stored."""
        return {m.name: m.version for m in self.metrics if METRIC_VERSIONS.get(m.name, m.version) != m.version}


@dataclass
class NightlyComparison:
    """Tonight's case against the baseline: every comparison row, the worse ones, and what was skipped."""

    rows: list[ComparisonRow]
    worse: list[ComparisonRow]
    skipped: list[str] = field(default_factory=list)


def parse_compare_to(text: str) -> str | int:
    """`last-good` or a run id."""
    if text == LAST_GOOD:
        return LAST_GOOD
    try:
        run_id = int(text)
    except ValueError:
        raise SpecsuiteError(f"--compare-to expects 'last-good' or a run id from the history, got {text!r}") from None
    if run_id < 1:
        raise SpecsuiteError(f"--compare-to run id must be positive, got {run_id}")
    return run_id


def resolve_baseline(store: HistoryStore, spec: str | int, *, config_key: str, config: dict[str, Any], arm: str) -> HistoryBaseline | None:
    """The baseline run for tonight, or None when `last-good` finds no passed run of this configuration."""
    if spec == LAST_GOOD:
        run = store.last_good(config_key, arm)
        if run is None:
            return None
    else:
        run = store.run(int(spec))
        if run.config_key != config_key:
            differences = "; ".join(config_differences(run.config, config)) or "fingerprints differ"
            raise SpecsuiteError(f"--compare-to {spec}: run {spec} measured another configuration, refusing to compare "
                                 f"(baseline vs tonight: {differences})")
    assert run.id is not None
    return HistoryBaseline(run, store.document(run.id), store.metrics_by_run([run.id])[run.id])


def compare_case(baseline: HistoryBaseline, tonight_case: Case, *, alpha: float) -> NightlyComparison:
    """Tonight's case against the same case in the baseline run."""
    case_id = tonight_case.case_id
    history_repeats = baseline.case_runs(case_id)
    if not history_repeats:
        raise SpecsuiteError(f"baseline {baseline.describe()} has no case {case_id}")
    merged = comparison_of({TONIGHT: [Repeat(cases=[tonight_case])], HISTORY: history_repeats}, HISTORY)
    stale = baseline.stale_metrics()
    skipped = [f"{name}: stored as version {version}, now version {METRIC_VERSIONS[name]}" for name, version in sorted(stale.items())]
    rows = [row for row in compare_arms(merged, alpha=alpha).comparisons if row.metric not in stale]
    return NightlyComparison(rows=rows, worse=[row for row in rows if row.verdict == "worse"], skipped=skipped)
