"""Statistics for comparing two server builds (fix vs nofix, candidate vs nightly), on scipy.stats.

All functions are pure, check their input (bad input raises StatsInputError, a SpecsuiteError
and ValueError, with a one-line message) and return small frozen dataclasses whose
`to_dict()` is JSON-ready. Conventions: the first arm is the one under test, the second the
reference; differences are first - second, ratios first / second, "greater" means the first
is larger; one-sided alternatives give one-sided intervals.

Modules: proportions (one proportion, difference of two), counts (rates, 2x2, paired),
latency (rank tests, shifts, bootstrap medians, Welch), equivalence (TOST), power (MDE),
multiplicity (Holm, BH), verdict (better / worse / equivalent / inconclusive).
"""

from specsuite.stats._common import Alternative, StatsInputError
from specsuite.stats.counts import (
    PairedComparison,
    ProportionComparison,
    RateComparison,
    fisher_exact_2x2,
    mcnemar_exact,
    mcnemar_from_pairs,
    rate_ratio_test,
)
from specsuite.stats.equivalence import EquivalenceResult, tost_equivalence, tost_proportions
from specsuite.stats.latency import (
    BootstrapResult,
    MannWhitneyResult,
    MeanComparison,
    ShiftEstimate,
    bootstrap_median_diff_ci,
    hodges_lehmann,
    mann_whitney,
    relative_median_diff_ci,
    run_level_medians,
    welch_ttest,
)
from specsuite.stats.multiplicity import AdjustedPValues, FamilyBudget, benjamini_hochberg, family_budget, holm
from specsuite.stats.power import mde_mean_diff, mde_rate_ratio, mde_two_proportions, repeats_needed_for_mde
from specsuite.stats.proportions import (
    ProportionEstimate,
    clopper_pearson,
    clopper_pearson_upper,
    newcombe_difference_interval,
    proportion_estimate,
    wilson_interval,
)
from specsuite.stats.verdict import Verdict, verdict

__all__ = [
    "AdjustedPValues",
    "Alternative",
    "BootstrapResult",
    "EquivalenceResult",
    "FamilyBudget",
    "MannWhitneyResult",
    "MeanComparison",
    "PairedComparison",
    "ProportionComparison",
    "ProportionEstimate",
    "RateComparison",
    "ShiftEstimate",
    "StatsInputError",
    "Verdict",
    "benjamini_hochberg",
    "bootstrap_median_diff_ci",
    "clopper_pearson",
    "clopper_pearson_upper",
    "family_budget",
    "fisher_exact_2x2",
    "hodges_lehmann",
    "holm",
    "mann_whitney",
    "mcnemar_exact",
    "mcnemar_from_pairs",
    "mde_mean_diff",
    "mde_rate_ratio",
    "mde_two_proportions",
    "newcombe_difference_interval",
    "proportion_estimate",
    "rate_ratio_test",
    "relative_median_diff_ci",
    "repeats_needed_for_mde",
    "run_level_medians",
    "tost_equivalence",
    "tost_proportions",
    "verdict",
    "welch_ttest",
    "wilson_interval",
]
