"""Reproduce docs/findings/sglang-cpu-greedy-verify.md: at temperature 1, how often is each emitted token the
target's own top-1 token at its position?

A server that samples from the target at T=1 emits its top-1 token about as often as the model's top-1
probability; SGLang's CPU EAGLE path, which commits argmax at every verify step, emits it (almost) always
after the first token. The top-1 token of every position comes from the server's own
`output_top_logprobs` (return_logprob, top_logprobs_num 1). Exact Clopper-Pearson intervals.

    python tools/findings/sglang_cpu_greedy_verify_repro.py http://127.0.0.1:30000 http://127.0.0.1:30001
"""

from __future__ import annotations

import sys

import requests
from scipy.stats import binomtest

PROMPTS = ("Their quiet teacher was", "Question: Tom has 3 cats and buys 2 more. How many cats?\nAnswer:",
           "<|user|>\nWhat is Crowham like?\n<|assistant|>\n<think>\n", "The farmer had 12 apples and")
REQUESTS_PER_PROMPT = 6
NEW_TOKENS = 32


def top1_share(url: str) -> tuple[int, int]:
    """(emitted tokens that were the top-1 token, emitted tokens), the first token of each answer left out."""
    hits = total = 0
    session = requests.Session()
    session.trust_env = False
    for prompt in PROMPTS:
        for _ in range(REQUESTS_PER_PROMPT):
            body = {"text": prompt, "return_logprob": True, "top_logprobs_num": 1,
                    "sampling_params": {"temperature": 1.0, "max_new_tokens": NEW_TOKENS, "ignore_eos": True}}
            meta = session.post(f"{url.rstrip('/')}/generate", json=body, timeout=300).json()["meta_info"]
            emitted = [entry[1] for entry in meta["output_token_logprobs"]]
            top1 = [entries[0][1] for entries in meta["output_top_logprobs"]]
            pairs = list(zip(emitted, top1, strict=True))[1:]  # the first token is sampled after prefill on every server
            hits += sum(a == b for a, b in pairs)
            total += len(pairs)
    return hits, total


def main(urls: list[str]) -> int:
    if not urls:
        print("usage: sglang_cpu_greedy_verify_repro.py URL [URL ...]", file=sys.stderr)
        return 2
    for url in urls:
        info = requests.get(f"{url.rstrip('/')}/server_info", timeout=30).json()
        hits, total = top1_share(url)
        interval = binomtest(hits, total).proportion_ci(0.95, method="exact")
        print(f"{url} (SGLang {info.get('version')}, speculation {info.get('speculative_algorithm')}): "
              f"top-1 share at T=1 {hits}/{total} = {hits / total:.3f}, 95% CI [{interval.low:.3f}, {interval.high:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
