"""`compare_arms` returns the typed `Comparison`, typed down to each row's effect, MDE, counts, TOST
entry and rank pair and to the spread entries; its dict (what results.json holds under
``ab_compare``) round-trips unchanged and loads back to an equal, equally typed record.

Recorded file: `tests/data/ab_results/main_job_two_repeats.json.gz`: `specsuite run --repeats 2
--results-dir /tmp/tc_before --run-id fresh` of c71f08c (2026-12-05), the default reference arms
(nofix against fix); trimmed: the benchmark's per-request ITL lists (``itls``, ``itl_ms``) and the
``ab_compare``/``fail_on`` sections left out (recomputed here); nothing else changed.  Two repeats
per arm make the benchmark rows run-level: Welch + TOST (``equivalence``) and the rank pair (``rank``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from specsuite.analysis.verdicts import compare_arms
from specsuite.results.types import (
    ArmCounts,
    Comparison,
    ComparisonRow,
    Document,
    Effect,
    Equivalence,
    Mde,
    RankPair,
    SpreadEntry,
)

RECORDED = Path(__file__).parents[1] / "data" / "ab_results" / "main_job_two_repeats.json.gz"
RUN_LEVEL = ("itl_median", "output_throughput")


@pytest.fixture(scope="module")
def analysis() -> Comparison:
    return compare_arms(Document.from_dict(json.loads(gzip.decompress(RECORDED.read_bytes()))))


def loads_back(analysis: Comparison) -> bool:
    """Its dict round-trips unchanged AND loads back equal to it.  The second half is what sees a nested
    record left out of a NESTED map: the dict still round-trips, but loads as a dict, not equal to the record."""
    written = analysis.to_dict()
    loaded = Comparison.from_dict(written)
    return loaded.to_dict() == written and loaded == analysis


def test_compare_arms_is_typed_down_to_the_rank_pair(analysis: Comparison) -> None:
    assert isinstance(analysis, Comparison)
    run_level = [row for row in analysis.comparisons if row.metric in RUN_LEVEL]
    assert len(run_level) == 2
    for row in run_level:
        assert isinstance(row.n, ArmCounts) and (row.n.candidate, row.n.baseline, row.n.unit) == (2, 2, "repeats")
        assert isinstance(row.effect, Effect) and isinstance(row.mde, Mde)
        assert isinstance(row.equivalence, Equivalence) and row.equivalence.margin == row.threshold
        assert isinstance(row.rank, RankPair) and row.rank.test and row.rank.p_value is not None
    rates = [row for row in analysis.comparisons if row.events is not None]
    assert rates and all(isinstance(row.events, ArmCounts) for row in rates)
    entries = [entry for cases in analysis.repeat_spread.values() for arms in cases.values() for entry in arms.values()]
    assert entries and all(isinstance(entry, SpreadEntry) and len(entry.values) == 2 for entry in entries)
    left_untyped = {key for row in analysis.comparisons for key in row.extra}
    assert not left_untyped, f"keys the engine writes that ComparisonRow does not name: {left_untyped}"


def test_its_dict_round_trips_and_loads_back_typed(analysis: Comparison) -> None:
    written = analysis.to_dict()
    json.dumps(written, allow_nan=False)  # strict JSON, as results.json is written
    assert {"equivalence", "rank"} <= {key for row in written["comparisons"] if row["metric"] in RUN_LEVEL for key in row}
    assert Comparison.from_dict(written).to_dict() == written
    assert loads_back(analysis)


@pytest.mark.parametrize("record, name", [(ComparisonRow, "equivalence"), (ComparisonRow, "rank"), (ComparisonRow, "n"),
                                          (ComparisonRow, "events"), (ComparisonRow, "effect"), (ComparisonRow, "mde"),
                                          (Comparison, "repeat_spread"), (Comparison, "comparisons")])
def test_the_check_fails_when_a_nested_entry_is_dropped(analysis: Comparison, monkeypatch: pytest.MonkeyPatch,
                                                         record: type, name: str) -> None:
    monkeypatch.setattr(record, "NESTED", {key: spec for key, spec in record.NESTED.items() if key != name})
    written = analysis.to_dict()
    assert Comparison.from_dict(written).to_dict() == written  # the bytes alone do not show it
    assert not loads_back(analysis)


def test_a_spread_of_an_unexpected_shape_is_kept_as_written() -> None:
    odd = {"repeat_spread": {"itl_median": {"t=0-top_p=1": {"fix": [10.0, 10.2]}}}}  # an entry that is not an object
    loaded = Comparison.from_dict(odd)
    assert loaded.repeat_spread == {} and loaded.to_dict() == odd
    good = {"repeat_spread": {"itl_median": {"t=0-top_p=1": {"fix": {"values": [10.0, 10.2], "sd": 0.14}}}}}
    entry = Comparison.from_dict(good).repeat_spread["itl_median"]["t=0-top_p=1"]["fix"]
    assert isinstance(entry, SpreadEntry) and entry.values == [10.0, 10.2] and Comparison.from_dict(good).to_dict() == good
