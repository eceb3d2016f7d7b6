"""The vLLM adapter: native payloads to /v1/completions bodies, vLLM answers to native items, the
vLLM integrity rules, server-kind detection and the serve-vllm command line; all offline.

The answer shapes are vLLM 0.32's (docs/vllm_api_facts.md cites the source of each field); the
live checks against a real vLLM server are the suites themselves, run by .ci/vllm-job.
"""

from __future__ import annotations

import json

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.integrity_rules import IntegrityContext
from specsuite.server.kinds.vllm import client as vllm_client
from specsuite.server.kinds.vllm import native_adapter, wire
from specsuite.server.kinds.vllm.integrity_rules import check_vllm_completion, check_vllm_stream, spec_problems
from specsuite.server.kinds.vllm.launch import find_vllm_python, speculative_config, vllm_command
from specsuite.session.option_table import find_option

EOS = 8091
CONTEXT = IntegrityContext(eos_ids=frozenset({EOS}), skipped_ids=frozenset(), encode=None, decode=None, num_draft_tokens=4)
SPEC = {"mean_acceptance_length": 1 + 4 / 15, "draft_acceptance_rate": 4 / 45, "acceptance_histogram": [11, 4, 0, 0],
        "num_spec_steps": 15, "num_accepted_draft_tokens": 4, "num_draft_tokens": 45, "num_spec_tokens": 3}


# A stream of 5 tokens: the prefill token, then 2 steps that accepted 2 drafts in all (1 + 2 + 2).
STREAM_SPEC = {"mean_acceptance_length": 2.0, "draft_acceptance_rate": 2 / 6, "acceptance_histogram": [1, 0, 1, 0],
               "num_spec_steps": 2, "num_accepted_draft_tokens": 2, "num_draft_tokens": 6, "num_spec_tokens": 3}


def _answer(ids: list[int], finish: str = "length", stop_reason=None, text: str = "x", spec: dict | None = None, usage: int | None = None) -> dict:
    return {
        "id": "cmpl-1",
        "choices": [{"index": 0, "text": text, "token_ids": ids, "prompt_token_ids": [1, 2], "finish_reason": finish, "stop_reason": stop_reason,
                     "logprobs": {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": [-1.0] * len(ids),
                                  "text_offset": list(range(len(ids))), "top_logprobs": [{f"token_id:{t}": -1.0} for t in ids]}}],
        "usage": {"prompt_tokens": 2, "completion_tokens": len(ids) if usage is None else usage, "total_tokens": 2 + len(ids)},
        "metrics": {"speculative_decoding": spec} if spec else None,
    }


def _body(**fields) -> dict:
    return {"model": "m", "prompt": "p", "max_tokens": 20, "return_token_ids": True, "logprobs": 0, "return_tokens_as_token_ids": True, **fields}


def test_native_payload_becomes_a_completions_body():
    payload = {"text": "Henry was", "return_logprob": True,
               "sampling_params": {"temperature": 0.6, "top_p": 0.95, "max_new_tokens": 32, "sampling_seed": 7, "stop": ["x"],
                                   "no_stop_trim": True, "top_k": -1, "ignore_eos": None}}
    body = native_adapter.native_body("m", payload, ["Henry was"], payload["sampling_params"], stream=True)
    # top_k -1 stays: an omitted top_k would take the model's generation_config.json default on vLLM
    assert body == {"model": "m", "prompt": "Henry was", "stream": True, "return_token_ids": True, "temperature": 0.6, "top_p": 0.95,
                    "top_k": -1, "max_tokens": 32, "seed": 7, "stop": ["x"], "include_stop_str_in_output": True, "logprobs": 0,
                    "return_tokens_as_token_ids": True, "stream_options": {"include_usage": True}}


