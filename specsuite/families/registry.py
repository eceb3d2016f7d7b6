"""The registered workload families, in order: the one list the A/B analysis, the report and the history iterate.

The built-in families are registered here, in the order their rows, verdict lines and sections come:
correctness ("cases"), GSM8K, the serving benchmark, lossless, integrity.  `register` adds one more
after them (a plugin's, or a test's); every lookup reads the list as it is at the call, so a family
registered later reaches the verdicts and the report with no other change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from specsuite.compare.metric import Metric
from specsuite.families.bench import family as bench
from specsuite.families.correctness import family as correctness
from specsuite.families.gsm8k import family as gsm8k
from specsuite.families.integrity import family as integrity
from specsuite.families.lossless import family as lossless
from specsuite.families.workload_family import VerdictRule, WorkloadFamily

_REGISTERED: dict[str, WorkloadFamily] = {}


def register(family: WorkloadFamily) -> WorkloadFamily:
    """Add a family after those registered; its name, its metrics' names and its rules' statistics must be new,
    and each of its metrics must read its records and cite one of its rules."""
    if family.name in _REGISTERED:
        raise ValueError(f"workload family {family.name!r} is already registered")
    metric_names = {metric.name for metric in registered_metrics()}
    statistics = {rule.statistic for known in _REGISTERED.values() for rule in known.verdict_rules}
    own_rules = {rule.statistic for rule in family.verdict_rules}
    for metric in family.metrics:
        if metric.name in metric_names:
            raise ValueError(f"metric {metric.name!r} of family {family.name!r} is already registered")
        if metric.source != family.name or metric.statistic not in own_rules:
            raise ValueError(f"metric {metric.name!r} must read family {family.name!r}'s records and cite one of its rules")
    if own_rules & statistics:
        raise ValueError(f"verdict rule(s) {', '.join(sorted(own_rules & statistics))} of family {family.name!r} already registered")
    _REGISTERED[family.name] = family
    return family


def unregister(name: str) -> None:
    """Remove a registered family (a test's, when it is done)."""
    del _REGISTERED[name]


@contextmanager
def registered(family: WorkloadFamily) -> Iterator[WorkloadFamily]:
    """`family` registered for the block (a test's), removed after it."""
    register(family)
    try:
        yield family
    finally:
        unregister(family.name)


def families() -> tuple[WorkloadFamily, ...]:
    return tuple(_REGISTERED.values())


def family(name: str) -> WorkloadFamily:
    """The family `name`; KeyError names the registered ones."""
    try:
        return _REGISTERED[name]
    except KeyError:
        raise KeyError(f"unknown workload family {name!r}; expected one of {', '.join(_REGISTERED)}") from None


def registered_metrics() -> tuple[Metric, ...]:
    """Every registered family's metrics, family by family: the order of comparison and estimate rows."""
    return tuple(metric for known in _REGISTERED.values() for metric in known.metrics)


def metric(name: str) -> Metric:
    """The registered metric `name`; KeyError names the registered ones."""
    for known in registered_metrics():
        if known.name == name:
            return known
    raise KeyError(f"unknown metric {name!r}; expected one of {', '.join(m.name for m in registered_metrics())}")


def verdict_rule(statistic: str) -> VerdictRule:
    """The registered verdict rule a metric cites (`Metric.statistic`)."""
    for known in _REGISTERED.values():
        for rule in known.verdict_rules:
            if rule.statistic == statistic:
                return rule
    raise KeyError(f"no registered verdict rule {statistic!r}")


for _builtin in (correctness.FAMILY, gsm8k.FAMILY, bench.FAMILY, lossless.FAMILY, integrity.FAMILY):
    register(_builtin)
