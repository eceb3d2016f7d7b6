"""`--fail-on` rules: which A/B outcomes turn into a failing exit code.

An expression is a comma-separated list of `METRIC:CONDITION` terms, e.g.
`invalid_ids:any,stray_per_1200:worse,accept_length:suspect,itl_median:+1%,gsm8k_accuracy:-2pt`.
The metrics and their scales are specsuite.analysis.metric_registry's.  Conditions:

- `any`: a candidate arm has at least one event of the metric in any case (count metrics only:
  the event rates and `gsm8k_invalid`).  With a single arm in the results, that arm is checked.
- `worse`: a comparison of the metric got the verdict "worse" (Holm-adjusted significance AND
  the practical threshold; see specsuite.analysis.verdicts).
- `suspect` (`accept_length` only; a bare `suspect` term means `accept_length:suspect`): a
  comparison got the verdict "suspect": a higher accept length in a candidate arm that is
  "worse" on invalid, fallback or padded-row ids, the stray rate or sampler fallbacks, the
  signature of corrupt draft probabilities.
- `+X%` / `-X%` (relative metrics and rates) and `+Xpt` / `-Xpt` (GSM8K proportions, points):
  the whole 95 % interval of the effect lies beyond the threshold, i.e. the interval's lower
  bound is above +X (or its upper bound below -X).  So a rule fires only when the data show, with
  95 % confidence, a change at least that large; a point estimate past the threshold with a wide
  interval does not fire.  For rates the effect is the rate ratio, so `+50%` means ratio > 1.5.
  The interval is per comparison (not Holm-adjusted).

A rule whose metric has no comparison in the results is reported as unevaluated, not as passing
silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.families.registry import families, registered_metrics
from specsuite.families.registry import metric as metric_of
from specsuite.results.types import Comparison, ComparisonRow, Effect

_THRESHOLD = re.compile(r"^([+-])(\d+(?:\.\d+)?)(%|pt)$")
# Every lookup reads the registry as it is at the call, so a family registered later (a plugin's, a test's) is in
# `--fail-on` and in the nightly gate with no change here.


def _metric_names(wanted: str | None = None) -> tuple[str, ...]:
    """The registered metrics' names, in row order; only those with the flag `wanted` (a Metric field) when given."""
    return tuple(metric.name for metric in registered_metrics() if wanted is None or getattr(metric, wanted))


def _suspect_metric() -> str:
    """What a bare `suspect` term means: the first metric whose rise is suspect (accept length)."""
    return _metric_names("suspect_when_better")[0]


def nightly_fail_on() -> str:
    """`--profile nightly`'s exit policy, with no --fail-on needed: a candidate that is worse on a correctness metric (a
    sign of corrupt sampling, or a metric its family gates nightly: `WorkloadFamily.nightly_gate`) or suspect on
    acceptance exits 1.  Performance rows do not gate it."""
    family_gate = {term.partition(":")[0]: term for known in families() for term in known.nightly_gate}
    gated = [metric.name for metric in registered_metrics() if metric.corruption_sign or metric.name in family_gate]
    return ",".join([family_gate.get(name, f"{name}:worse") for name in gated]
                    + [f"{name}:suspect" for name in _metric_names("suspect_when_better")])


def with_nightly_gate(expression: str | None, profile: str) -> str | None:
    """The rules a run is judged by: the user's `--fail-on`, plus the nightly gate under `--profile nightly`."""
    if profile != "nightly":
        return expression
    return f"{expression},{nightly_fail_on()}" if expression else nightly_fail_on()


# The --fail-on help line, for the CLI's option table.
FAIL_ON_HELP = ("exit 1 when a rule fires: METRIC:any|worse|suspect|+X%|-Xpt, comma-separated, e.g. "
                "invalid_ids:any,stray_per_1200:worse,accept_length:suspect,itl_median:+1%,gsm8k_accuracy:-2pt")


@dataclass(frozen=True)
class FailOnRule:
    """One parsed term: the metric, the condition kind and, for thresholds, the signed limit."""

    text: str
    metric: str
    kind: str  # "any", "worse", "suspect" or "threshold"
    limit: float | None = None  # signed, as a fraction (+1% -> 0.01, -2pt -> -0.02)


@dataclass(frozen=True)
class Trigger:
    """A rule that fired, with a one-line reason."""

    rule: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "reason": self.reason}


@dataclass
class FailOnOutcome:
    """What the rules found: fired rules, and rules the results had no data for."""

    triggered: list[Trigger] = field(default_factory=list)
    unevaluated: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.triggered)

    def to_dict(self) -> dict[str, Any]:
        return {"triggered": [t.to_dict() for t in self.triggered], "unevaluated": list(self.unevaluated)}


def parse_fail_on(expression: str) -> list[FailOnRule]:
    """Parse a `--fail-on` expression; a bad term raises SpecsuiteError naming it."""
    if not isinstance(expression, str) or not expression.strip():
        raise SpecsuiteError("--fail-on needs at least one METRIC:CONDITION term")
    rules = [_parse_term(term.strip()) for term in expression.split(",")]
    return list({rule.text: rule for rule in rules}.values())  # a term given twice (yours and the nightly gate's) counts once


