"""Greedy equality's near-tie flip test at production size: false alarms on correct bfloat16 and fp8-KV servers, and
power against a lossy server that takes the runner-up wherever its own top-2 gap is under 0.25 nats.

Each position is one teacher-forced position of the suite's greedy test (positions are judged on their own, so they are
drawn independently here): five true logits, the top at |logit| ~ U[8, 24), the gaps below it exponential (mean
`--gap-mean` nats; the density at 0 sets how many near ties a run sees). Three forwards see them: the candidate's verify,
the reference's decode (the control's greedy output) and the reference's scoring prefill, each adding Gaussian noise
of `sigma` nats per logit and rounding to bfloat16. The candidate takes its argmax (the lossy arm: its runner-up where
its own gap is below 0.25 nats). The suite's own functions judge them (greedy.judge_output, control_rule,
near_tie_excess) at the bfloat16 tolerance, 0.25 nats. Size: 10x the CI's greedy sample, 240 outputs x 64 tokens at
one concurrency.

    PYTHONPATH=. python tools/calibration/greedy_near_ties.py --runs 150 --lossy-runs 30 --seed 41
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from specsuite.families.lossless.greedy import NearTieCounts, control_rule, judge_output, near_tie_excess, near_tie_rule
from specsuite.families.lossless.scoring import ScoredPosition

OUTPUTS, TOKENS, CANDIDATES = 240, 64, 5
LOSSY_GAP = 0.25


def bfloat16(x: np.ndarray) -> np.ndarray:
    """Round float values to bfloat16 (nearest, ties to even), returned as float64."""
    bits = x.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.view(np.float32).astype(np.float64)


def forward(true: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return bfloat16(true + rng.normal(0.0, sigma, true.shape))


def scored(tokens: np.ndarray, logits: np.ndarray) -> list[ScoredPosition]:
    """Teacher-forced positions as the reference's scoring prefill reports them (log-softmax over the five)."""
    logprobs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    order = np.argsort(-logprobs, axis=1, kind="stable")
    rows = np.arange(len(tokens))
    return [ScoredPosition(int(t), tuple(int(i) for i in o), tuple(float(v) for v in lp[o]), float(lp[t]))
            for t, o, lp in zip(tokens, order, logprobs, strict=True)] if len(rows) else []


def one_run(rng: np.random.Generator, sigma: float, lossy: bool, gap_mean: float) -> tuple[bool, int, int, int, bool, float]:
    """(failed, real flips, near-tie flips, near-tie positions, near-tie excess, the count test's p: the larger of the
    two) of one simulated greedy test at one concurrency."""
    n = OUTPUTS * TOKENS
    top = rng.uniform(8.0, 24.0, n)
    true = top[:, None] - np.concatenate((np.zeros((n, 1)), np.cumsum(rng.exponential(gap_mean, (n, CANDIDATES - 1)), axis=1)), axis=1)
    candidate, decode, prefill = forward(true, sigma, rng), forward(true, sigma, rng), forward(true, sigma, rng)
    chosen = candidate.argmax(axis=1)
    if lossy:
        ranked = np.sort(candidate, axis=1)
        runner_up = np.argsort(-candidate, axis=1, kind="stable")[:, 1]
        chosen = np.where(ranked[:, -1] - ranked[:, -2] < LOSSY_GAP, runner_up, chosen)
    control_tokens = decode.argmax(axis=1)
    rule = near_tie_rule("bfloat16", "simulation")
    cut = [slice(i * TOKENS, (i + 1) * TOKENS) for i in range(OUTPUTS)]
    control_positions = [(control_tokens[c].tolist(), scored(control_tokens[c], prefill[c])) for c in cut]
    rule = control_rule(rule, [judge_output(i, ids, p, None, rule) for i, (ids, p) in enumerate(control_positions)])
    control = NearTieCounts.of([judge_output(i, ids, p, None, rule) for i, (ids, p) in enumerate(control_positions)])
    judged = [judge_output(i, chosen[c].tolist(), scored(chosen[c], prefill[c]), None, rule) for i, c in enumerate(cut)]
    counts = NearTieCounts.of(judged)
    real = sum(d.kind == "real" for j in judged for d in j.divergences)
    excess = near_tie_excess(counts, control)
    p = max(excess.model_p, excess.control_p if excess.control_p is not None else 0.0)
    return real > 0 or excess.excess, real, counts.flips, counts.positions, excess.excess, p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument("--lossy-runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--gap-mean", type=float, default=2.0)
    args = parser.parse_args()
    arms = [("bfloat16, sigma 0.02/logit", 0.02, False, args.runs), ("fp8 KV cache, sigma 0.04/logit", 0.04, False, args.runs),
            ("the noise model's edge, sigma 0.0625/logit (gap sd 0.125 = tolerance / 2)", 0.0625, False, args.runs),
            ("lossy verify (runner-up under 0.25 nats), bfloat16 noise", 0.02, True, args.lossy_runs)]
    for index, (name, sigma, lossy, runs) in enumerate(arms):
        rng = np.random.default_rng([args.seed, index])
        results = [one_run(rng, sigma, lossy, args.gap_mean) for _ in range(runs)]
        failed = sum(r[0] for r in results)
        low, high = stats.binomtest(failed, runs).proportion_ci(0.95, method="exact")
        print(f"{name}: failed {failed}/{runs} = {failed / runs:.4f} (95% CI {low:.4f}-{high:.4f}); runs with a real flip "
              f"{sum(r[1] > 0 for r in results)}; runs with a near-tie excess {sum(r[4] for r in results)}; "
              f"near-tie flips per run {np.mean([r[2] for r in results]):.1f} of "
              f"{np.mean([r[3] for r in results]):.1f} near-tie positions; count test p < 0.05 in {sum(r[5] < 0.05 for r in results)}, "
              f"< 0.01 in {sum(r[5] < 0.01 for r in results)}")


if __name__ == "__main__":
    main()
