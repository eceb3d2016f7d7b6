"""Synthetic merged results dicts for the A/B comparison, fail-on and report tests.

Shapes follow `specsuite run`'s merged results.json: `arms.<name>.repeats[].cases` (the
correctness workload's CaseResult.to_dict fields the analysis reads) and `.workloads` (GSM8K
result dicts and bench_serving-style dicts with per-token `itls` in seconds).  Every draw comes
from numpy's default_rng with an explicit seed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

CASES = ((0.0, 1.0), (0.6, 0.95), (1.0, 1.0))
TOKENS_PER_CASE = 2000
REQUESTS_PER_CASE = 24


def case_id(temperature: float, top_p: float) -> str:
    fmt = lambda v: f"{v:g}" if v != int(v) else f"{int(v)}"  # noqa: E731 - mirrors SamplingCase.case_id
    return f"t={fmt(temperature)}-top_p={fmt(top_p)}"


def _detector(count: int, total: int) -> dict[str, Any]:
    return {"count": count, "total": total, "unit": "tokens", "responses": REQUESTS_PER_CASE,
            "responses_with_hits": min(count, REQUESTS_PER_CASE), "rate": count / total, "upper95": 1.0}


def make_case(rng: np.random.Generator, temperature: float, top_p: float, *, invalid_rate: float, accept_mean: float,
              fragment_rate: float = 0.002, counters: bool = True) -> dict[str, Any]:
    """One sampling case: Poisson event counts over a fixed token count, lognormal accept lengths."""
    invalid = int(rng.poisson(invalid_rate * TOKENS_PER_CASE)) if temperature > 0 else 0
    stray = int(rng.poisson(8 * invalid_rate * TOKENS_PER_CASE)) if temperature > 0 else 0
    fragments = int(rng.poisson(fragment_rate * TOKENS_PER_CASE))
    accept = (accept_mean * rng.lognormal(0.0, 0.15, REQUESTS_PER_CASE)).tolist()
    case = {
        "case_id": case_id(temperature, top_p), "temperature": temperature, "top_p": top_p, "n_requests": REQUESTS_PER_CASE,
        "n_tokens": TOKENS_PER_CASE,
        "detectors": {"invalid_id": _detector(invalid, TOKENS_PER_CASE), "fallback_id": _detector(invalid, TOKENS_PER_CASE),
                      "padded_row_id": _detector(invalid, TOKENS_PER_CASE), "stray_char": _detector(stray, TOKENS_PER_CASE),
                      "fragment_id": _detector(fragments, TOKENS_PER_CASE)},
        "server_counters": {},
        "acceptance": {"per_request": accept, "mean": float(np.mean(accept))},
    }
    if counters:
        batches = 120 if temperature > 0 else 0
        case["server_counters"] = {
            "specsuite_refserver:draft_probs_nonfinite_entries_total": float(invalid * 900),
            "specsuite_refserver:sampler_batches_total": float(batches),
            "specsuite_refserver:sampler_fallback_emissions_total": float(invalid),
            "sglang:generation_tokens_total": float(TOKENS_PER_CASE),
        }
    return case


def gsm8k_run(correct: list[bool], invalid: int, temperature: float = 0.0) -> dict[str, Any]:
    """A GSM8KResult.to_dict()-shaped run over questions 0..n-1 (same prompts in every arm)."""
    n = len(correct)
    k = int(sum(correct))
    return {
        "workload": "gsm8k", "config": {"temperature": temperature, "top_p": 1.0, "num_questions": n},
        "n_questions": n, "n_answered": n,
        "definitions": {"sglang": {"n_correct": k, "n_invalid": invalid, "accuracy": {"k": k, "n": n, "value": k / n},
                                   "invalid": {"k": invalid, "n": n, "value": invalid / n}}},
        "per_question": {"question_index": list(range(n)),
                         "prompt_hash": [hashlib.sha256(str(i).encode()).hexdigest()[:16] for i in range(n)],
                         "correct": {"sglang": list(correct)}},
    }


def bench_run(rng: np.random.Generator, itl_ms: float, throughput: float, *, requests: int = 40, tokens: int = 60) -> dict[str, Any]:
    """A bench_serving-style result with per-request ITL lists in seconds (gamma noise around itl_ms)."""
    itls = (rng.gamma(40.0, itl_ms / 40.0, size=(requests, tokens)) / 1000.0).tolist()
    return {"config": {"temperature": 0.0, "top_p": 1.0}, "median_itl_ms": float(np.median(itls) * 1000.0),
            "output_throughput": throughput * float(rng.lognormal(0.0, 0.004)), "itls": itls}


def make_results(arms: dict[str, list[dict[str, Any]]], *, repeats: int | None = None) -> dict[str, Any]:
    """A merged results dict; arms maps name -> list of repeats (each {cases, workloads}); last arm is the baseline."""
    order = list(arms)
    return {
        "schema_version": 1, "run_id": "synthetic", "status": "complete", "seed": 0, "profile": "smoke",
        "repeats": repeats or max(len(r) for r in arms.values()), "arm_order": order, "baseline_arm": order[-1],
        "arms": {name: {"spec": {"name": name}, "identity": {"version": "0.5.23"},
                        "repeats": [{"repeat": i + 1, "seed": i, "exit_code": 0, **rep} for i, rep in enumerate(reps)]}
                 for name, reps in arms.items()},
    }


def arm_repeats(seed: int, *, invalid_rate: float, accept_mean: float, repeats: int = 1,
                workloads: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Repeats of one arm over CASES; the same workloads dict is attached to every repeat."""
    rng = np.random.default_rng(seed)
    return [{"cases": [make_case(rng, t, p, invalid_rate=invalid_rate, accept_mean=accept_mean) for t, p in CASES],
             "workloads": dict(workloads or {})} for _ in range(repeats)]


