"""The typed results model: a ``results.json`` as dataclasses, from the document down to one case.

Why dataclasses and not pydantic: the model has to load every file written since schema version 1
and write it back unchanged, including keys no class here names yet (writers add sections over
time). Plain dataclasses with an explicit ``from_dict``/``to_dict`` do that in a page of code, need
no new dependency, and import nothing of the rest of the project, so ``specsuite/reports/`` (which reads
results only) can read these types as well as ``specsuite/`` writes them.

How a record keeps what it does not know: ``from_dict`` fills the named fields and keeps every other
key in ``extra``, and remembers the key order it read; ``to_dict`` writes the keys back in that
order, then the named fields set since (those left at their empty default are not written), then
new ``extra`` keys. So ``Document.from_dict(d).to_dict() == d`` for any document, typed or not, and
a value of an unexpected shape (a list where a record was expected) is kept as it was, not lost.

The levels (the writers are named in specsuite.results.builder):

- `Document`: the header, ``arms`` (name -> `Arm`), the kernel suite's `KernelSection`, the A/B
  `Comparison` (``ab_compare``), the ``fail_on`` outcome and, from ``specsuite run``, what failed (`RunFailure`);
- `Arm`: one server (build) and its `Repeat` list; a `Repeat` is one session: its `Case` list,
  its `Workloads` (each workload family's raw data under its key: the family's records.py reads it typed,
  e.g. specsuite.families.gsm8k.records) and, from ``specsuite run``, its `JunitOutcome` (`FailedTest` per failed test);
- `Comparison`: `EstimateRow` per arm, metric and case; `ComparisonRow` per candidate, metric and case (its
  `Effect`, `Mde`, `ArmCounts`, `Equivalence` and `RankPair`); `SpreadEntry` per metric, case and arm;
  `FamilyFacts` per workload family (its verdict-line figures per arm and its `ReportSection`);
- typed views of sections the model keeps as dicts, for the readers that need a few of their fields:
  `ArmVocab`, `ArmIdentity`, `FailOnVerdict`;
- the history's trends.json (specsuite.history.analysis): `Trends`, its `TrendSeries`, `Trend` and `TrendStep`.

The number formats (`fmt`, `pct`, `fmt_p`, `case_title`) live here too: the report and the text the harness writes
into the analysis for it format numbers alike.

The modules: `record` (the Record base), `formatting`, `document` (document, arms, repeats, cases, workloads),
`comparison` (the A/B analysis's records), `kernel`, `identity` (the server sections read typed), `trends`; this
package re-exports every name, so a reader imports them from ``specsuite.results.types``.
"""

from __future__ import annotations

from specsuite.results.types.comparison import (
    ECDF,
    ESTIMATES_AGAINST_TEMPERATURE,
    ESTIMATES_PER_CASE,
    ArmCounts,
    Comparison,
    ComparisonRow,
    EcdfPanel,
    Effect,
    Equivalence,
    EstimateRow,
    FamilyFacts,
    FigureSpec,
    Mde,
    MetricFacts,
    RankPair,
    ReportSection,
    ReportTable,
    SpreadEntry,
)
from specsuite.results.types.document import (
    ANALYSIS_KEY,
    FAIL_ON_KEY,
    FALLBACK_COUNTER,
    NONFINITE_COUNTER,
    SCHEMA_VERSION,
    Acceptance,
    Arm,
    Case,
    Document,
    FailedTest,
    JunitOutcome,
    Repeat,
    RunFailure,
    Workloads,
    sampling_setting,
)
from specsuite.results.types.formatting import (
    NONE_IN_EITHER,
    case_title,
    fmt,
    fmt_p,
    pct,
)
from specsuite.results.types.identity import (
    REFERENCE_MARKER_KEY,
    ArmIdentity,
    ArmVocab,
    FailOnVerdict,
    HasIdentity,
    SamplerDescription,
    ServerArgs,
    ServerChoice,
    SpeculativeSettings,
)
from specsuite.results.types.kernel import (
    DistributionTest,
    InvariantOutcome,
    KernelDistribution,
    KernelSection,
    KernelTestStatistic,
    MonteCarloResolution,
)
from specsuite.results.types.record import (
    Record,
)
from specsuite.results.types.trends import (
    SeriesRun,
    StepEffect,
    Trend,
    TrendPoint,
    Trends,
    TrendSegment,
    TrendSeries,
    TrendStep,
    VersionChange,
)

__all__ = [
    "ANALYSIS_KEY",
    "Acceptance",
    "Arm",
    "ArmCounts",
    "ArmIdentity",
    "ArmVocab",
    "Case",
    "Comparison",
    "ComparisonRow",
    "DistributionTest",
    "Document",
    "ECDF",
    "ESTIMATES_AGAINST_TEMPERATURE",
    "ESTIMATES_PER_CASE",
    "EcdfPanel",
    "Effect",
    "Equivalence",
    "EstimateRow",
    "FAIL_ON_KEY",
    "FALLBACK_COUNTER",
    "FailOnVerdict",
    "FailedTest",
    "FamilyFacts",
    "FigureSpec",
    "HasIdentity",
    "InvariantOutcome",
    "JunitOutcome",
    "KernelDistribution",
    "KernelSection",
    "KernelTestStatistic",
    "Mde",
    "MetricFacts",
    "MonteCarloResolution",
    "NONE_IN_EITHER",
    "NONFINITE_COUNTER",
    "REFERENCE_MARKER_KEY",
    "RankPair",
    "Record",
    "Repeat",
    "ReportSection",
    "ReportTable",
    "RunFailure",
    "SCHEMA_VERSION",
    "SamplerDescription",
    "SeriesRun",
    "ServerArgs",
    "ServerChoice",
    "SpeculativeSettings",
    "SpreadEntry",
    "StepEffect",
    "Trend",
    "TrendPoint",
    "TrendSegment",
    "TrendSeries",
    "TrendStep",
    "Trends",
    "VersionChange",
    "Workloads",
    "case_title",
    "fmt",
    "fmt_p",
    "pct",
    "sampling_setting",
]