def test_answer_becomes_a_native_item_with_spec_fields():
    ids = [516, 13, EOS]
    answer = _answer(ids, "stop", None, spec=SPEC)
    item = native_adapter.native_item(_body(), answer, answer["choices"][0], single=True)
    meta = item["meta_info"]
    assert item["output_ids"] == ids
    assert meta["finish_reason"] == {"type": "stop", "matched": EOS}  # vLLM's stop_reason None is EOS: the last id
    assert meta["output_token_logprobs"] == [[-1.0, t, None] for t in ids]
    assert meta["spec_verify_ct"] == 15 and meta["spec_accept_length"] == pytest.approx(1 + 4 / 15)
    assert meta["spec_num_correct_drafts"] == 4 and meta["spec_num_proposed_drafts"] == 45


def test_finish_reasons_map_to_sglang_objects():
    assert wire.finish_reason({"finish_reason": "length"}, [1, 2], {"max_tokens": 2}) == {"type": "length", "length": 2}
    assert wire.finish_reason({"finish_reason": "stop", "stop_reason": "tri"}, [1], {}) == {"type": "stop", "matched": "tri"}
    assert wire.finish_reason({"finish_reason": "stop", "stop_reason": 198}, [198], {}) == {"type": "stop", "matched": 198}


def test_stream_chunks_become_cumulative_native_chunks():
    chunks = [{"id": "c", "choices": [{"index": 0, "text": "a", "token_ids": [5], "finish_reason": None}]},
              {"id": "c", "choices": [{"index": 0, "text": "bc", "token_ids": [6, 7, 8], "finish_reason": None}]},  # 3 accepted at once
              {"id": "c", "choices": [{"index": 0, "text": "", "token_ids": [EOS], "finish_reason": "stop", "stop_reason": None}]},
              {"id": "c", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 5}, "metrics": {"speculative_decoding": STREAM_SPEC}}]
    native = native_adapter.cumulative_native_chunks({"max_tokens": 9}, chunks)
    assert [c["output_ids"] for c in native] == [[5], [5, 6, 7, 8], [5, 6, 7, 8, EOS]]
    assert native[-1]["text"] == "abc" and native[-1]["meta_info"]["finish_reason"] == {"type": "stop", "matched": EOS}
    assert native[-1]["meta_info"]["spec_verify_ct"] == 2
    assert check_vllm_stream({"max_tokens": 9}, chunks, CONTEXT) == []
    swapped = [chunks[1], chunks[0], *chunks[2:]]  # a swapped pair still adds up; the ids order does not
    assert native_adapter.cumulative_native_chunks({}, swapped)[-1]["output_ids"] != native[-1]["output_ids"]
    finished_early = [chunks[2], chunks[0], chunks[1], chunks[3]]
    assert "stream_finish" in {v.check for v in check_vllm_stream({"max_tokens": 9}, finished_early, CONTEXT)}


