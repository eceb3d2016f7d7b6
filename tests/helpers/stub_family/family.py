"""The stub family's entry: one metric (answers with the fallback id, an event rate where lower is better) compared by
the exact conditional rate test, an arm's figures for its verdict line, a report section, and a nightly rule."""

from __future__ import annotations

from specsuite.compare.engines import compare_rate
from specsuite.compare.metric import Metric
from specsuite.families.workload_family import FamilyRecord, FamilyView, VerdictRule, WorkloadFamily, one_table_section, workloads_of
from specsuite.results.types import Repeat, ReportSection
from tests.helpers.stub_family.driver import FallbackTallyDriver
from tests.helpers.stub_family.options import OPTIONS, StubSettings
from tests.helpers.stub_family.records import RESULTS_KEY, FallbackTally

CASE = "T=1 answers"


def _records(repeat: Repeat) -> list[FamilyRecord]:
    written = workloads_of(repeat).part(RESULTS_KEY)
    return [FamilyRecord(CASE, None, None, FallbackTally.from_dict(written))] if isinstance(written, dict) else []


def _tally(view: FamilyView, arm: str) -> tuple[int, int]:
    runs = (view.cases.get(arm) or {}).get(CASE)
    tallies = [record for _, record in runs.runs] if runs is not None else []
    return sum(t.with_fallback for t in tallies), sum(t.answers for t in tallies)


def _state(view: FamilyView, arm: str) -> str:
    hits, answers = _tally(view, arm)
    return f"{hits} of {answers} answers hold the fallback id" if answers else ""


def _section(view: FamilyView) -> ReportSection | None:
    if not any(_tally(view, arm)[1] for arm in view.arm_order):
        return None
    cells = [f"{hits} of {answers}" for hits, answers in (_tally(view, arm) for arm in view.arm_order)]
    return one_table_section("Fallback answers", "Sampled answers (T=1) that hold the sampler's fallback id.",
                             view.table_header("case"), [[CASE, *cells, *view.verdict_cells(["stub_fallback_answers"], CASE)]])


METRIC = Metric("stub_fallback_answers", "answers with the fallback id", "per answer", "lower", 0.10, "ratio", "stub_rate", "stub",
                "events", lambda tally: (tally.with_fallback, float(tally.answers)) if tally.answers else None,
                "answers with the fallback id / answers", "plain", exposure_unit="answers", bad_events=True)

FAMILY = WorkloadFamily(
    name="stub", label="stub family", results_key=f"workloads.{RESULTS_KEY}", suite_module="test_stub", records=_records,
    metrics=(METRIC,), verdict_rules=(VerdictRule("stub_rate", "the exact conditional rate-ratio test", compare_rate),),
    state=_state, section=_section,
    options=OPTIONS, settings=StubSettings, nightly_gate=("stub_fallback_answers:worse",),
    driver=FallbackTallyDriver, marker=("stub", "the stub family's check"),
)
