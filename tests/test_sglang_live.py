"""A live SGLang on the project's CPU ops serves the same greedy ids as Hugging Face transformers.

The ops (fixtures/sglang_cpu_ops) replace SGLang's C++ CPU kernels, so they must be exact, not close:
in float32, with speculation off and with EAGLE, every greedy answer's ids equal transformers'
`LlamaForCausalLM` argmax decoding on the same model and prompt ids, token for token. A wrong
mask, a prefix read from the wrong slots or a verify step that accepts a wrong draft changes ids.

Runs where the SGLang job (.ci/sglang-job) names its servers:
    SPECSUITE_SGLANG_LIVE_URLS="eagle=http://127.0.0.1:18171,none=http://127.0.0.1:18172"
and skips with that reason elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import requests

LIVE_ENV = "SPECSUITE_SGLANG_LIVE_URLS"
ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "fixtures" / "vllm_models" / "target"
NEW_TOKENS = 48
PROMPTS_PER_KIND = 2  # of each kind in fixtures/data/correctness_prompts.jsonl, plus the 2-token prompt below
SHORT_PROMPT = "Hi"  # shorter than the 4 draft tokens: killed SGLang 0.5.17's CPU backend (reference, section 3)


def live_servers() -> dict[str, str]:
    value = os.environ.get(LIVE_ENV, "")
    if not value:
        pytest.skip(f"no live SGLang named: {LIVE_ENV} is set by .ci/sglang-job")
    return dict(part.split("=", 1) for part in value.split(","))


def prompts() -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "fixtures" / "data" / "correctness_prompts.jsonl").read_text().splitlines()]
    chosen, per_kind = [], {}
    for row in rows:
        if per_kind.get(row["kind"], 0) < PROMPTS_PER_KIND:
            chosen.append(row["prompt"])
            per_kind[row["kind"]] = per_kind.get(row["kind"], 0) + 1
    return chosen + [SHORT_PROMPT]


@pytest.fixture(scope="module")
def hf_greedy() -> dict[str, tuple[list[int], list[int]]]:
    """prompt -> (prompt ids, transformers' greedy ids), float32, EOS ignored."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    live_servers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(TARGET))
    model = transformers.LlamaForCausalLM.from_pretrained(str(TARGET), torch_dtype=torch.float32).eval()
    answers = {}
    for prompt in prompts():
        ids = tokenizer(prompt)["input_ids"]
        # A plain argmax loop: EOS may be chosen and decoding goes on, as with SGLang's ignore_eos.
        generated: list[int] = []
        past, step_input = None, torch.tensor([ids])
        with torch.no_grad():
            for _ in range(NEW_TOKENS):
                out = model(step_input, past_key_values=past, use_cache=True)
                past = out.past_key_values
                generated.append(int(out.logits[0, -1].argmax()))
                step_input = torch.tensor([[generated[-1]]])
        answers[prompt] = (ids, generated)
    return answers


@pytest.mark.parametrize("method", ["none", "eagle"])
def test_served_greedy_ids_equal_transformers(method, hf_greedy):
    url = live_servers().get(method)
    if not url:
        pytest.skip(f"{LIVE_ENV} names no {method} server")
    mismatches = []
    for prompt, (ids, expected) in hf_greedy.items():
        body = {"input_ids": ids, "sampling_params": {"temperature": 0, "max_new_tokens": NEW_TOKENS, "ignore_eos": True}}
        served = requests.post(f"{url.rstrip('/')}/generate", json=body, timeout=300).json()["output_ids"]
        if served != expected:
            first = next((i for i, (a, b) in enumerate(zip(served, expected, strict=False)) if a != b), min(len(served), len(expected)))
            mismatches.append(f"{prompt[:30]!r}: first difference at token {first}: served {served[first:first + 4]}, "
                              f"transformers {expected[first:first + 4]}")
    assert not mismatches, f"{len(mismatches)} of {len(hf_greedy)} prompts differ:\n" + "\n".join(mismatches)


def test_a_batch_serves_what_each_request_gets_alone(hf_greedy):
    """Greedy drafts and verification depend only on each request's own tokens, so the EAGLE server must
    give every request the same ids and the same number of verify steps in one batch as alone: a batched
    attention or cache-slot mistake in the ops shows as a difference (checked live: 16 of 16 equal)."""
    url = live_servers().get("eagle")
    if not url:
        pytest.skip(f"{LIVE_ENV} names no eagle server")
    ids = [prompt_ids for prompt_ids, _ in hf_greedy.values()]
    params = {"temperature": 0, "max_new_tokens": NEW_TOKENS, "ignore_eos": True}
    alone = [requests.post(f"{url.rstrip('/')}/generate", json={"input_ids": one, "sampling_params": params}, timeout=300).json()
             for one in ids]
    together = requests.post(f"{url.rstrip('/')}/generate", json={"input_ids": ids, "sampling_params": params}, timeout=600).json()
    differences = [f"prompt {i}: ids equal {a['output_ids'] == b['output_ids']}, verify steps {a['meta_info']['spec_verify_ct']} "
                   f"alone vs {b['meta_info']['spec_verify_ct']} batched"
                   for i, (a, b) in enumerate(zip(alone, together, strict=True))
                   if a["output_ids"] != b["output_ids"] or a["meta_info"]["spec_verify_ct"] != b["meta_info"]["spec_verify_ct"]]
    assert not differences, "\n".join(differences)
