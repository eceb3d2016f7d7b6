"""The absolute gate of `--profile nightly`: rules a candidate must meet on its own, with or without a baseline.

A comparison needs two arms; a nightly against one server (or a baseline that is broken too) has none, so these
rules judge each candidate arm (every arm but the baseline; the only arm of a one-server run) by itself:

- `out_of_range_ids`: any id < 0 or >= vocab_size in the correctness cases (invalid ids less padded-row ids);
- `fallback_ids`: any `vocab_size-1` in the correctness cases, where the model has padded rows (without them
  that id is a real token: a lead, not a verdict);
- each registered family's own rules (`WorkloadFamily.absolute_rules`), in registry order: the correctness suite's
  padded-row test failed (`padded_rows`: the suite judges padded rows; this gate reads its verdict, whatever rule the
  suite applies), the GSM8K accuracy test failed (`gsm8k_floor`, its floor `--gsm8k-min-accuracy`), any lossless test
  failed (`lossless`), any integrity violation recorded or the session's integrity test failed (`integrity`).

Test verdicts come from each session's JUnit XML as the merge recorded it (`repeats[].tests`,
specsuite.orchestration.junit).  Statistical comparisons against the same server's T=0 control are not here: they
are the suites' (and a nightly's `--fail-on`) business, and an absolute rule must not fire on a correct server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specsuite.families.registry import families
from specsuite.families.workload_family import AbsoluteRule
from specsuite.results.types import Arm, ArmVocab, Case, Document, FailedTest

# The rules on the correctness cases every repeat holds; the families' own follow (`rules`).
CASE_RULES: dict[str, str] = {
    "out_of_range_ids": "ids < 0 or >= vocab_size (any)",
    "fallback_ids": "sampler fallback ids vocab_size-1 (any, where the model has padded rows)",
}


def family_rules() -> tuple[AbsoluteRule, ...]:
    """Every registered family's absolute rules, in registry order (read at the call: a family registered later counts)."""
    return tuple(rule for family in families() for rule in family.absolute_rules)


def rules() -> dict[str, str]:
    """Every absolute rule's name and what it means: the rules on the cases, then the families'."""
    return {**CASE_RULES, **{rule.name: rule.meaning for rule in family_rules()}}


@dataclass(frozen=True)
class Finding:
    """One absolute rule a candidate arm broke, with a one-line reason."""

    arm: str
    rule: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"arm": self.arm, "rule": self.rule, "reason": self.reason}

    @property
    def line(self) -> str:
        return f"{self.arm}: {self.rule} ({rules()[self.rule]}): {self.reason}"


@dataclass
class AbsoluteOutcome:
    """What the absolute rules found, and which arms they judged."""

    arms: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"arms": list(self.arms), "rules": rules(), "findings": [f.to_dict() for f in self.findings]}


def verdict_lines(outcome: AbsoluteOutcome | None) -> list[str]:
    """One verdict line per arm the absolute rules failed, naming the rules, so that the verdict section itself says
    what the gate found (a one-server run's family lines give counts, not the gate's judgement)."""
    failed: dict[str, list[str]] = {}
    for finding in outcome.findings if outcome is not None else []:
        failed.setdefault(finding.arm, []).append(finding.rule)
    return [f"**{arm}** · absolute gate: fails {', '.join(dict.fromkeys(rules))} (the gate's lines say why)"
            for arm, rules in failed.items()]


def candidate_arms(document: Document) -> list[str]:
    """Every arm but the baseline; the only arm when the results hold one."""
    order = [name for name in (document.arm_order or list(document.arms)) if name in document.arms]
    if len(order) < 2:
        return order
    baseline = document.baseline_arm if document.baseline_arm in order else order[-1]
    return [name for name in order if name != baseline]


def judge_absolute(document: Document) -> AbsoluteOutcome:
    """Apply every absolute rule to every candidate arm (module docstring)."""
    outcome = AbsoluteOutcome(arms=candidate_arms(document))
    for name in outcome.arms:
        outcome.findings += [Finding(name, rule, reason) for rule, reason in _arm_findings(document.arms[name])]
    return outcome


def _arm_findings(arm: Arm) -> list[tuple[str, str]]:
    cases = arm.cases()
    found: list[tuple[str, str]] = []
    out_of_range = [(case, _count(case, "invalid_id") - _count(case, "padded_row_id")) for case in cases]
    out_of_range = [(case, k) for case, k in out_of_range if k > 0]
    if out_of_range:
        found.append(("out_of_range_ids", _where(out_of_range, cases, "ids outside [0, vocab_size)")))
    vocab = ArmVocab.from_dict(arm.vocab or {})
    if int(vocab.padded_row_count or 0) > 0:
        fallback = [(case, _count(case, "fallback_id")) for case in cases if _count(case, "fallback_id")]
        if fallback:
            found.append(("fallback_ids", _where(fallback, cases, f"fallback ids ({int(vocab.vocab_size or 0) - 1})")))
    failed = [test for repeat in arm.repeats for test in (repeat.tests.failed if repeat.tests is not None else [])]
    for rule in family_rules():
        hits = [test for test in failed if test.module == rule.test_module and (not rule.test_functions or test.function in rule.test_functions)]
        recorded = sum(rule.recorded(repeat.workloads) for repeat in arm.repeats) if rule.recorded is not None else 0
        if recorded:
            found.append((rule.name, f"{recorded} violation(s) recorded" + (f"; {_tests(hits)}" if hits else "")))
        elif hits:
            found.append((rule.name, _tests(hits)))
    return found


def _count(case: Case, detector: str) -> int:
    return int(case.detector(detector))


def _where(hits: list[tuple[Case, int]], cases: list[Case], what: str) -> str:
    # Hits only in sampled cases are counted against the sampled tokens, the denominator the correctness
    # family's report line uses for the same ids, so one count never appears over two denominators.
    sampled_only = all(float(case.temperature or 0.0) > 0 for case, _ in hits)
    counted = [case for case in cases if float(case.temperature or 0.0) > 0] if sampled_only else cases
    tokens = sum(int(case.n_tokens or 0) for case in counted)
    shown = ", ".join(f"{case.case_id}: {k}" for case, k in hits[:4]) + (", ..." if len(hits) > 4 else "")
    return f"{sum(k for _, k in hits):,} {what} in {tokens:,} {'sampled ' if sampled_only else ''}tokens ({shown})"


def _tests(hits: list[FailedTest]) -> str:
    first = hits[0]
    more = f" and {len(hits) - 1} more" if len(hits) > 1 else ""
    return f"{first.test} {first.kind}{more}: {first.message or 'no message'}"
