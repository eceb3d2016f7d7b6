"""The lossless tests under the served numerics, by simulation through the suite's own functions.

A model here is a bank of next-token distributions (raw logits over `--vocab` ids; the next row is picked
by the drawn token), so a sample is a sequence as a server makes it. The sampler draws from the row's
logits plus Gaussian noise of `--sigma` nats per logit, drawn afresh per request and position: the
difference between the forward that samples (a decode or a verify step) and the one that scores (a
prefill), as bfloat16 rounding and batch-dependent kernels make it. The scorer sees the noise-free row,
exactly as the suite's scoring request does. The suite's functions then judge the draws:

- `pit`: `pit_values` + `pit_decision` (test_pit_calibration) at each setting, `--requests` generations of
  16 tokens (the default 300 gives the CI's ~4,400 positions; 3000 is 10x);
- `two-sample`: `homogeneity_test`, `loglik_calibration` and, at T != 1 with top_p 1, `tail_mass_test`,
  4 prompts x `--two-sample-size` samples of k+2 = 7 tokens per arm, the reference drawing with
  `--reference-sigma` (default 0: all the noise on the server under test, the worst case);
- `mode`: `top_token_rate_test` over the PIT and two-sample draws at T=1 (test_mode_not_overdrawn).

`--bias C` makes the server under test accept a greedy draft (the row's mode) with min(1, C p) at positions
>= 2 (the over-accepting sampler of tools/calibration/lossless_power.py); `--tail-factor F` scales the
tail's mass (ids outside the scorer's top-K) by F at positions >= 2, the top-K taking up the difference.
`--gap` is the nucleus numerics gap the PIT allows: a dtype name (its near-tie rule,
specsuite.families.lossless.greedy.near_tie_rule) or nats. Runs use seeds first-seed .. first-seed+runs-1
and are spread over `--workers` processes; rejections are counted at the alphas with exact
(Clopper-Pearson) 95% intervals.

    python tools/calibration/lossless_numerics.py --suites pit --sigma 0.05 --requests 300 --gap float32 --runs 200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from specsuite.families.lossless.directed import DirectedPosition, top_token_rate_test  # noqa: E402
from specsuite.families.lossless.greedy import near_tie_rule  # noqa: E402
from specsuite.families.lossless.pit import nucleus_decided, pit_decision, pit_values  # noqa: E402
from specsuite.families.lossless.scoring import ScoredPosition  # noqa: E402
from specsuite.families.lossless.tempering import tempered  # noqa: E402
from specsuite.families.lossless.two_sample import UNDECIDED, homogeneity_test, loglik_calibration, tail_mass_test  # noqa: E402
from specsuite.stats import clopper_pearson  # noqa: E402

TOP_K = 20  # the suite's scoring top-K (LosslessConfig.top_k)
PIT_TOKENS = 16
DRAFT_STEPS = 5
PROMPTS = 4
BANK_ROWS = 512
NUCLEUS_SEARCH = 128
EXTRAS = ("outside", "kept", "share")  # per-run counts reported as means, not tests
CHUNK = 1024  # samples per numpy block: bounds memory at vocab x CHUNK doubles


def make_bank(vocab: int, seed: int, zipf: float, rows_in_bank: int = BANK_ROWS) -> np.ndarray:
    """BANK_ROWS raw logit rows: a Zipf-like decay over a random order with a per-row sharpness, so that
    some rows are peaked (one likely token) and some flat, as a language model's positions are."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    rows = np.empty((rows_in_bank, vocab))
    for index in range(rows_in_bank):
        sharpness = rng.uniform(0.5, 2.0) * zipf
        logits = -sharpness * np.log(ranks) + rng.normal(0.0, 0.3, vocab)
        rows[index] = logits[rng.permutation(vocab)]
    return rows - rows.max(axis=1, keepdims=True)


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def sampler_probs(logits: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """The distribution a correct sampler draws from: softmax(logits / T) cut to the nucleus (sorted within
    the NUCLEUS_SEARCH likeliest ids, the whole row where the nucleus reaches past them)."""
    probs = np.exp(log_softmax(logits / temperature))
    if top_p < 1.0:
        width = min(NUCLEUS_SEARCH, probs.shape[1])
        head = np.argpartition(-probs, width - 1, axis=1)[:, :width]
        head_probs = np.take_along_axis(probs, head, axis=1)
        order = np.argsort(-head_probs, axis=1, kind="stable")
        head, head_probs = np.take_along_axis(head, order, axis=1), np.take_along_axis(head_probs, order, axis=1)
        before = np.cumsum(head_probs, axis=1) - head_probs
        keep = np.zeros_like(probs, dtype=bool)
        np.put_along_axis(keep, head, before < top_p, axis=1)
        wide = before[:, -1] < top_p  # the nucleus may reach past the head: sort the whole row
        if wide.any():
            full = np.argsort(-probs[wide], axis=1, kind="stable")
            sorted_probs = np.take_along_axis(probs[wide], full, axis=1)
            full_keep = np.zeros_like(sorted_probs, dtype=bool)
            np.put_along_axis(full_keep, full, (np.cumsum(sorted_probs, axis=1) - sorted_probs) < top_p, axis=1)
            keep[wide] = full_keep
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(axis=1, keepdims=True)
    return probs


def biased(probs: np.ndarray, draft: np.ndarray, c: float) -> np.ndarray:
    """Accept the greedy draft with min(1, c p), else draw from p without it (one-hot q's residual)."""
    rows = np.arange(len(probs))
    p_draft = probs[rows, draft]
    accept = np.minimum(1.0, c * p_draft)
    scale = np.where(p_draft < 1.0, (1.0 - accept) / np.maximum(1.0 - p_draft, 1e-300), 0.0)
    out = probs * scale[:, None]
    out[rows, draft] = accept
    return out


def tail_scaled(probs: np.ndarray, top_mask: np.ndarray, factor: float) -> np.ndarray:
    """The tail's mass (ids outside the scorer's top-K) times factor, the top-K renormalised to the rest."""
    tail = np.where(top_mask, 0.0, probs).sum(axis=1, keepdims=True)
    new_tail = np.minimum(factor * tail, 1.0)
    top_scale = (1.0 - new_tail) / np.maximum(1.0 - tail, 1e-300)
    tail_scale = np.where(tail > 0, new_tail / np.maximum(tail, 1e-300), 0.0)
    return np.where(top_mask, probs * top_scale, probs * tail_scale)


_EXACT: dict[tuple[int, float, float], np.ndarray] = {}


def exact_probs(bank: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """The noise-free sampler's distribution of every bank row (computed once per process and setting)."""
    key = (id(bank), temperature, top_p)
    if key not in _EXACT:
        _EXACT.clear()
        _EXACT[key] = sampler_probs(bank, temperature, top_p)
    return _EXACT[key]


def draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cumulative = np.cumsum(probs, axis=1)
    u = rng.random(len(probs)) * cumulative[:, -1]
    return np.minimum((cumulative < u[:, None]).sum(axis=1), probs.shape[1] - 1)


def modified(probs: np.ndarray, logits: np.ndarray, draft_logits: np.ndarray, bias: float, tail_factor: float) -> np.ndarray:
    """The server under test's distribution at positions >= 2: the tail's mass scaled, the draft over-accepted."""
    if tail_factor != 1.0:
        top = np.argpartition(-logits, TOP_K - 1, axis=1)[:, :TOP_K]
        mask = np.zeros_like(probs, dtype=bool)
        np.put_along_axis(mask, top, True, axis=1)
        probs = tail_scaled(probs, mask, tail_factor)
    if bias != 1.0:
        probs = biased(probs, np.argmax(draft_logits, axis=1), bias)
    return probs


def generate(bank: np.ndarray, starts: np.ndarray, steps: int, temperature: float, top_p: float, sigma: float,
             rng: np.random.Generator, bias: float = 1.0, tail_factor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Token and row per sample and step; position 1 is the prefill's token (no bias, no tail change)."""
    n, rows_in_bank = len(starts), len(bank)
    tokens, rows = np.empty((n, steps), dtype=np.int64), np.empty((n, steps), dtype=np.int64)
    current = starts % rows_in_bank
    first = later = None
    if sigma == 0:  # every row's distribution is fixed: draw by row from its CDF
        first = np.cumsum(exact_probs(bank, temperature, top_p), axis=1)
        later = np.cumsum(modified(exact_probs(bank, temperature, top_p), bank, bank, bias, tail_factor), axis=1) if bias != 1 or tail_factor != 1 else first
    for step in range(steps):
        rows[:, step] = current
        if first is not None:
            cdf = first if step == 0 else later
            u = rng.random(n)
            for row in np.unique(current):
                chosen = current == row
                tokens[chosen, step] = np.minimum(np.searchsorted(cdf[row], u[chosen] * cdf[row, -1], side="right"), bank.shape[1] - 1)
        else:
            for begin in range(0, n, CHUNK):
                block = current[begin:begin + CHUNK]
                logits = bank[block]
                noisy = logits + rng.normal(0.0, sigma, logits.shape)
                probs = sampler_probs(noisy, temperature, top_p)
                if step > 0:
                    probs = modified(probs, logits, noisy, bias, tail_factor)
                tokens[begin:begin + CHUNK, step] = draw(probs, rng)
        current = (tokens[:, step] * 7919 + current * 31) % rows_in_bank
    return tokens, rows


def scored(bank_logprobs: np.ndarray, row: int, token: int) -> ScoredPosition:
    """What the suite's scoring request returns at one position: the raw top-K and the token's own logprob."""
    logprobs = bank_logprobs[row]
    top = np.argpartition(-logprobs, TOP_K - 1)[:TOP_K]
    top = top[np.argsort(-logprobs[top], kind="stable")]
    return ScoredPosition(token_id=int(token), top_ids=tuple(int(i) for i in top), top_logprobs=tuple(float(v) for v in logprobs[top]),
                          token_logprob=float(logprobs[token]))


def setting_key(temperature: float, top_p: float) -> str:
    return f"t={temperature:g}-top_p={top_p:g}"


def one_run(job: dict[str, Any]) -> dict[str, float]:
    """Every chosen test's p-value for one seed."""
    args, seed = job["args"], job["seed"]
    bank = make_bank(args["vocab"], args["bank_seed"], args["zipf"], args["bank_rows"])
    bank_logprobs = log_softmax(bank)
    rng = np.random.default_rng(seed)
    results: dict[str, float] = {}
    mode_positions: list[DirectedPosition] = []
    top_cache: dict[int, ScoredPosition] = {}

    def scored_at(row: int, token: int) -> ScoredPosition:
        base = top_cache.get(row)
        if base is None:
            base = top_cache[row] = scored(bank_logprobs, row, 0)
        return ScoredPosition(token_id=int(token), top_ids=base.top_ids, top_logprobs=base.top_logprobs,
                              token_logprob=float(bank_logprobs[row, token]))

    def mode_of(row: int, token: int) -> DirectedPosition:
        logprobs = bank_logprobs[row]
        mode = int(np.argmax(logprobs))
        return DirectedPosition(mode_prob=float(np.exp(logprobs[mode])), is_mode=token == mode, own_prob=float(np.exp(logprobs[token])), role=None)

    for temperature, top_p in args["settings"]:
        key = setting_key(temperature, top_p)
        common = {"sigma": args["sigma"], "bias": args["bias"], "tail_factor": args["tail_factor"]}
        if "pit" in args["suites"]:
            starts = rng.integers(0, len(bank), args["requests"])
            tokens, rows = generate(bank, starts, PIT_TOKENS, temperature, top_p, rng=rng, **common)
            positions = [tempered(scored_at(r, t), temperature, args["vocab"]) for r, t in zip(rows[:, 1:].ravel(), tokens[:, 1:].ravel(), strict=True)]
            gap = args["gap"] / temperature
            values = pit_values(positions, top_p, int(rng.integers(2**31)), gap=gap)
            decision = pit_decision(values, args["alpha"])
            results[f"pit {key}"] = decision.p_value
            results[f"pit {key} outside"] = values.outside_support
            results[f"pit {key} kept"] = len(values.values)
            if temperature == 1.0 and top_p == 1.0:
                mode_positions += [mode_of(r, t) for r, t in zip(rows[:, 1:].ravel(), tokens[:, 1:].ravel(), strict=True)]
        if "two-sample" in args["suites"]:
            size, steps = args["two_sample_size"], DRAFT_STEPS + 2
            starts = np.repeat(np.arange(PROMPTS) * 101 + 5, size)
            arms = {}
            for arm, arm_args in (("test", common), ("reference", {"sigma": args["reference_sigma"]})):
                tokens, rows = generate(bank, starts, steps, temperature, top_p, rng=rng, **arm_args)
                loglik = bank_logprobs[rows[:, 1:], tokens[:, 1:]].sum(axis=1)
                tail = np.array([sum(int(t) not in scored_at(int(r), 0).top_ids for r, t in zip(rr[1:], tt[1:], strict=True))
                                 for rr, tt in zip(rows, tokens, strict=True)]) if temperature != 1.0 and top_p == 1.0 else None
                shown = tokens.copy()  # the homogeneity tables' categories: undecided nucleus edges as one (LosslessWorkload._edge_masked)
                if top_p < 1.0:
                    undecided = {int(r): not nucleus_decided(tempered(scored_at(int(r), 0), temperature, args["vocab"]), top_p,
                                                             args["gap"] / temperature) for r in np.unique(rows[:, 1:])}
                    mask = np.vectorize(undecided.__getitem__)(rows[:, 1:])
                    shown[:, 1:][mask] = UNDECIDED
                arms[arm] = (shown, rows, loglik, tail)
                if arm == "test" and temperature == 1.0 and top_p == 1.0:
                    mode_positions += [mode_of(r, t) for r, t in zip(rows[:, 1:].ravel(), tokens[:, 1:].ravel(), strict=True)]

            def per_prompt(values: np.ndarray, size: int = size) -> list[list[Any]]:
                return [values[p * size:(p + 1) * size].tolist() for p in range(PROMPTS)]

            homogeneity = homogeneity_test(per_prompt(arms["test"][0]), per_prompt(arms["reference"][0]), list(range(2, steps + 1)), args["alpha"])
            results[f"two-sample {key}"] = homogeneity.p_value
            results[f"loglik {key}"] = loglik_calibration(per_prompt(arms["test"][2]), per_prompt(arms["reference"][2]), args["alpha"]).p_value
            if arms["test"][3] is not None:
                tail_result = tail_mass_test(per_prompt(arms["test"][3]), per_prompt(arms["reference"][3]), args["alpha"])
                results[f"tail-mass {key}"] = tail_result.p_value
                results[f"tail-mass {key} reference tail share"] = tail_result.reference_tail_tokens / (steps - 1)
    if mode_positions and "mode" in args["suites"]:
        results["mode"] = top_token_rate_test(mode_positions, args["alpha"]).p_value
    return results


def parse_gap(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return near_tie_rule(text, "--gap").tolerance


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default="pit,two-sample,mode", help="comma list of pit, two-sample, mode")
    parser.add_argument("--settings", default="1.0,0.7:0.9", help="T or T:top_p, comma separated (the suite's default)")
    parser.add_argument("--sigma", type=float, default=0.0, help="sampler-vs-scorer logit noise, nats (bfloat16-like: 0.05, 0.1)")
    parser.add_argument("--reference-sigma", type=float, default=0.0, help="the two-sample reference's own sampling noise (default 0)")
    parser.add_argument("--gap", default="float32", help="the PIT's nucleus numerics gap: a dtype (float32, bfloat16, ...) or nats")
    parser.add_argument("--requests", type=int, default=300, help="PIT generations of 16 tokens per setting (CI 300; 10x: 3000)")
    parser.add_argument("--two-sample-size", type=int, default=200, help="two-sample draws per prompt and arm (CI 200; 10x: 2000)")
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--bank-rows", type=int, default=BANK_ROWS, help="distinct next-token distributions")
    parser.add_argument("--zipf", type=float, default=2.2, help="the bank's Zipf exponent (its sharpness is x0.5 .. x2 of it per row)")
    parser.add_argument("--bias", type=float, default=1.0, help="acceptance bias c of the server under test (1: correct)")
    parser.add_argument("--tail-factor", type=float, default=1.0, help="scale of the tail's mass at positions >= 2 (1: correct)")
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--alphas", default="0.001,0.01,0.05", help="alphas to count rejections at")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--bank-seed", type=int, default=12345)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default=None, help="append a JSON line with the summary and every run's p-values")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = []
    for item in args.settings.split(","):
        temperature, _, top_p = item.partition(":")
        settings.append((float(temperature), float(top_p) if top_p else 1.0))
    shared = {"suites": set(args.suites.split(",")), "settings": settings, "sigma": args.sigma, "reference_sigma": args.reference_sigma,
              "gap": parse_gap(args.gap),
              "requests": args.requests, "two_sample_size": args.two_sample_size, "vocab": args.vocab, "zipf": args.zipf, "bank_rows": args.bank_rows,
              "bias": args.bias, "tail_factor": args.tail_factor, "alpha": args.alpha, "bank_seed": args.bank_seed}
    jobs = [{"args": shared, "seed": seed} for seed in range(args.first_seed, args.first_seed + args.runs)]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = list(pool.map(one_run, jobs))
    alphas = [float(a) for a in args.alphas.split(",")]
    summary: dict[str, Any] = {}
    tests = [name for name in runs[0] if not name.endswith(EXTRAS)]
    for name in tests:
        values = [run[name] for run in runs]
        counts = {}
        for alpha in alphas:
            rejected = sum(v < alpha for v in values)
            low, high = clopper_pearson(rejected, len(values))
            counts[str(alpha)] = {"rejected": rejected, "runs": len(values), "ci95": [float(low), float(high)]}
        summary[name] = counts
    extras = {name: float(np.mean([run[name] for run in runs])) for name in runs[0] if name.endswith(EXTRAS)}
    label = args.label or (f"sigma={args.sigma:g} gap={args.gap} requests={args.requests} two-sample={args.two_sample_size} "
                           f"bias={args.bias:g} tail={args.tail_factor:g}")
    print(f"{label}: {args.runs} runs, seeds {args.first_seed}..{args.first_seed + args.runs - 1}, {time.perf_counter() - started:.0f} s")
    for name, counts in summary.items():
        shown = "; ".join(f"{c['rejected']}/{c['runs']} at {a} [{c['ci95'][0]:.3f}, {c['ci95'][1]:.3f}]" for a, c in counts.items())
        print(f"  {name}: {shown}")
    for name, value in extras.items():
        print(f"  mean {name}: {value:.4g}")
    if args.out:
        with open(args.out, "a") as handle:
            handle.write(json.dumps({"label": label, "args": vars(args), "summary": summary, "extras": extras, "runs": runs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
