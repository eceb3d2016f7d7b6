"""Contract: the output logprobs SGLang 0.5.23 sends for a `max_new_tokens: 0` request, read from
its source, against the reference server's answer, the integrity checks and the lossless scoring
parser (which reads the prompt-side logprobs of exactly such answers)."""

from __future__ import annotations

import json
import re

import pytest
import requests

from specsuite.families.lossless.scoring import parse_scoring, scoring_request
from specsuite.refserver.model_loading import MODEL_DIR
from specsuite.server.integrity_rules import IntegrityContext
from specsuite.server.kinds.sglang.integrity_rules import check_response
from specsuite.server.launcher import launch_reference_server
from specsuite.server.protocol import native_payload
from specsuite.server.tokenizer import load_tokenizer

TIMEOUT_S = (5, 60)
PROMPT = "Question: A baker makes 24 loaves a day and sells them in bags of 3. How many bags does she fill?\nAnswer:"
TOP_K = 4


@pytest.fixture(scope="module")
def refserver_url(tmp_path_factory):
    with launch_reference_server("fix", tmp_path_factory.mktemp("contract-logprobs"), ready_timeout_s=60) as server:
        yield server.base_url


def post(url: str, path: str, body: dict) -> dict:
    with requests.Session() as session:
        session.trust_env = False  # never route localhost through a proxy
        response = session.post(url + path, json=body, timeout=TIMEOUT_S)
    response.raise_for_status()
    return response.json()


def local_context() -> IntegrityContext:
    tokenizer = load_tokenizer(str(MODEL_DIR))
    eos = json.loads((MODEL_DIR / "config.json").read_text())["eos_token_id"]
    return IntegrityContext(eos_ids=frozenset({eos}), skipped_ids=tokenizer.special_ids, encode=lambda text: tokenizer.encode(text, add_special_tokens=False),
                            decode=tokenizer.decode, num_draft_tokens=6)


def test_max_new_tokens_zero_sends_one_output_logprob(sglang_source, refserver_url) -> None:
    """output_streamer.py:613-615 `logprob_end = ... max(len(output_ids_), 1)`: a request that
    produced no ids still sends the first output logprob entry (the prefill sample, appended by
    logprob_result_processor.py:329-331 before the budget check drops the id), and
    tokenizer_manager.py:2870 sets output_token_logprobs_length to the entries sent. The reference
    server (speculative, so no prefill-only shortcut: schedule_batch.py:1501-1506) answers the same
    shape, and the integrity checks accept it."""
    streamer = sglang_source("srt/managers/scheduler_components/output_streamer.py")
    assert re.search(r"len\(output_ids_\) if req\.is_retracted else max\(len\(output_ids_\), 1\)", streamer)
    manager = sglang_source("srt/managers/tokenizer_manager.py")
    assert 'meta_info["output_token_logprobs_length"] = len(state.output_token_logprobs)' in manager
    payload = {"text": PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 0},
               "return_logprob": True, "top_logprobs_num": TOP_K}
    answer = post(refserver_url, "/generate", payload)
    meta = answer["meta_info"]
    assert answer["output_ids"] == [] and answer["text"] == ""
    assert meta["finish_reason"] == {"type": "length", "length": 0} and meta["completion_tokens"] == 0
    assert len(meta["output_token_logprobs"]) == 1 and meta["output_token_logprobs_length"] == 1
    assert len(meta["output_top_logprobs"]) == 1 and len(meta["output_top_logprobs"][0]) == TOP_K
    assert meta["output_token_logprobs"][0][1] == meta["output_top_logprobs"][0][0][1]  # greedy: the argmax
    item = {"text": PROMPT, "sampling_params": payload["sampling_params"], "return_logprob": True}
    assert check_response(item, answer, local_context()) == []


def test_lossless_scoring_reads_the_prompt_side_of_such_answers(refserver_url) -> None:
    """The lossless scoring request is a max_new_tokens 0 answer: its extra output entry (the
    distribution after the last scored id) is not a generated position, and the parser reads the
    input logprobs, one per scored id, whatever the output side carries."""
    prompt_ids = post(refserver_url, "/tokenize", {"prompt": PROMPT})["tokens"]
    generated = post(refserver_url, "/generate", {"input_ids": prompt_ids, "sampling_params": {"temperature": 0, "max_new_tokens": 12}})
    output_ids = generated["output_ids"]
    answer = post(refserver_url, "/generate", native_payload(scoring_request(prompt_ids, output_ids, TOP_K)))
    assert answer["output_ids"] == [] and len(answer["meta_info"]["output_token_logprobs"]) == 1
    positions = parse_scoring(answer, output_ids)
    assert len(positions) == len(output_ids) and positions[0] is None
    tops = answer["meta_info"]["input_top_logprobs"]
    for index in range(1, len(output_ids)):
        assert positions[index].token_id == output_ids[index]
        assert positions[index].top_ids == tuple(t[1] for t in tops[index])
        assert positions[index].top_ids[0] == output_ids[index]  # greedy generation: the argmax at T=1 too


def test_prompt_logprobs_are_raw_whatever_the_temperature(refserver_url) -> None:
    """SGLang computes input logprobs in its logits processor, before the sampler's temperature
    (0.5.23 srt/layers/logprob_processor.py:475 InputLogprobProcessor, log_softmax at :734; the source
    facts are pinned by test_logprob_semantics.py), while output logprobs are log(softmax(logits / T))
    (srt/layers/sampler.py, the torch.log(probs) after logits.div_(temperatures)). The reference server
    answers the same: one scoring at T = 1.0, 0.7 and 0.4 gives the same input logprobs, and the output
    logprob of a sampled token moves with T."""
    prompt_ids = post(refserver_url, "/tokenize", {"prompt": PROMPT})["tokens"]
    scored = []
    for temperature in (1.0, 0.7, 0.4):
        body = {"input_ids": prompt_ids, "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": TOP_K,
                "sampling_params": {"temperature": temperature, "max_new_tokens": 1, "sampling_seed": 3}}
        scored.append(post(refserver_url, "/generate", body)["meta_info"])
    first = scored[0]
    for other in scored[1:]:
        assert other["input_top_logprobs"] == first["input_top_logprobs"]
        assert other["input_token_logprobs"] == first["input_token_logprobs"]
    tops = [meta["output_top_logprobs"][0][0][0] for meta in scored]
    assert tops[0] > tops[1] - 1e-9 or tops[0] != tops[1]
    assert len({round(value, 6) for value in tops}) == 3  # the output side is tempered
