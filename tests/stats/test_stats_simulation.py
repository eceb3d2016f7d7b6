"""Simulations under the null: every test the suites use keeps its type-I error near alpha.

Each test simulates data with no true difference (or, for equivalence, a true difference
exactly on the margin), runs the public specsuite.stats function, and asserts that the
rejection (or non-coverage) rate at alpha = 0.05 lies in [0.03, 0.07]. Seeds are fixed.
Exact tests on counts are conservative when counts are small; the regimes below are chosen
so that each arm expects about a hundred events or more, as in a real nightly run, where
that discreteness costs little. Each test also reports power at a stated effect (printed
with `pytest -s`, and stored with record_property for JUnit XML); where the effect is the
package's own minimum detectable effect, power is also asserted near the nominal 0.8.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from specsuite.stats import (
    bootstrap_median_diff_ci,
    fisher_exact_2x2,
    hodges_lehmann,
    mann_whitney,
    mcnemar_exact,
    mde_rate_ratio,
    mde_two_proportions,
    rate_ratio_test,
    repeats_needed_for_mde,
    tost_equivalence,
    tost_proportions,
    welch_ttest,
)

pytestmark = pytest.mark.slow  # about 40 s in all on 2 cores

ALPHA = 0.05
SIZE_BAND = (0.03, 0.07)
# Power at the package's own MDE (normal approximations) should land near the 0.8 asked for.
MDE_POWER_BAND = (0.70, 0.88)


def _report(record_property: Callable[[str, object], None], name: str, value: float) -> None:
    record_property(name, round(value, 4))
    print(f"\n{name} = {value:.3f}")


def _p_values_by_unique_row(rows: np.ndarray, p_value: Callable[..., float]) -> np.ndarray:
    """p_value(*row) for every row, computed once per distinct row.

    The functions are pure and discrete data repeat the same tables many times, so this
    keeps thousands of exact tests affordable without bypassing the public function.
    """
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    values = np.array([p_value(*(int(v) for v in row)) for row in unique])
    return values[inverse.ravel()]


def test_rate_ratio_test_size_and_power(record_property) -> None:
    """Regime: stray-token-like rate 5e-3 per token, 20k vs 30k generated tokens (~100 vs ~150 events)."""
    rng = np.random.default_rng(20240601)
    e1, e2, rate = 2e4, 3e4, 5e-3

    def p_value(k1: int, k2: int) -> float:
        return rate_ratio_test(k1, e1, k2, e2).p_value

    null = np.column_stack([rng.poisson(rate * e1, 2000), rng.poisson(rate * e2, 2000)])
    size = float(np.mean(_p_values_by_unique_row(null, p_value) < ALPHA))
    _report(record_property, "rate_ratio_size", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    ratio = mde_rate_ratio(e1, e2, rate)
    alt = np.column_stack([rng.poisson(ratio * rate * e1, 1000), rng.poisson(rate * e2, 1000)])
    power = float(np.mean(_p_values_by_unique_row(alt, p_value) < ALPHA))
    _report(record_property, f"rate_ratio_power_at_mde_ratio_{ratio:.3f}", power)
    assert MDE_POWER_BAND[0] <= power <= MDE_POWER_BAND[1]


def test_fisher_exact_size_and_power(record_property) -> None:
    """Regime: 400 prompts per arm, 25% of them showing the event (~100 events per arm)."""
    rng = np.random.default_rng(20240602)
    n, base = 400, 0.25

    def p_value(a: int, b: int) -> float:
        return fisher_exact_2x2(a, n, b, n, odds_ratio_ci=False).p_value

    null = np.column_stack([rng.binomial(n, base, 1500), rng.binomial(n, base, 1500)])
    size = float(np.mean(_p_values_by_unique_row(null, p_value) < ALPHA))
    _report(record_property, "fisher_size", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    delta = mde_two_proportions(n, n, base)
    alt = np.column_stack([rng.binomial(n, base + delta, 800), rng.binomial(n, base, 800)])
    power = float(np.mean(_p_values_by_unique_row(alt, p_value) < ALPHA))
    _report(record_property, f"fisher_power_at_mde_{delta:.3f}", power)
    assert MDE_POWER_BAND[0] <= power <= MDE_POWER_BAND[1]


def test_mcnemar_exact_size_and_power(record_property) -> None:
    """Regime: 1000 paired questions, 15% won only by A and 15% only by B (~300 discordant)."""
    rng = np.random.default_rng(20240603)
    n_pairs = 1000

    def p_value(b: int, c: int) -> float:
        return mcnemar_exact(b, c, n_pairs).p_value

    null = rng.multinomial(n_pairs, [0.15, 0.15, 0.70], 2500)[:, :2]
    size = float(np.mean(_p_values_by_unique_row(null, p_value) < ALPHA))
    _report(record_property, "mcnemar_size", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    alt = rng.multinomial(n_pairs, [0.17, 0.13, 0.70], 800)[:, :2]
    power = float(np.mean(_p_values_by_unique_row(alt, p_value) < ALPHA))
    _report(record_property, "mcnemar_power_at_accuracy_diff_0.04", power)


def test_mann_whitney_size_and_power(record_property) -> None:
    """Regime: 40 vs 40 log-normal latencies (sigma 0.5), continuous so no ties."""
    rng = np.random.default_rng(20240604)
    a, b = rng.lognormal(0.0, 0.5, (1500, 40)), rng.lognormal(0.0, 0.5, (1500, 40))
    size = float(np.mean([mann_whitney(x, y).p_value < ALPHA for x, y in zip(a, b, strict=True)]))
    _report(record_property, "mann_whitney_size", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    a, b = rng.lognormal(np.log(1.2), 0.5, (500, 40)), rng.lognormal(0.0, 0.5, (500, 40))
    power = float(np.mean([mann_whitney(x, y).p_value < ALPHA for x, y in zip(a, b, strict=True)]))
    _report(record_property, "mann_whitney_power_at_ratio_1.2", power)


def test_bootstrap_median_diff_coverage_and_power(record_property) -> None:
    """Regime: 100 vs 100 log-normal latencies (sigma 0.5), 499 percentile resamples per interval.

    The percentile interval for a median is a little conservative at small n (non-coverage
    about 0.036 at 60 per arm, 0.045 at 100 in a 3000-run pilot), hence 100 per arm.
    """
    rng = np.random.default_rng(20240605)
    a, b = rng.lognormal(0.0, 0.5, (1000, 100)), rng.lognormal(0.0, 0.5, (1000, 100))
    cis = [bootstrap_median_diff_ci(x, y, n_resamples=499, seed=i).ci for i, (x, y) in enumerate(zip(a, b, strict=True))]
    miss = float(np.mean([not (low <= 0.0 <= high) for low, high in cis]))
    _report(record_property, "bootstrap_median_noncoverage", miss)
    assert SIZE_BAND[0] <= miss <= SIZE_BAND[1]

    a, b = rng.lognormal(np.log(1.25), 0.5, (300, 100)), rng.lognormal(0.0, 0.5, (300, 100))
    cis = [bootstrap_median_diff_ci(x, y, n_resamples=499, seed=i).ci for i, (x, y) in enumerate(zip(a, b, strict=True))]
    power = float(np.mean([low > 0.0 or high < 0.0 for low, high in cis]))
    _report(record_property, "bootstrap_median_power_at_ratio_1.25", power)


def test_hodges_lehmann_coverage_and_power(record_property) -> None:
    """Regime: shift model, 40 vs 40 skewed (log-normal) values, true shift 0.3; exact U quantiles."""
    rng = np.random.default_rng(20240606)
    shift = 0.3
    a = rng.lognormal(0.0, 0.5, (3000, 40)) + shift
    b = rng.lognormal(0.0, 0.5, (3000, 40))
    cis = [hodges_lehmann(x, y).ci for x, y in zip(a, b, strict=True)]
    miss = float(np.mean([not (low <= shift <= high) for low, high in cis]))
    _report(record_property, "hodges_lehmann_noncoverage", miss)
    assert SIZE_BAND[0] <= miss <= SIZE_BAND[1]
    power = float(np.mean([low > 0.0 for low, _ in cis]))
    _report(record_property, "hodges_lehmann_power_at_shift_0.3", power)


@pytest.mark.parametrize("boundary", ["upper", "lower"])
def test_tost_size_at_margin_and_power(record_property, boundary: str) -> None:
    """Regime: 20 vs 20 run-level values with 2% spread; the true ratio sits exactly on the ±5% margin."""
    rng = np.random.default_rng(20240607)
    margin, spread = 0.05, 0.02
    true_log_ratio = np.log1p(margin) if boundary == "upper" else -np.log1p(margin)
    a = rng.lognormal(true_log_ratio, spread, (4000, 20))
    b = rng.lognormal(0.0, spread, (4000, 20))
    size = float(np.mean([tost_equivalence(x, y, margin).equivalent for x, y in zip(a, b, strict=True)]))
    _report(record_property, f"tost_size_at_{boundary}_margin", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    # Power where the true ratio is halfway to the margin (+2.5% or -2.5%).
    a = rng.lognormal(true_log_ratio / 2, spread, (500, 20))
    b = rng.lognormal(0.0, spread, (500, 20))
    power = float(np.mean([tost_equivalence(x, y, margin).equivalent for x, y in zip(a, b, strict=True)]))
    _report(record_property, f"tost_power_at_half_{boundary}_margin", power)


def test_tost_proportions_size_at_margin_and_power(record_property) -> None:
    """Regime: 3000 trials per arm at 30%, true difference exactly on the 3-point margin."""
    rng = np.random.default_rng(20240608)
    n, base, margin = 3000, 0.30, 0.03

    def p_value(a: int, b: int) -> float:
        return tost_proportions(a, n, b, n, margin).p_value

    at_margin = np.column_stack([rng.binomial(n, base + margin, 3000), rng.binomial(n, base, 3000)])
    size = float(np.mean(_p_values_by_unique_row(at_margin, p_value) < ALPHA))
    _report(record_property, "tost_proportions_size_at_margin", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    equal = np.column_stack([rng.binomial(n, base, 1000), rng.binomial(n, base, 1000)])
    power = float(np.mean(_p_values_by_unique_row(equal, p_value) < ALPHA))
    _report(record_property, "tost_proportions_power_at_equal_rates", power)


def test_welch_size_and_power_at_repeats_needed(record_property) -> None:
    """Regime: run-level values, normal between-run noise; repeats from repeats_needed_for_mde."""
    rng = np.random.default_rng(20240609)
    sd, effect = 1.0, 0.8
    n = repeats_needed_for_mde(sd, effect)
    a, b = rng.normal(0.0, sd, (1000, n)), rng.normal(0.0, sd, (1000, n))
    size = float(np.mean([welch_ttest(x, y).p_value < ALPHA for x, y in zip(a, b, strict=True)]))
    _report(record_property, "welch_size", size)
    assert SIZE_BAND[0] <= size <= SIZE_BAND[1]

    a = rng.normal(effect, sd, (800, n))
    b = rng.normal(0.0, sd, (800, n))
    power = float(np.mean([welch_ttest(x, y).p_value < ALPHA for x, y in zip(a, b, strict=True)]))
    _report(record_property, f"welch_power_at_{n}_repeats", power)
    assert MDE_POWER_BAND[0] <= power <= MDE_POWER_BAND[1]
