"""The serving benchmark fits its lengths to the server's context length (specsuite/families/bench/context_fit.py).

SGLang 0.5.17 on an H100 with context 1,024 and EAGLE (5 steps, 6 draft tokens) refused the suite's 1,024-token
warmup: "The input (1030 tokens) is longer than the model's context length (1024 tokens)" (the tokenizer manager adds
6 reserved draft slots, 0.5.23 managers/tokenizer_manager.py:1333-1351, managers/utils.py:484-500). The reference
server, given --context-length, refuses the same way, and the benchmark against it must fit or refuse in one line.
"""

from __future__ import annotations

import pytest
import requests

from specsuite.config.bench_profiles import SUITE
from specsuite.errors import SpecsuiteError
from specsuite.families.bench.context_fit import ContextLimit, fit_lengths, reserved_draft_slots, sglang_context_limit, vllm_context_limit
from specsuite.families.bench.runner import run_benchmark
from specsuite.server.launcher import launch_reference_server
from specsuite.session.bench import build_bench_config

# /server_info of the live H100 servers (evidence server_args_*.txt): context 1024, EAGLE chain of 5 steps, 6 drafts.
LIVE_EAGLE = {"context_length": 1024, "max_req_input_len": 1018, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1,
              "speculative_num_steps": 5, "speculative_num_draft_tokens": 6}
SMALL_CONTEXT = 256


def test_reserved_slots_follow_sglang():
    assert reserved_draft_slots(LIVE_EAGLE) == 6
    assert reserved_draft_slots({**LIVE_EAGLE, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}) == 20
    assert reserved_draft_slots({**LIVE_EAGLE, "speculative_algorithm": "NGRAM"}) == 0
    assert reserved_draft_slots({"speculative_algorithm": None}) == 0


def test_the_live_suite_shape_did_not_fit_and_now_does():
    limit = sglang_context_limit(LIVE_EAGLE)
    assert limit is not None and (limit.max_input, limit.max_total) == (1017, 1018)
    # The profile's request as it stands: 1024 in + 6 reserved = 1030 >= 1024.
    assert SUITE.random_input_len > limit.max_input
    fitted = fit_lengths(SUITE.random_input_len, SUITE.random_output_len, limit, chosen=False)
    assert fitted.input_len + fitted.output_len <= 1018 and fitted.input_len <= 1017
    assert fitted.input_len == 678 and fitted.output_len == 339  # the profile's 2:1 shape, scaled
    assert "input 1024 -> 678" in fitted.note and "context length 1024, 6 reserved" in fitted.note


def test_chosen_lengths_that_do_not_fit_are_refused_in_one_line():
    limit = sglang_context_limit(LIVE_EAGLE)
    with pytest.raises(SpecsuiteError) as caught:
        fit_lengths(1024, 512, limit, chosen=True)
    message = str(caught.value)
    assert "\n" not in message and "1536 tokens" in message and "context length 1024" in message and "at most 1018" in message
    assert fit_lengths(600, 400, limit, chosen=True).note is None  # a fitting choice is kept as it is


def test_context_length_null_falls_back_to_the_scheduler_limit():
    # SGLang 0.5.23 reports context_length null when --context-length was not given (tests/data/sglang_live).
    limit = sglang_context_limit({**LIVE_EAGLE, "context_length": None})
    assert limit == ContextLimit(1024, 6, 1018, "/server_info max_req_input_len + 6")
    assert sglang_context_limit({"speculative_algorithm": "EAGLE"}) is None
    assert vllm_context_limit([{"id": "m", "max_model_len": 2048}]) == ContextLimit(2048, 0, None, "/v1/models max_model_len")
    assert vllm_context_limit([{"id": "m"}]) is None


@pytest.fixture(scope="module")
def small_server(tmp_path_factory):
    with launch_reference_server("fix", tmp_path_factory.mktemp("small-context"), ("--context-length", str(SMALL_CONTEXT)),
                                 ready_timeout_s=120) as server:
        yield server.base_url


def test_the_reference_server_refuses_as_sglang_does(small_server):
    info = requests.get(f"{small_server}/server_info", timeout=30).json()
    assert info["context_length"] == SMALL_CONTEXT and info["max_req_input_len"] == SMALL_CONTEXT - 6
    response = requests.post(f"{small_server}/generate", json={"input_ids": [17] * SMALL_CONTEXT, "sampling_params": {"max_new_tokens": 1}},
                             timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == f"The input ({SMALL_CONTEXT + 6} tokens) is longer than the model's context length ({SMALL_CONTEXT} tokens)."


def test_the_suite_profile_fits_a_small_context(small_server, tmp_path):
    config = build_bench_config({"num_prompts": 3, "seed": 0}, SUITE, base_url=small_server)
    record = run_benchmark(config, output_file=str(tmp_path / "bench.jsonl"), echo=lambda line: None)
    assert record["completed"] == 3 and record["failed"] == 0
    fitted = [line for line in record["warnings"] if line.startswith("lengths fitted")]
    assert fitted == [f"lengths fitted to the server's context length {SMALL_CONTEXT}, 6 reserved for draft tokens "
                      f"(/server_info context_length): input 1024 -> 166, output 512 -> 83"]
    assert set(record["output_lens"]) == {83}


def test_chosen_lengths_against_a_small_context_are_refused(small_server, tmp_path):
    # A length equal to the profile's reads as the profile's (the option table's defaults are its values): fitted.
    assert not build_bench_config({"random_input_len": SUITE.random_input_len}, SUITE, base_url=small_server).lengths_chosen
    config = build_bench_config({"num_prompts": 2, "random_input_len": 1000}, SUITE, base_url=small_server)
    with pytest.raises(SpecsuiteError, match=r"input 1000 \+ output 512 = 1512 tokens do not fit the server's context length 256"):
        run_benchmark(config, output_file=str(tmp_path / "bench.jsonl"), echo=lambda line: None)