def nofix_vs_fix(seed: int = 1, repeats: int = 1) -> dict[str, Any]:
    """The recycled-draft_probs bug's shape: the candidate emits invalid ids and accepts more; the baseline is clean."""
    return make_results({"nofix": arm_repeats(seed, invalid_rate=0.015, accept_mean=4.2, repeats=repeats),
                         "fix": arm_repeats(seed + 1000, invalid_rate=0.0, accept_mean=2.4, repeats=repeats)})


def null_pair(seed: int, repeats: int = 1) -> dict[str, Any]:
    """Two arms drawn from one distribution (fix against fix with different seeds)."""
    return make_results({"fix_a": arm_repeats(seed, invalid_rate=0.0, accept_mean=2.4, repeats=repeats),
                         "fix_b": arm_repeats(seed + 5000, invalid_rate=0.0, accept_mean=2.4, repeats=repeats)})


def with_workloads(seed: int = 3, *, accuracy_drop: float = 0.12, itl_slowdown: float = 0.05, repeats: int = 1) -> dict[str, Any]:
    """nofix_vs_fix plus GSM8K (candidate less accurate, more invalid) and a bench (candidate slower)."""
    rng = np.random.default_rng(seed)
    results = nofix_vs_fix(seed, repeats)
    truth = rng.random(300) < 0.9
    flips = rng.random(300) < accuracy_drop
    for name, is_candidate in (("nofix", True), ("fix", False)):
        for repeat in results["arms"][name]["repeats"]:
            correct = [bool(c and not (is_candidate and f)) for c, f in zip(truth, flips, strict=False)]
            repeat["workloads"] = {
                "gsm8k": gsm8k_run(correct, invalid=12 if is_candidate else 0),
                "bench": bench_run(rng, 10.0 * (1 + itl_slowdown if is_candidate else 1.0),
                                   200.0 / (1 + itl_slowdown if is_candidate else 1.0)),
            }
    return results
