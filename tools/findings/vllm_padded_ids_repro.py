#!/usr/bin/env python3
"""Minimal reproduction: vLLM (CPU build) with speculative decoding emits padded vocabulary ids.

Finding: docs/findings/vllm-spec-padded-ids.md

The project's tiny Llama (specsuite/fixtures/vllm_models/target) has a tokenizer of 8100 ids and
vocab_size 8128; ids >= 8100 are padded rows that the target gives log-probability ~ -240.
A correct sampler (speculative or not) must essentially never emit them.

For each (url, temperature, top_p) this sends N seeded completions and prints
  padded ids emitted / tokens, an exact Clopper-Pearson 95% interval (if scipy imports),
  one example (position, id, reported logprob), and, where the server returns
  metrics.speculative_decoding.per_step_accepted, whether the padded ids were
  accepted drafts, recovered tokens or bonus tokens.

Stdlib only (urllib + json); scipy is optional (only for the interval).

Example:
  python tools/findings/vllm_padded_ids_repro.py \
      --url http://127.0.0.1:8141 http://127.0.0.1:8142 \
      --requests 20 --temperatures 0 0.6 1.0 --top-p 0.95 1.0
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

PROMPTS = [
    "Henry was",
    "The old sailor walked along the",
    "Question: A baker has 12 loaves and sells 5. How many loaves are left?\nAnswer:",
    "Once upon a time",
]


def clopper_pearson(k: int, n: int, alpha: float = 0.05):
    """Exact two-sided interval, or None when scipy is not importable."""
    try:
        from scipy.stats import beta
    except Exception:
        return None
    if n == 0:
        return (0.0, 1.0)
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return (lo, hi)


def post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(
        url.rstrip("/") + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def classify(token_ids: list[int], spec: dict | None) -> list[str] | None:
    """Label each output token 'first' (prefill step), 'accepted' (accepted draft),
    'recovered' (sampled by the rejection sampler after a rejection) or 'bonus'.

    Each speculative step emits per_step_accepted[i] accepted drafts, then one
    recovered token (if a draft was rejected) or one bonus token (if all
    per_step_drafted[i] drafts were accepted). Returns None when the counts do
    not add up (e.g. a step without drafts), so no label is guessed.
    """
    if not spec or "per_step_accepted" not in spec or "per_step_drafted" not in spec:
        return None
    labels = ["first"]
    for acc, drafted in zip(spec["per_step_accepted"], spec["per_step_drafted"], strict=False):
        labels += ["accepted"] * acc
        labels.append("bonus" if acc == drafted else "recovered")
    if len(labels) < len(token_ids) or len(labels) > len(token_ids) + max(spec["per_step_drafted"] or [0]) + 1:
        return None
    return labels[: len(token_ids)]


def run_setting(args, url: str, temperature: float, top_p: float) -> dict:
    n_tok = n_pad = 0
    example = None
    ids_seen: dict[int, int] = {}
    kinds: dict[str, int] = {}
    unclassified = errors = 0
    for i in range(args.requests):
        body = {
            "model": args.model,
            "prompt": PROMPTS[i % len(PROMPTS)],
            "max_tokens": args.max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "seed": 1000 + i,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
        }
        try:
            out = post(url, body, args.timeout)
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            errors += 1
            print(f"  request {i} failed: {e!r}", file=sys.stderr)
            continue
        choice = out["choices"][0]
        ids = choice["token_ids"]
        lps = (choice.get("logprobs") or {}).get("token_logprobs") or [None] * len(ids)
        spec = ((out.get("metrics") or {}).get("speculative_decoding")) or None
        labels = classify(ids, spec)
        n_tok += len(ids)
        for pos, (tid, lp) in enumerate(zip(ids, lps, strict=False)):
            if tid >= args.real_vocab:
                n_pad += 1
                ids_seen[tid] = ids_seen.get(tid, 0) + 1
                if example is None:
                    example = (i, pos, tid, lp)
                if labels is not None:
                    kinds[labels[pos]] = kinds.get(labels[pos], 0) + 1
                elif spec is not None:
                    unclassified += 1
    return dict(url=url, temperature=temperature, top_p=top_p, tokens=n_tok, padded=n_pad,
                ci=clopper_pearson(n_pad, n_tok), example=example, ids=ids_seen,
                kinds=kinds, unclassified=unclassified, errors=errors)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", nargs="+", default=["http://127.0.0.1:8141"])
    ap.add_argument("--requests", type=int, default=20, help="seeded requests per setting")
    ap.add_argument("--top-p", nargs="+", type=float, default=[0.95, 1.0])
    ap.add_argument("--temperatures", nargs="+", type=float, default=[0.0, 0.6, 1.0])
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--model", default="specsuite-tiny-llama")
    ap.add_argument("--real-vocab", type=int, default=8100, help="ids >= this are padded rows")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()

    rows = []
    print("url | T | top_p | padded/tokens | rate | CP95 | example (req,pos,id,logprob) | ids | as")
    for url in args.url:
        for t in args.temperatures:
            for p in args.top_p:
                t0 = time.time()
                r = run_setting(args, url, t, p)
                r["seconds"] = round(time.time() - t0, 1)
                rows.append(r)
                rate = r["padded"] / r["tokens"] if r["tokens"] else float("nan")
                ci = "n/a (no scipy)" if r["ci"] is None else f"[{r['ci'][0]:.4f}, {r['ci'][1]:.4f}]"
                ex = "-" if r["example"] is None else "(%d,%d,%d,%s)" % (
                    r["example"][0], r["example"][1], r["example"][2],
                    "None" if r["example"][3] is None else f"{r['example'][3]:.1f}")
                kinds = dict(r["kinds"])
                if r["unclassified"]:
                    kinds["unclassified"] = r["unclassified"]
                print(f"{url} | {t} | {p} | {r['padded']}/{r['tokens']} | {rate:.4f} | {ci} | {ex} | "
                      f"{r['ids'] or '-'} | {kinds or '-'}" + (f" | errors {r['errors']}" if r["errors"] else ""),
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