def test_spec_counters_and_accept_length_from_metrics():
    text = "\n".join([
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 134.0',
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 402.0',
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 104.0',
        *[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{p}"}} 1.0' for p in range(3)],
    ])
    counters = vllm_client.spec_counters(text)
    assert counters == {"num_drafts": 134.0, "num_draft_tokens": 402.0, "num_accepted_tokens": 104.0, "positions": 3.0}
    later = {**counters, "num_drafts": 144.0, "num_accepted_tokens": 124.0}
    assert vllm_client.accept_length_between(counters, later) == pytest.approx(3.0)
    assert vllm_client.spec_counters("vllm:generation_tokens_total 5") == {}  # no speculation: no counters


def test_clean_answers_pass_the_vllm_rules():
    assert check_vllm_completion(_body(), _answer(list(range(100, 120))), CONTEXT) == []
    assert check_vllm_completion(_body(), _answer([100, 101, EOS], "stop", None), CONTEXT) == []
    # vLLM keeps the tokens of a stop string in token_ids; only the text is cut (detokenizer.py:144-154)
    assert check_vllm_completion(_body(stop=["tri"]), _answer([100, 101], "stop", "tri", text="a few "), CONTEXT) == []
    spec = {**SPEC, "num_spec_steps": 15, "num_accepted_draft_tokens": 4}
    assert check_vllm_completion(_body(), _answer(list(range(100, 120)), spec=spec), CONTEXT) == []


@pytest.mark.parametrize("fault, check", [
    ("padded usage", "completion_tokens"),
    ("ids after EOS", "stop_token"),
    ("inflated acceptance", "spec_counts"),
    ("logprob id", "logprob_alignment"),
    ("stop string left", "stop_string"),
    ("over budget", "max_new_tokens"),
])
def test_each_vllm_rule_fires(fault, check):
    ids, body, answer = list(range(100, 120)), _body(), None
    if fault == "padded usage":
        answer = _answer(ids, usage=len(ids) + 1)
    elif fault == "ids after EOS":
        answer = _answer([100, EOS, 101] + ids[3:])
    elif fault == "inflated acceptance":
        answer = _answer(ids, spec={**SPEC, "num_accepted_draft_tokens": 30, "mean_acceptance_length": 3.0, "acceptance_histogram": [0, 0, 0, 15]})
    elif fault == "logprob id":
        answer = _answer(ids)
        answer["choices"][0]["logprobs"]["tokens"][3] = "token_id:7"
    elif fault == "stop string left":
        body, answer = _body(stop=["tri"]), _answer(ids, "stop", "tri", text="a trip")
    elif fault == "over budget":
        body, answer = _body(max_tokens=10), _answer(ids)
    assert check in {violation.check for violation in check_vllm_completion(body, answer, CONTEXT)}


def test_spec_problems_accept_a_trimmed_last_step_and_steps_without_drafts():
    # 1 prefill token + 15 steps + 4 accepted = 20; the last step may lose up to k = 3 to a stop
    assert spec_problems(SPEC, 20) == [] and spec_problems(SPEC, 17) == []
    assert spec_problems(SPEC, 16)
    # ngram without a match drafts nothing: no spec step, but a token (vLLM scheduler.py:2113)
    assert spec_problems(SPEC, 64) == []


def test_serve_vllm_command_and_bad_input():
    command = vllm_command("py", "eagle", port=8141, spec_overrides={"num_speculative_tokens": 5}, extra_args=["--seed", "1"])
    config = json.loads(command[command.index("--speculative-config") + 1])
    assert config["method"] == "eagle" and config["num_speculative_tokens"] == 5 and config["model"].endswith("specsuite/fixtures/vllm_models/eagle")
    assert command[-2:] == ["--seed", "1"] and "--per-request-spec-decode-metrics" in command
    assert "--speculative-config" not in vllm_command("py", "none", port=1)
    assert speculative_config("ngram")["prompt_lookup_max"] == 4
    spec_config = find_option("--spec-config", "serve-vllm")
    with pytest.raises(SpecsuiteError, match="^--spec-config is not JSON"):
        spec_config.parse_value("{num: 5}")
    with pytest.raises(SpecsuiteError, match="^--spec-config must be a JSON object, got list"):
        spec_config.parse_value("[1]")
    with pytest.raises(SpecsuiteError, match="unknown vLLM speculation method"):
        speculative_config("medusa-ish")
    with pytest.raises(SpecsuiteError, match="not a file"):
        find_vllm_python("/nonexistent/python")


def test_serve_vllm_without_vllm_is_one_line(tmp_path, capsys, monkeypatch):
    from specsuite.cli.main import main

    monkeypatch.delenv("SPECSUITE_VLLM_PYTHON", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    assert main(["serve-vllm", "--method", "eagle", "--port", "18141"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vLLM is not installed" in err[0] and "Traceback" not in err[0]


def test_serve_vllm_never_prints_an_api_key(capsys, monkeypatch, tmp_path):
    """Arguments after `--` reach vLLM as given, but the printed command line redacts a key."""
    from specsuite.cli import serve_vllm
    from specsuite.cli.main import main

    class Refused(Exception):
        pass

    def no_start(self):
        raise Refused

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(serve_vllm, "find_vllm_python", lambda explicit=None: "python3")
    monkeypatch.setattr(serve_vllm.LaunchedServer, "start", no_start)
    with pytest.raises(Refused):
        main(["serve-vllm", "--method", "none", "--port", "18149", "--", "--api-key", "sk-very-secret-1234"])
    printed = capsys.readouterr()
    assert "sk-very-secret-1234" not in printed.err + printed.out and "--api-key" in printed.err