def _parse_term(term: str) -> FailOnRule:
    if not term:
        raise SpecsuiteError("--fail-on has an empty term (two commas in a row, or a trailing comma)")
    if term == "suspect":
        return FailOnRule(term, _suspect_metric(), "suspect")
    metric, sep, condition = (part.strip() for part in term.partition(":"))
    if not sep or not condition:
        raise SpecsuiteError(f"--fail-on term {term!r} must be METRIC:CONDITION, e.g. invalid_ids:any")
    if metric not in _metric_names():
        raise SpecsuiteError(f"--fail-on term {term!r}: unknown metric {metric!r}; expected one of {', '.join(_metric_names())}")
    if condition == "worse":
        return FailOnRule(term, metric, "worse")
    if condition == "suspect":
        if metric not in _metric_names("suspect_when_better"):
            raise SpecsuiteError(f"--fail-on term {term!r}: 'suspect' applies to {', '.join(_metric_names('suspect_when_better'))}")
        return FailOnRule(term, metric, "suspect")
    if condition == "any":
        if metric not in _metric_names("bad_events"):
            raise SpecsuiteError(f"--fail-on term {term!r}: 'any' applies to event counts ({', '.join(_metric_names('bad_events'))})")
        return FailOnRule(term, metric, "any")
    match = _THRESHOLD.match(condition)
    if not match:
        raise SpecsuiteError(f"--fail-on term {term!r}: condition must be any, worse, suspect, or a signed threshold such as +1% or -2pt")
    sign, number, unit = match.groups()
    wanted = "pt" if metric_of(metric).scale == "difference" else "%"
    if unit != wanted:
        raise SpecsuiteError(f"--fail-on term {term!r}: {metric} thresholds are in {wanted!r}, e.g. {metric}:{sign}1{wanted}")
    limit = float(number) / 100.0
    if limit == 0:
        raise SpecsuiteError(f"--fail-on term {term!r}: a threshold of zero is not a threshold; use 'worse' or 'any'")
    return FailOnRule(term, metric, "threshold", limit if sign == "+" else -limit)


def evaluate_fail_on(expression: str | list[FailOnRule], analysis: Comparison) -> FailOnOutcome:
    """Evaluate rules against the A/B analysis (`compare_arms`' `Comparison`, or a stored one loaded as such);
    fired rules come with a one-line reason each."""
    rules = parse_fail_on(expression) if isinstance(expression, str) else expression
    outcome = FailOnOutcome()
    for rule in rules:
        if rule.kind == "any":
            reasons, evaluated = _any_events(rule, analysis)
        else:
            rows = [row for row in analysis.comparisons or [] if row.metric == rule.metric]
            evaluated = any(_evaluable(rule, row) for row in rows)
            reasons = [reason for row in rows if (reason := _check_row(rule, row))]
        if reasons:
            outcome.triggered.append(Trigger(rule.text, "; ".join(reasons)))
        elif not evaluated:
            outcome.unevaluated.append(f"{rule.text}: no {rule.metric} comparison in these results")
    return outcome


def _any_events(rule: FailOnRule, analysis: Comparison) -> tuple[list[str], bool]:
    """Events of the metric in the candidate arms (the only arm when there is no comparison)."""
    candidates = analysis.candidates or [a for a in analysis.arm_order or [] if a != analysis.baseline]
    if not candidates:
        candidates = list(analysis.arm_order or [])
    rows = [row for row in analysis.estimates or [] if row.metric == rule.metric and row.arm in candidates]
    reasons = [f"{row.arm} {row.case_id}: {row.k} events ({_fmt(row.value)} {row.unit if row.has('unit') else ''})".rstrip()
               for row in rows if row.k]
    return reasons, bool(rows)


def _evaluable(rule: FailOnRule, row: ComparisonRow) -> bool:
    if rule.kind in ("worse", "suspect"):
        return row.p_adjusted is not None or bool(row.verdict_by_rule)
    return row.effect is not None and row.effect.has("ci") and row.effect.ci is not None


def _check_row(rule: FailOnRule, row: ComparisonRow) -> str | None:
    where = f"{row.candidate} vs {row.baseline} {row.case_id}"
    effect = row.effect or Effect()
    if rule.kind == "worse":
        if row.verdict != "worse":
            return None
        decided = "by its verdict rule" if row.p_adjusted is None else f"p_adj={row.p_adjusted:.3g}"
        return f"{where}: worse ({effect.name} {_fmt(effect.value)}, {decided})"
    if rule.kind == "suspect":
        if row.verdict != "suspect":
            return None
        signs = ", ".join(row.suspect_because or ())
        return f"{where}: suspect (higher, {effect.name} {_fmt(effect.value)}, while worse on {signs})"
    ci = effect.ci
    if not ci:
        return None
    offset = 1.0 if effect.scale == "ratio" else 0.0  # a ratio's "no change" is 1
    low, high = ci
    if rule.limit > 0 and low is not None and low - offset > rule.limit:
        return f"{where}: 95% CI lower bound {_fmt(low)} of the {effect.name} exceeds {_limit(rule, offset)}"
    if rule.limit < 0 and high is not None and high - offset < rule.limit:
        return f"{where}: 95% CI upper bound {_fmt(high)} of the {effect.name} is below {_limit(rule, offset)}"
    return None


def _limit(rule: FailOnRule, offset: float) -> str:
    return _fmt(offset + rule.limit) if offset else f"{rule.limit:+g}"


def _fmt(value: float | None) -> str:
    return "∞" if value is None else f"{value:.4g}"
