"""Minimum detectable effects (MDE) and repeats needed, for the sample sizes in hand.

"No significant difference" only means something next to the effect the run could have
detected. All MDEs are for a two-sided test at `alpha` with the stated `power`, use normal
approximations (closed forms, stated per function), and describe an increase in arm 1 over
the base value (for proportions and rates, a decrease of the same size is detected with
similar, not identical, power).
"""

from __future__ import annotations

import math
from numbers import Real

from specsuite.stats._common import StatsInputError, check_count, check_fraction, check_positive
from specsuite.stats.lazy_scipy import stats

_MAX_REPEATS = 1_000_000


def _z_sum(alpha: float, power: float) -> float:
    alpha, power = check_fraction(alpha, "alpha"), check_fraction(power, "power")
    return float(stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power))


def _check_sizes(n1: int, n2: int, names: tuple[str, str] = ("n1", "n2")) -> tuple[int, int]:
    n1, n2 = check_count(n1, names[0]), check_count(n2, names[1])
    if n1 == 0 or n2 == 0:
        raise StatsInputError(f"{names[0]} and {names[1]} must both be > 0")
    return n1, n2


def mde_mean_diff(sd: float, n1: int, n2: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest mean difference detectable: (z_{1-alpha/2} + z_power) * sd * sqrt(1/n1 + 1/n2).

    Normal approximation with known common sd; for a handful of repeats use
    repeats_needed_for_mde, which uses the t distribution.
    """
    sd = check_positive(sd, "sd")
    n1, n2 = _check_sizes(n1, n2)
    return _z_sum(alpha, power) * sd * math.sqrt(1.0 / n1 + 1.0 / n2)


def mde_two_proportions(n1: int, n2: int, p_base: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest increase p1 - p_base detectable with n1 and n2 trials (arcsine / Cohen's h).

    h = (z_{1-alpha/2} + z_power) * sqrt(1/n1 + 1/n2) on the 2*asin(sqrt(p)) scale, so
    p1 = sin(asin(sqrt(p_base)) + h/2)^2. Works for p_base = 0. Raises when even p1 = 1
    would not be detectable.
    """
    if not (isinstance(p_base, Real) and 0.0 <= p_base < 1.0):
        raise StatsInputError(f"p_base must be in [0, 1); got {p_base!r}")
    n1, n2 = _check_sizes(n1, n2)
    h = _z_sum(alpha, power) * math.sqrt(1.0 / n1 + 1.0 / n2)
    angle = math.asin(math.sqrt(p_base)) + h / 2.0
    if angle >= math.pi / 2.0:
        raise StatsInputError(
            f"with n1={n1}, n2={n2} no proportion above p_base={p_base} is detectable at this alpha and power"
        )
    return math.sin(angle) ** 2 - p_base


def mde_rate_ratio(
    exposure1: float, exposure2: float, base_rate: float, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest rate ratio rate1 / base_rate detectable with these exposures (arm 2 at base_rate).

    Square-root (variance-stabilising) normal approximation: sqrt(k / e) has variance about
    1 / (4 e) for Poisson k, so sqrt(rate1) = sqrt(base_rate) + z * sqrt(1/e1 + 1/e2) / 2.
    Fits the conditional test of rate_ratio_test once each arm expects tens of events.
    base_rate must be > 0 (a zero base makes every ratio infinite; use
    clopper_pearson_upper for "how high could the rate be").
    """
    e1, e2 = check_positive(exposure1, "exposure1"), check_positive(exposure2, "exposure2")
    base = check_positive(base_rate, "base_rate")
    step = _z_sum(alpha, power) * math.sqrt(1.0 / e1 + 1.0 / e2) / 2.0
    return (1.0 + step / math.sqrt(base)) ** 2


def repeats_needed_for_mde(
    sd_between_runs: float, target_effect: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Repeats per arm for a two-sided two-sample t-test to detect `target_effect` with `power`.

    Exact power from the noncentral t distribution (pooled t, equal repeats per arm, df = 2n - 2).
    Units must match: for a relative target (0.004 = "+0.4% ITL") pass the sd of the log
    run-level values, which is about their coefficient of variation. Example: run-level values
    0.920, 0.932, 0.945 have a CV of about 1.3%, and detecting a 0.4% change then needs
    about 180 repeats per arm.
    """
    sd = check_positive(sd_between_runs, "sd_between_runs")
    effect = check_positive(abs(target_effect), "target_effect")
    z_sum = _z_sum(alpha, power)
    n = max(2, math.ceil(2.0 * (z_sum * sd / effect) ** 2))
    while _two_sample_t_power(n, effect / sd, alpha) < power:
        n += 1
        if n > _MAX_REPEATS:
            raise StatsInputError(
                f"detecting {target_effect} with between-run sd {sd_between_runs} needs over {_MAX_REPEATS:,} repeats"
            )
    return n


def _two_sample_t_power(n: int, standardized_effect: float, alpha: float) -> float:
    df = 2 * n - 2
    ncp = standardized_effect * math.sqrt(n / 2.0)
    crit = float(stats.t.ppf(1.0 - alpha / 2.0, df))
    return float(stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))
