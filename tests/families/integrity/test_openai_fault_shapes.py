"""The fault proxy's /v1/completions faults on synthetic vLLM answers, offline: each changes what it
claims to and only its owning vLLM rule fires (tests/server/test_vllm_faults.py shows the same live)."""

from __future__ import annotations

import copy

import pytest

from specsuite.server.integrity_rules import IntegrityContext
from specsuite.server.kinds.vllm.integrity_rules import check_vllm_completion, check_vllm_stream
from specsuite.server.kinds.vllm.native_adapter import cumulative_native_chunks
from tests.helpers.openai_fault_proxy import PADDED_ID, break_completion, break_completion_stream

EOS = 8091
CONTEXT = IntegrityContext(eos_ids=frozenset({EOS}), skipped_ids=frozenset(), encode=None, decode=None, num_draft_tokens=4)
BODY = {"model": "m", "prompt": "p", "max_tokens": 20, "return_token_ids": True, "logprobs": 0, "return_tokens_as_token_ids": True}
IDS = [100 + i for i in range(11)] + [EOS]  # 12 ids: prefill + 6 steps + 5 accepted
SPEC = {"mean_acceptance_length": 1 + 5 / 6, "draft_acceptance_rate": 5 / 18, "acceptance_histogram": [2, 3, 1, 0], "num_spec_steps": 6,
        "num_accepted_draft_tokens": 5, "num_draft_tokens": 18, "num_spec_tokens": 3,
        "per_step_accepted": [0, 1, 2, 1, 0, 1], "per_step_drafted": [3] * 6}


def _lp(ids: list[int]) -> dict:
    return {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": [-1.0] * len(ids), "text_offset": list(range(len(ids))),
            "top_logprobs": [{f"token_id:{t}": -1.0} for t in ids]}


def _answer() -> dict:
    return {"id": "cmpl-1", "choices": [{"index": 0, "text": "x", "token_ids": list(IDS), "finish_reason": "stop", "stop_reason": None,
                                         "logprobs": _lp(IDS)}],
            "usage": {"prompt_tokens": 2, "completion_tokens": len(IDS), "total_tokens": 2 + len(IDS)},
            "metrics": {"speculative_decoding": copy.deepcopy(SPEC)}}


def _stream() -> list[dict]:
    parts = [IDS[:1], IDS[1:3], IDS[3:6], IDS[6:8], IDS[8:9], IDS[9:11], IDS[11:]]
    chunks = [{"id": "c", "choices": [{"index": 0, "text": f"t{n}", "token_ids": part, "logprobs": _lp(part),
                                       "finish_reason": "stop" if n == len(parts) - 1 else None, "stop_reason": None}]}
              for n, part in enumerate(parts)]
    return chunks + [{"id": "c", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": len(IDS), "total_tokens": 2 + len(IDS)},
                      "metrics": {"speculative_decoding": copy.deepcopy(SPEC)}}]


# eos_tail after EOS also breaks the finish's claim that the last id is EOS. The spec stats have no
# upper bound on the token count (a step that drafts nothing is no spec step), so one extra token
# is the usage rule's alone.
FAULTS = [("accept_inflate", {"spec_counts"}), ("eos_tail", {"stop_token", "finish_reason"}),
          ("completion_off_by_one", {"completion_tokens"}), ("padded_id", set())]


@pytest.mark.parametrize("fault, fired", FAULTS, ids=[f for f, _ in FAULTS])
def test_each_fault_fires_only_its_rule(fault, fired):
    assert check_vllm_completion(BODY, _answer(), CONTEXT) == [] and check_vllm_stream(BODY, _stream(), CONTEXT) == []
    answer = _answer()
    assert break_completion(fault, BODY, answer) == 1
    assert {v.check for v in check_vllm_completion(BODY, answer, CONTEXT)} == fired
    chunks, applied = break_completion_stream(fault, BODY, _stream())
    assert applied == 1 and {v.check for v in check_vllm_stream(BODY, chunks, CONTEXT)} == fired
    if fault == "padded_id":  # the id and its logprob token agree: only the id detectors can see it
        choice = answer["choices"][0]
        assert choice["token_ids"].count(PADDED_ID) == 1 and choice["logprobs"]["tokens"].count(f"token_id:{PADDED_ID}") == 1
        assert [t[1] for t in cumulative_native_chunks(BODY, chunks)[-1]["meta_info"]["output_token_logprobs"]].count(PADDED_ID) == 1
    if fault == "accept_inflate":
        spec = answer["metrics"]["speculative_decoding"]
        assert spec["num_accepted_draft_tokens"] == 5 + 4 and spec["mean_acceptance_length"] == pytest.approx(1 + 9 / 6)
        assert sum(spec["per_step_accepted"]) == 9


def test_swapped_chunks_keep_the_counts_but_not_the_order():
    chunks, applied = break_completion_stream("swap_chunks", BODY, _stream())
    assert applied == 1 and check_vllm_stream(BODY, chunks, CONTEXT) == []
    assert cumulative_native_chunks(BODY, chunks)[-1]["output_ids"] != IDS
    assert break_completion("swap_chunks", BODY, _answer()) == 0  # streams only


def test_faults_that_do_not_qualify_are_not_counted():
    length = _answer()
    length["choices"][0].update(finish_reason="length", token_ids=IDS[:-1] + [7], logprobs=_lp(IDS[:-1] + [7]))
    assert break_completion("eos_tail", BODY, length) == 0
    no_spec = _answer()
    no_spec["metrics"] = None
    assert break_completion("accept_inflate", BODY, no_spec) == 0
    assert break_completion(None, BODY, _answer()) == 0 and break_completion("junk_text", BODY, _answer()) == 0
