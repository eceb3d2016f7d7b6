"""pytest fixtures of the serving-benchmark suite (suites/test_serving_bench.py); its `--bench-*`
options are declared in specsuite/session/option_table.py.

The benchmark runs once per session against the server under test (results also appended to
`arms/<arm>/bench.jsonl` and stored as `workloads["bench"]`). With `--baseline-url` (the same
server the ab suite compares against; `--bench-baseline-url` is an alias) it also
runs on the baseline, interleaving repeats (candidate, baseline, candidate, ...), compares the
run-level values with the A/B engine of `specsuite run` (specsuite.analysis.verdicts.compare_arms:
Welch and TOST within `--bench-margin`, the rank-based pair beside them) and applies the fail-on
rules for the bench metrics to those same rows: `--bench-fail-on` (default `itl_median:+1%`).
(pytest has no `--fail-on` option; that one belongs to `specsuite run`, which applies its rules to
the merged results itself.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.records import BenchSummary
from specsuite.results.types import ComparisonRow
from specsuite.session.option_table import add_pytest_options

if TYPE_CHECKING:  # the A/B engine loads scipy: imported when a benchmark runs, not when the plugin loads
    from specsuite.analysis.fail_on import FailOnOutcome

BENCH_FAIL_ON_METRICS = ("itl_median", "output_throughput")
# Run-summary fields compared beside the registry's bench metrics, for information (no rule reads them).
INFORMATIONAL_FIELDS = ("median_tpot_ms",)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "bench")  # the --bench-* options (specsuite/session/option_table.py)


@dataclass
class BenchSuiteState:
    """The session's benchmark runs: the server under test's, and the baseline's when there is one."""

    candidate: list[BenchSummary] = field(default_factory=list)
    baseline: list[BenchSummary] = field(default_factory=list)
    baseline_url: str | None = None
    comparison: dict[str, Any] | None = None  # as results.json stores it (workloads.bench_ab)
    rows: list[ComparisonRow] = field(default_factory=list)  # the typed rows the rules read, then the informational ones
    outcome: FailOnOutcome | None = None  # the --bench-fail-on rules on those rows


def _run(specsuite, base_url: str | None, arm: str, lengths_of: BenchSummary | None = None) -> BenchSummary:
    """One benchmark run through the family's one driver (run_serving_benchmark, `specsuite bench`'s too),
    profile "suite", from the run configuration's bench section; `base_url` None: the session's own server.
    `lengths_of`: an earlier run whose lengths (fitted to its server's context length) this one must send as they
    are, so that the arms compared ask for the same requests (a server they do not fit refuses in one line)."""
    from specsuite.families.bench.record import session_summary
    from specsuite.orchestration.serving_benchmark import run_serving_benchmark
    from specsuite.session.bench import SUITE, chosen_from_pytest

    chosen = chosen_from_pytest(specsuite.run_config)
    if lengths_of is not None:
        chosen.update(random_input_len=lengths_of.random_input_len, random_output_len=lengths_of.random_output_len, lengths_chosen=True)
    output = specsuite.run_dir.arm_dir(arm) / "bench.jsonl"
    record = run_serving_benchmark(specsuite.core, chosen, SUITE, output_file=str(output),
                                   base_url=base_url, echo=lambda line: print(f"specsuite bench: {line}"))
    return session_summary(record, seed=specsuite.run_config.seed)


def _values(runs: list[BenchSummary], field_name: str) -> list[float]:
    """One named summary field of every run that has a value for it."""
    return [value for run in runs if (value := getattr(run, field_name))]


@pytest.fixture(scope="session")
def bench_state(specsuite) -> BenchSuiteState:
    """Run the benchmark (and the baseline's interleaved repeats) once per session."""
    from specsuite.analysis.fail_on import evaluate_fail_on, parse_fail_on
    from specsuite.analysis.metrics import bench_results_document
    from specsuite.analysis.verdicts import compare_arms, compare_run_values

    settings = specsuite.run_config.bench
    state = BenchSuiteState(baseline_url=specsuite.run_config.baseline_url)  # --bench-baseline-url is its old alias
    arm = specsuite.server.arm
    try:
        rules = parse_fail_on(settings.fail_on_rules) if state.baseline_url else []  # an empty --bench-fail-on: the default
        state.candidate.append(_run(specsuite, None, arm))
        specsuite.workloads["bench"] = state.candidate[0].to_dict()
        specsuite.write_results("running")
        if not state.baseline_url:
            return state
        repeats = settings.repeats  # at least 1: range-checked at session start (their Option.bounds)
        for number in range(repeats):
            state.baseline.append(_run(specsuite, state.baseline_url, "bench-baseline", lengths_of=state.candidate[0]))
            if number + 1 < repeats:
                state.candidate.append(_run(specsuite, None, arm, lengths_of=state.candidate[0]))
        margin = settings.margin
        # The A/B engine reads the runs as results.json holds them (workloads.bench of one repeat each).
        document = bench_results_document({arm: [run.to_dict() for run in state.candidate],
                                           "bench-baseline": [run.to_dict() for run in state.baseline]}, baseline="bench-baseline")
        shared = compare_arms(document, thresholds={"itl_median": margin, "output_throughput": margin})
        ruled = [row for row in shared.comparisons if row.metric in BENCH_FAIL_ON_METRICS]
        informational = [compare_run_values(_values(state.candidate, key), _values(state.baseline, key), metric=key, threshold=margin,
                                            higher_is_better=False) for key in INFORMATIONAL_FIELDS]
        state.rows, state.outcome = ruled + informational, evaluate_fail_on(rules, shared)
        state.comparison = {
            "baseline_url": state.baseline_url,
            "margin": margin,
            "comparisons": [row.to_dict() for row in ruled],
            "informational": [row.to_dict() for row in informational],
            "fail_on": state.outcome.to_dict() | {"rules": [r.text for r in rules]},
            "baseline_runs": [run.scalars() for run in state.baseline],
            "candidate_runs": [run.scalars() for run in state.candidate],
        }
        specsuite.workloads["bench_ab"] = state.comparison
        specsuite.write_results("running")
    except SpecsuiteError as exc:
        pytest.fail(f"serving benchmark: {exc}", pytrace=False)
    return state
