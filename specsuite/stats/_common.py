"""Shared pieces of specsuite.stats: input checks, the error type and JSON-friendly results."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from numbers import Real
from typing import Any, Literal, get_args

import numpy as np

from specsuite.errors import SpecsuiteError

Alternative = Literal["two-sided", "greater", "less"]


class StatsInputError(SpecsuiteError, ValueError):
    """Bad input to a statistics function (also a ValueError, so plain callers can catch that)."""


class Result:
    """Mixin for the frozen result dataclasses: `to_dict()` gives plain JSON-ready values.

    numpy scalars become Python floats/ints, tuples become lists, and non-finite floats
    (an unbounded interval end, an undefined ratio) become None, because JSON has no
    inf or nan.
    """

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _jsonable(value: Any) -> Any:
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    return value


def check_alternative(alternative: str) -> Alternative:
    if alternative not in get_args(Alternative):
        raise StatsInputError(
            f"alternative must be one of {', '.join(get_args(Alternative))}; got {alternative!r}"
        )
    return alternative  # type: ignore[return-value]


def check_fraction(value: float, name: str, upper: float = 1.0) -> float:
    """A number strictly between 0 and `upper` (confidence levels, alpha, power)."""
    if not (isinstance(value, Real) and not isinstance(value, bool) and 0.0 < value < upper):
        raise StatsInputError(f"{name} must be strictly between 0 and {upper:g}; got {value!r}")
    return float(value)


def check_confidence(confidence: float) -> float:
    return check_fraction(confidence, "confidence")


def check_count(value: int, name: str) -> int:
    """A non-negative whole number (numpy integers and integral floats accepted)."""
    whole = isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, (bool, np.bool_)) or not whole or value < 0:
        raise StatsInputError(f"{name} must be a non-negative integer; got {value!r}")
    return int(value)


def check_events(k: int, n: int, k_name: str = "k", n_name: str = "n") -> tuple[int, int]:
    """Events k out of n trials, 0 <= k <= n."""
    k, n = check_count(k, k_name), check_count(n, n_name)
    if k > n:
        raise StatsInputError(f"{k_name}={k} events cannot exceed {n_name}={n} trials")
    return k, n


def check_positive(value: float, name: str) -> float:
    if not (isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0):
        raise StatsInputError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def check_sample(values: Sequence[float], name: str, min_size: int = 1, positive: bool = False) -> np.ndarray:
    """A 1-D sample of finite floats with at least `min_size` values."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise StatsInputError(f"sample {name} must be a sequence of numbers") from None
    if arr.ndim != 1:
        raise StatsInputError(f"sample {name} must be one-dimensional; got shape {arr.shape}")
    if arr.size < min_size:
        raise StatsInputError(f"sample {name} needs at least {min_size} values; got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise StatsInputError(f"sample {name} contains nan or inf")
    if positive and np.any(arr <= 0):
        raise StatsInputError(f"sample {name} must be all > 0 for a relative (ratio) comparison")
    return arr


def two_sided_level(confidence: float, alternative: Alternative) -> float:
    """The two-sided level whose one end is the one-sided bound at `confidence`.

    One-sided tests get one-sided intervals, so that "p < alpha" and "the interval
    excludes the null value" agree.
    """
    if alternative == "two-sided":
        return confidence
    if confidence <= 0.5:
        raise StatsInputError(f"a one-sided interval needs confidence > 0.5; got {confidence}")
    return 2.0 * confidence - 1.0


def open_side(ci: tuple[float, float], alternative: Alternative, low: float, high: float) -> tuple[float, float]:
    """Replace the end a one-sided alternative leaves unbounded by the parameter's natural limit."""
    if alternative == "greater":
        return (ci[0], high)
    if alternative == "less":
        return (low, ci[1])
    return ci
