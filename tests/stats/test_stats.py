"""Known-value tests for specsuite.stats: textbook numbers, closed forms and scipy cross-checks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from specsuite.errors import SpecsuiteError
from specsuite.stats import (
    StatsInputError,
    benjamini_hochberg,
    bootstrap_median_diff_ci,
    clopper_pearson,
    clopper_pearson_upper,
    family_budget,
    fisher_exact_2x2,
    hodges_lehmann,
    holm,
    mann_whitney,
    mcnemar_exact,
    mcnemar_from_pairs,
    mde_mean_diff,
    mde_rate_ratio,
    mde_two_proportions,
    newcombe_difference_interval,
    proportion_estimate,
    rate_ratio_test,
    relative_median_diff_ci,
    repeats_needed_for_mde,
    run_level_medians,
    tost_equivalence,
    tost_proportions,
    verdict,
    welch_ttest,
    wilson_interval,
)
from specsuite.stats.latency import MAX_PAIRWISE_DIFFERENCES

Z95 = 1.959963984540054


# --- one proportion ---------------------------------------------------------------------


def test_clopper_pearson_upper_zero_events_closed_form() -> None:
    assert clopper_pearson_upper(0, 10) == pytest.approx(1 - 0.05 ** (1 / 10), abs=1e-12)
    assert clopper_pearson_upper(0, 10) == pytest.approx(0.2589, abs=1e-4)


def test_clopper_pearson_upper_suite_example() -> None:
    # "0 of 3437, 95% upper bound 0.087%"
    assert round(100 * clopper_pearson_upper(0, 3437), 3) == 0.087


def test_clopper_pearson_textbook_interval() -> None:
    low, high = clopper_pearson(5, 10)
    assert (low, high) == pytest.approx((0.1871, 0.8129), abs=1e-4)


@pytest.mark.parametrize("k,n", [(0, 1), (0, 25), (3, 17), (12, 40), (40, 40), (1, 1000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_clopper_pearson_matches_scipy_exact(k: int, n: int, confidence: float) -> None:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    assert clopper_pearson(k, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-10)


def test_clopper_pearson_edges() -> None:
    assert clopper_pearson(0, 10)[0] == 0.0
    assert clopper_pearson(10, 10)[1] == 1.0
    # k = n: lower bound solves p^n = alpha/2
    assert clopper_pearson(10, 10)[0] == pytest.approx(0.025 ** (1 / 10), abs=1e-12)
    assert clopper_pearson_upper(10, 10) == 1.0
    # one-sided upper bound: P(X <= k | p = bound) = 1 - confidence
    bound = clopper_pearson_upper(4, 50, 0.9)
    assert stats.binom.cdf(4, 50, bound) == pytest.approx(0.1, abs=1e-10)


def test_wilson_textbook_and_scipy() -> None:
    assert wilson_interval(3, 10) == pytest.approx((0.1078, 0.6032), abs=1e-4)
    for k, n in [(0, 10), (7, 9), (50, 200)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="wilson")
        assert wilson_interval(k, n, 0.9) == pytest.approx((ci.low, ci.high), abs=1e-10)


@pytest.mark.parametrize(
    "call",
    [
        lambda: clopper_pearson(0, 0),
        lambda: clopper_pearson_upper(0, 0),
        lambda: clopper_pearson(11, 10),
        lambda: clopper_pearson(-1, 10),
        lambda: clopper_pearson(2.5, 10),
        lambda: clopper_pearson(1, 10, confidence=1.0),
        lambda: proportion_estimate(0, 0),
    ],
)
def test_bad_proportion_input_raises_one_clear_line(call) -> None:
    with pytest.raises(StatsInputError) as info:
        call()
    assert isinstance(info.value, SpecsuiteError) and isinstance(info.value, ValueError)
    assert "\n" not in str(info.value) and str(info.value)


def test_zero_trials_message_names_the_problem() -> None:
    with pytest.raises(StatsInputError, match="n=0 trials"):
        clopper_pearson(0, 0)


def test_proportion_estimate_bundles_both_bounds() -> None:
    est = proportion_estimate(0, 3437)
    assert est.proportion == 0.0
    assert est.ci == clopper_pearson(0, 3437)
    assert est.upper_bound == clopper_pearson_upper(0, 3437)
    assert est.upper_bound < est.ci[1]  # one-sided 95% is tighter than two-sided 95%


# --- difference of two proportions (Newcombe 1998, Table II, method 10) --------------------


@pytest.mark.parametrize(
    "counts,expected",
    [
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((6, 7, 2, 7), (0.0582, 0.8062)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
        ((0, 10, 0, 10), (-0.2775, 0.2775)),
        ((10, 10, 0, 20), (0.6791, 1.0)),
        ((10, 10, 0, 10), (0.6075, 1.0)),
    ],
)
def test_newcombe_published_intervals(counts, expected) -> None:
    assert newcombe_difference_interval(*counts) == pytest.approx(expected, abs=1e-4)


# --- Poisson rates with exposure --------------------------------------------------------


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize(
    "k1,e1,k2,e2", [(30, 1e4, 10, 1e4), (3, 500.0, 9, 2000.0), (0, 10.0, 4, 7.0), (120, 3e5, 95, 2e5)]
)
def test_rate_ratio_p_value_is_the_conditional_binomial_test(k1, e1, k2, e2, alternative) -> None:
    expected = stats.binomtest(k1, k1 + k2, e1 / (e1 + e2), alternative=alternative).pvalue
    res = rate_ratio_test(k1, e1, k2, e2, alternative=alternative)
    assert res.p_value == pytest.approx(expected, rel=1e-12)
    assert res.rate1 == k1 / e1 and res.rate2 == k2 / e2


def test_rate_ratio_ci_bounds_are_exact_binomial_tails() -> None:
    k1, e1, k2, e2 = 30, 1e4, 12, 1.5e4
    res = rate_ratio_test(k1, e1, k2, e2)
    n = k1 + k2

    def pi(ratio: float) -> float:
        return ratio * e1 / (ratio * e1 + e2)

    low, high = res.rate_ratio_ci
    assert stats.binom.sf(k1 - 1, n, pi(low)) == pytest.approx(0.025, abs=1e-9)
    assert stats.binom.cdf(k1, n, pi(high)) == pytest.approx(0.025, abs=1e-9)
    assert res.rate_ratio == pytest.approx(30 / 1e4 / (12 / 1.5e4))
    assert low < res.rate_ratio < high


@pytest.mark.parametrize("k1,e1,k2,e2", [(300, 1e5, 260, 1.2e5), (120, 1e5, 150, 1e5), (30, 1e5, 12, 1.2e5)])
def test_rate_ratio_agrees_with_scipy_poisson_means_test(k1, e1, k2, e2) -> None:
    # Different tests (conditional exact vs Krishnamoorthy–Thomson E-test) that agree closely
    # once counts are in the tens.
    ours = rate_ratio_test(k1, e1, k2, e2).p_value
    etest = stats.poisson_means_test(k1, e1, k2, e2).pvalue
    assert abs(math.log(ours / etest)) < 0.25


def test_rate_ratio_one_sided_interval_agrees_with_p_value() -> None:
    for k1 in range(4, 25):
        res = rate_ratio_test(k1, 1000.0, 6, 1000.0, alternative="greater")
        assert res.rate_ratio_ci[1] == math.inf and res.rate_difference_ci[1] == math.inf
        assert (res.p_value < 0.05) == (res.rate_ratio_ci[0] > 1.0)


def test_rate_ratio_zero_events() -> None:
    res = rate_ratio_test(0, 100.0, 0, 100.0)
    assert res.p_value == 1.0 and math.isnan(res.rate_ratio)
    assert res.rate_ratio_ci == (0.0, math.inf)
    # Garwood upper limit for 0 events: -ln(0.025) per unit exposure; MOVER is symmetric here.
    assert res.rate_difference_ci == pytest.approx((-math.log(40) / 100, math.log(40) / 100), rel=1e-9)
    d = res.to_dict()
    assert d["rate_ratio"] is None and d["rate_ratio_ci"] == [0.0, None]
    five_none = rate_ratio_test(5, 100.0, 0, 100.0)  # p = 2 / 2^5 = 0.0625
    assert five_none.rate_ratio == math.inf and five_none.rate_difference_ci[0] < 0
    eight_none = rate_ratio_test(8, 100.0, 0, 100.0)  # p = 2 / 2^8
    assert eight_none.p_value < 0.05 and eight_none.rate_difference_ci[0] > 0


def test_rate_ratio_rejects_bad_exposure() -> None:
    with pytest.raises(StatsInputError, match="e2"):
        rate_ratio_test(1, 10.0, 1, 0.0)
    with pytest.raises(StatsInputError, match="alternative"):
        rate_ratio_test(1, 10.0, 1, 10.0, alternative="bigger")  # type: ignore[arg-type]


# --- Fisher's exact test ------------------------------------------------------------------


def test_fisher_tea_tasting() -> None:
    res = fisher_exact_2x2(3, 4, 1, 4)
    assert res.p_value == pytest.approx(0.4857, abs=1e-4)
    assert fisher_exact_2x2(3, 4, 1, 4, alternative="greater").p_value == pytest.approx(17 / 70, rel=1e-12)
    ref = stats.contingency.odds_ratio([[3, 1], [1, 3]])
    assert res.odds_ratio == pytest.approx(ref.statistic)
    ci = ref.confidence_interval(0.95)
    assert res.odds_ratio_ci == pytest.approx((ci.low, ci.high))
    assert res.risk_difference == 0.5
    assert res.risk_difference_ci == newcombe_difference_interval(3, 4, 1, 4)


def test_fisher_without_odds_ratio_interval_and_zero_cells() -> None:
    res = fisher_exact_2x2(0, 3437, 7, 3437, odds_ratio_ci=False)
    assert res.odds_ratio_ci is None and res.odds_ratio == 0.0
    assert res.p_value == pytest.approx(stats.fisher_exact([[0, 3437], [7, 3430]]).pvalue)
    json.dumps(res.to_dict(), allow_nan=False)
    with pytest.raises(StatsInputError, match="a_n"):
        fisher_exact_2x2(0, 0, 1, 5)


# --- McNemar ------------------------------------------------------------------------------


def test_mcnemar_exact_known_value() -> None:
    res = mcnemar_exact(1, 9, 100)
    assert res.p_value == pytest.approx(2 * 11 / 1024, rel=1e-12)
    assert round(res.p_value, 4) == 0.0215
    assert res.difference == pytest.approx(-0.08)


def test_mcnemar_agresti_min_interval_by_hand() -> None:
    # 0.5 added to each cell: b' = 1.5, c' = 9.5, n' = 102.
    res = mcnemar_exact(1, 9, 100)
    centre = -8 / 102
    se = math.sqrt(11 - 64 / 102) / 102
    assert res.difference_ci == pytest.approx((centre - Z95 * se, centre + Z95 * se), rel=1e-9)


def test_mcnemar_no_discordant_pairs_and_bounds() -> None:
    res = mcnemar_exact(0, 0, 50)
    assert res.p_value == 1.0 and res.difference == 0.0
    assert res.difference_ci[0] == pytest.approx(-res.difference_ci[1])
    with pytest.raises(StatsInputError, match="exceed n_pairs"):
        mcnemar_exact(30, 30, 50)


def test_mcnemar_one_sided_direction() -> None:
    better_a = mcnemar_exact(15, 3, 200, alternative="greater")
    assert better_a.p_value == pytest.approx(stats.binomtest(15, 18, 0.5, alternative="greater").pvalue)
    assert better_a.difference_ci[1] == 1.0 and better_a.difference_ci[0] > 0


def test_mcnemar_from_pairs_counts_discordant_items() -> None:
    a = [True, True, False, False, True, True, True]
    b = [True, False, True, False, False, False, True]
    assert mcnemar_from_pairs(a, b) == mcnemar_exact(3, 1, 7)
    assert mcnemar_from_pairs(np.array([1, 0, 1]), np.array([1, 1, 0])) == mcnemar_exact(1, 1, 3)
    with pytest.raises(StatsInputError, match="differ in length"):
        mcnemar_from_pairs([True], [True, False])
    with pytest.raises(StatsInputError, match="booleans"):
        mcnemar_from_pairs(["yes"], ["no"])


# --- latency: rank test, shift, bootstrap, Welch -------------------------------------------


def test_mann_whitney_matches_scipy_and_superiority() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0.1, 0.4, 60), rng.lognormal(0.0, 0.4, 70)
    res = mann_whitney(a, b, alternative="greater")
    ref = stats.mannwhitneyu(a, b, alternative="greater")
    assert res.p_value == pytest.approx(ref.pvalue) and res.u_statistic == ref.statistic
    assert mann_whitney([5.0, 6.0], [1.0, 2.0, 3.0]).prob_superiority == 1.0


def test_hodges_lehmann_recovers_known_shift() -> None:
    rng = np.random.default_rng(6)
    a = rng.lognormal(0.0, 0.5, 37)
    res = hodges_lehmann(a, a - 2.5)
    assert res.estimate == pytest.approx(2.5, abs=1e-12)
    assert res.ci[0] < 2.5 < res.ci[1]
    rel = hodges_lehmann(a * 1.1, a, relative=True)
    assert rel.estimate == pytest.approx(0.1, abs=1e-12) and rel.relative


def test_hodges_lehmann_interval_inverts_exact_mann_whitney() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, 10), rng.normal(0, 1, 10)
    res = hodges_lehmann(a, b)
    diffs = np.sort(np.subtract.outer(a, b).ravel())
    # Tables: two-sided 5% critical U for 10 vs 10 is 23, so the interval is [D_(24), D_(77)].
    assert res.ci == (diffs[23], diffs[76]) and res.method == "exact"
    # Inverting the test: shifts just inside the interval are not rejected, just outside are.
    for end in res.ci:
        for shift in (end - 1e-9, end + 1e-9):
            inside = res.ci[0] <= shift <= res.ci[1]
            assert (stats.mannwhitneyu(a - shift, b, method="exact").pvalue > 0.05) == inside
    # Achieved level: 1 - 2 P(U <= 23); a shift between D_(77) and D_(78) leaves U = 23.
    u23 = stats.mannwhitneyu(a - (diffs[76] + diffs[77]) / 2, b, alternative="less", method="exact")
    assert u23.statistic == 23
    assert res.achieved_confidence == pytest.approx(1 - 2 * u23.pvalue, abs=1e-12)


def test_hodges_lehmann_small_and_huge_samples() -> None:
    tiny = hodges_lehmann([1.0, 2.0, 3.0], [1.5, 2.5, 4.0])
    assert tiny.ci == (-math.inf, math.inf) and tiny.achieved_confidence == 1.0
    side = int(math.isqrt(MAX_PAIRWISE_DIFFERENCES)) + 1
    with pytest.raises(StatsInputError, match="run-level medians"):
        hodges_lehmann(np.ones(side), np.ones(side))


def test_hodges_lehmann_normal_branch_inverts_asymptotic_mann_whitney() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.normal(0.3, 1, 400), rng.normal(0, 1, 400)
    res = hodges_lehmann(a, b)
    assert res.method == "normal"
    assert res.achieved_confidence == pytest.approx(0.95, abs=2e-3)
    for end in res.ci:
        for shift in (end - 1e-9, end + 1e-9):
            inside = res.ci[0] <= shift <= res.ci[1]
            p = stats.mannwhitneyu(a - shift, b, method="asymptotic", use_continuity=True).pvalue
            assert (p > 0.05) == inside


def test_bootstrap_reproducible_and_matches_scipy() -> None:
    rng = np.random.default_rng(9)
    a, b = rng.lognormal(0.05, 0.3, 120), rng.lognormal(0.0, 0.3, 150)
    res = bootstrap_median_diff_ci(a, b, n_resamples=2000, seed=42)
    assert res == bootstrap_median_diff_ci(a, b, n_resamples=2000, seed=42)
    assert res.ci != bootstrap_median_diff_ci(a, b, n_resamples=2000, seed=43).ci
    ref = stats.bootstrap(
        (a, b),
        lambda x, y, axis: np.median(x, axis=axis) - np.median(y, axis=axis),
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(42),
    ).confidence_interval
    assert res.ci == pytest.approx((ref.low, ref.high))
    assert res.estimate == pytest.approx(np.median(a) - np.median(b))
    assert res.seed == 42 and res.n_resamples == 2000 and res.method == "percentile"


def test_relative_median_diff() -> None:
    rng = np.random.default_rng(10)
    b = rng.lognormal(0.0, 0.2, 301)
    res = relative_median_diff_ci(b * 1.004, b, n_resamples=1000, seed=1)
    assert res.estimate == pytest.approx(0.004, abs=1e-12)
    assert res.ci[0] < 0.004 < res.ci[1]
    with pytest.raises(StatsInputError, match="> 0"):
        relative_median_diff_ci([1.0, -1.0], [1.0, 2.0])
    with pytest.raises(StatsInputError, match="n_resamples"):
        bootstrap_median_diff_ci([1.0, 2.0], [1.0, 2.0], n_resamples=10)


def test_run_level_medians() -> None:
    assert run_level_medians([[3.0, 1.0, 2.0], [10.0, 20.0], [5.0]]) == [2.0, 15.0, 5.0]
    with pytest.raises(StatsInputError, match="run 1"):
        run_level_medians([[1.0], []])


def test_welch_ttest_matches_scipy_and_relative_scale() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.normal(10.2, 1, 8), rng.normal(10.0, 2, 5)
    res = welch_ttest(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert res.p_value == pytest.approx(ref.pvalue) and res.df == pytest.approx(ref.df)
    rel = welch_ttest(b * 1.05 * np.exp(rng.normal(0, 1e-3, 5)), b, relative=True)
    assert rel.estimate == pytest.approx(0.05, abs=2e-3)
    with pytest.raises(StatsInputError, match="constant"):
        welch_ttest([1.0, 1.0], [2.0, 2.0])


# --- equivalence ------------------------------------------------------------------------


def test_tost_identical_samples_are_equivalent() -> None:
    rng = np.random.default_rng(12)
    a = rng.lognormal(0.0, 0.05, 40)
    res = tost_equivalence(a, a.copy(), margin=0.02)
    assert res.equivalent and res.estimate == pytest.approx(0.0, abs=1e-12)


def test_tost_shifted_samples_are_not_equivalent() -> None:
    rng = np.random.default_rng(13)
    b = rng.lognormal(0.0, 0.05, 40)
    assert not tost_equivalence(b * 1.10, b, margin=0.05).equivalent
    assert not tost_equivalence(b / 1.10, b, margin=0.05).equivalent


def test_tost_matches_scipy_one_sided_welch_tests() -> None:
    rng = np.random.default_rng(14)
    a, b = rng.normal(0.1, 1.0, 25), rng.normal(0.0, 1.5, 30)
    res = tost_equivalence(a, b, margin=0.8, relative=False, alpha=0.05)
    low = stats.ttest_ind(a + 0.8, b, equal_var=False, alternative="greater")
    high = stats.ttest_ind(a - 0.8, b, equal_var=False, alternative="less")
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.90)
    assert res.p_lower == pytest.approx(low.pvalue) and res.p_upper == pytest.approx(high.pvalue)
    assert res.ci == pytest.approx((ci.low, ci.high))
    inside = res.bounds[0] < res.ci[0] and res.ci[1] < res.bounds[1]
    assert res.equivalent == inside


def test_tost_relative_bounds_are_log_symmetric() -> None:
    rng = np.random.default_rng(15)
    res = tost_equivalence(rng.lognormal(0, 0.1, 10), rng.lognormal(0, 0.1, 10), margin=0.25)
    assert res.bounds == pytest.approx((1 / 1.25 - 1, 0.25))


def test_tost_proportions_agresti_caffo_by_hand() -> None:
    # One event and one non-event added per arm: 11/102 vs 21/202.
    res = tost_proportions(10, 100, 20, 200, margin=0.1, alpha=0.05)
    pa, pb = 11 / 102, 21 / 202
    se = math.sqrt(pa * (1 - pa) / 102 + pb * (1 - pb) / 202)
    assert res.p_lower == pytest.approx(stats.norm.sf((pa - pb + 0.1) / se))
    assert res.p_upper == pytest.approx(stats.norm.cdf((pa - pb - 0.1) / se))
    z = stats.norm.ppf(0.95)
    assert res.ci == pytest.approx((pa - pb - z * se, pa - pb + z * se))
    assert res.estimate == 0.0 and res.equivalent


def test_tost_proportions() -> None:
    assert tost_proportions(0, 100_000, 1, 100_000, margin=0.001).equivalent
    assert not tost_proportions(0, 100, 0, 100, margin=0.01).equivalent
    res = tost_proportions(500, 1000, 560, 1000, margin=0.02)
    assert not res.equivalent and res.estimate == pytest.approx(-0.06)


# --- power and minimum detectable effects ---------------------------------------------------


def test_mde_mean_diff_closed_form_and_shrinks() -> None:
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert mde_mean_diff(2.0, 64, 64) == pytest.approx(z * 2.0 * math.sqrt(2 / 64))
    # the familiar "d = 0.5 needs ~64 per arm"
    assert mde_mean_diff(1.0, 64, 64) == pytest.approx(0.5, abs=0.01)
    assert mde_mean_diff(1.0, 256, 256) == pytest.approx(mde_mean_diff(1.0, 64, 64) / 2)


def test_mde_two_proportions_matches_cohen_table() -> None:
    # Cohen (1988) Table 6.4.1: h = 0.20 needs n = 392 per group (alpha .05 two-sided, power .8).
    d = mde_two_proportions(392, 392, 0.5)
    h = 2 * math.asin(math.sqrt(0.5 + d)) - 2 * math.asin(math.sqrt(0.5))
    assert h == pytest.approx(0.20, abs=1e-3)
    sizes = [100, 400, 1600, 6400]
    mdes = [mde_two_proportions(n, n, 0.05) for n in sizes]
    assert all(x > y for x, y in zip(mdes, mdes[1:], strict=False))
    assert mde_two_proportions(3437, 3437, 0.0) > 0
    with pytest.raises(StatsInputError, match="detectable"):
        mde_two_proportions(1, 1, 0.9)


def test_mde_rate_ratio_agrees_with_log_ratio_approximation() -> None:
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    e1, e2, base = 2e5, 3e5, 1e-3
    ratio = mde_rate_ratio(e1, e2, base)
    # Independent large-count approximation: log R = z * sqrt(1/mu1 + 1/mu2).
    log_form = z * math.sqrt(1 / (ratio * base * e1) + 1 / (base * e2))
    assert math.log(ratio) == pytest.approx(log_form, rel=0.03)
    ratios = [mde_rate_ratio(e, e, base) for e in (1e4, 1e5, 1e6)]
    assert ratios[0] > ratios[1] > ratios[2] > 1
    with pytest.raises(StatsInputError, match="base_rate"):
        mde_rate_ratio(1e4, 1e4, 0.0)


@pytest.mark.parametrize("effect,expected", [(2.0, 6), (1.5, 9), (1.2, 12), (1.0, 17), (0.8, 26), (0.5, 64)])
def test_repeats_needed_matches_power_tables(effect: float, expected: int) -> None:
    # Per-group sizes for the pooled two-sample t-test, alpha .05 two-sided, power .8
    # (G*Power tables; the small-n ones, where df matters, also confirmed by a 200,000-run
    # simulation: e.g. effect 2.0 gives power 0.790 at 5 repeats and 0.877 at 6).
    assert repeats_needed_for_mde(1.0, effect) == expected
    assert repeats_needed_for_mde(3.0, 3.0 * effect) == expected


def test_repeats_needed_for_seed_spread() -> None:
    # Three repeats on one unchanged server spanned 0.920 to 0.945.
    sd = float(np.std(np.log([0.920, 0.932, 0.945]), ddof=1))
    n = repeats_needed_for_mde(sd, 0.004)
    assert 150 < n < 250
    assert repeats_needed_for_mde(sd, 0.008) < n


# --- multiplicity ------------------------------------------------------------------------


def test_holm_textbook() -> None:
    res = holm([0.01, 0.04, 0.03, 0.005], alpha=0.05)
    assert res.adjusted == pytest.approx((0.03, 0.06, 0.06, 0.02))
    assert res.reject == (True, False, False, True)
    assert res.names is None


def test_holm_named_capped_and_monotone() -> None:
    res = holm({"stray": 0.2, "gsm8k": 0.45, "itl": 0.001, "ttft": 0.4})
    assert res.by_name()["itl"][0] == pytest.approx(0.004)
    assert res.by_name()["stray"] == (pytest.approx(0.6), False)
    assert res.by_name()["gsm8k"] == (pytest.approx(0.8), False)  # 0.45 * 1 lifted to 0.4 * 2 (monotone)
    assert holm([0.4, 0.5, 0.6]).adjusted == (1.0, 1.0, 1.0)
    order = np.argsort(res.p_values)
    assert all(np.diff(np.asarray(res.adjusted)[order]) >= 0)
    with pytest.raises(StatsInputError, match=r"\[0, 1\]"):
        holm([0.5, 1.5])


def test_benjamini_hochberg_textbook() -> None:
    res = benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    assert res.adjusted == pytest.approx((0.02, 0.04, 0.04, 0.02))


# --- verdict -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "p,effect,ci,higher_is_better,equivalence,expected",
    [
        (0.001, 0.05, (0.03, 0.07), False, None, "worse"),  # latency up 5%, threshold 1%
        (0.001, -0.05, (-0.07, -0.03), False, None, "better"),
        (0.001, 0.05, (0.03, 0.07), True, None, "better"),  # accuracy up
        (0.001, 0.004, (0.002, 0.006), False, None, "equivalent"),  # significant, negligible
        (0.30, 0.002, (-0.004, 0.008), False, None, "equivalent"),
        (0.30, 0.02, (-0.01, 0.05), False, None, "inconclusive"),
        (0.08, 0.05, (-0.001, 0.10), False, None, "inconclusive"),  # big but not significant
        (0.30, 0.002, (-0.004, 0.008), False, False, "inconclusive"),  # TOST overrides the CI rule
        (0.30, 0.002, (-0.02, 0.03), False, True, "equivalent"),
        (0.04, 0.009, (0.001, 0.02), False, None, "inconclusive"),  # significant, under threshold
    ],
)
def test_verdict_rules(p, effect, ci, higher_is_better, equivalence, expected) -> None:
    assert verdict(p, effect, ci, 0.01, higher_is_better=higher_is_better, equivalence=equivalence) == expected


def test_verdict_accepts_tost_result_and_rejects_bad_input() -> None:
    rng = np.random.default_rng(16)
    a = rng.lognormal(0.0, 0.01, 30)
    tost = tost_equivalence(a, a.copy(), margin=0.01)
    assert verdict(0.9, 0.0, (-0.05, 0.05), 0.01, higher_is_better=False, equivalence=tost) == "equivalent"
    with pytest.raises(StatsInputError, match="low <= high"):
        verdict(0.5, 0.0, (0.1, -0.1), 0.01, higher_is_better=True)
    with pytest.raises(StatsInputError, match="p_value"):
        verdict(1.5, 0.0, (-0.1, 0.1), 0.01, higher_is_better=True)


# --- JSON-friendly results ------------------------------------------------------------------


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


def test_every_result_serialises_to_plain_json() -> None:
    rng = np.random.default_rng(17)
    a, b = rng.lognormal(0.0, 0.3, 30), rng.lognormal(0.0, 0.3, 30)
    results = [
        proportion_estimate(0, 3437),
        rate_ratio_test(5, 100.0, 0, 100.0, alternative="greater"),
        fisher_exact_2x2(3, 4, 1, 4),
        mcnemar_exact(1, 9, 100),
        mann_whitney(a, b),
        welch_ttest(a, b, relative=True),
        bootstrap_median_diff_ci(a, b, n_resamples=200),
        hodges_lehmann(a, b),
        hodges_lehmann([1.0, 2.0], [3.0]),
        tost_equivalence(a, b, 0.1),
        tost_proportions(3, 100, 4, 100, 0.05),
        holm({"x": 0.01, "y": 0.2}),
    ]
    for res in results:
        d = res.to_dict()
        assert _plain(d), type(res).__name__
        json.dumps(d, allow_nan=False)


def test_family_budget_splits_the_run_budget_evenly() -> None:
    family = family_budget(0.001, 8)
    assert family.per_test_alpha == pytest.approx(1.25e-4)
    assert family.unsplit_rate == pytest.approx(1 - 0.999**8)  # 0.8%: what 8 tests at 0.001 each would allow
    assert "budget 0.001 over 8 tests" in family.describe() and "0.000125" in family.describe()
    with pytest.raises(StatsInputError):
        family_budget(0.001, 0)
