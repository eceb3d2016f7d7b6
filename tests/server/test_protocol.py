"""The protocol's types and the raw-answer hooks: each client calls its hook with the server's own JSON
on a typed request, renames sampling fields as its API wants, and classifies an unusable answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.faults import ErrorClass, RequestFault
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.kinds.vllm.client import VLLMClient
from specsuite.server.openai_client import OpenAICompletionsClient
from specsuite.server.protocol import GenerationClient, GenerationRequest, Sampling, ServerClient, native_batch_payload, native_payload
from tests.server.test_protocol_wire import _sglang_answer, _vllm_answer, _wired

REQUEST = GenerationRequest(prompt="Hi", sampling=Sampling(temperature=0.5, max_new_tokens=4, seed=9, no_stop_trim=True, stop=("\n",),
                                                           extra={"repetition_penalty": 1.1, "custom_params": {"k": 1}}), logprobs=True)


def test_sampling_params_keep_the_wire_order_and_leave_unset_fields_out() -> None:
    assert list(REQUEST.sampling.params()) == ["temperature", "max_new_tokens", "sampling_seed", "stop", "no_stop_trim", "repetition_penalty", "custom_params"]
    assert Sampling.from_params(REQUEST.sampling.params()) == REQUEST.sampling
    assert Sampling().params() == {}


def test_openai_fields_rename_and_drop_what_openai_has_no_name_for() -> None:
    assert REQUEST.sampling.openai_fields() == {"temperature": 0.5, "max_tokens": 4, "stop": ["\n"], "seed": 9,
                                                "include_stop_str_in_output": True, "repetition_penalty": 1.1}


def test_a_native_batch_needs_one_kind_of_request() -> None:
    ids = GenerationRequest(prompt_ids=(1, 2), sampling=REQUEST.sampling, logprobs=True)
    with pytest.raises(SpecsuiteError, match="one prompt kind"):
        native_batch_payload([REQUEST, ids])
    shared = native_batch_payload([REQUEST, GenerationRequest(prompt="Yo", sampling=REQUEST.sampling, logprobs=True)])
    assert shared["text"] == ["Hi", "Yo"] and shared["sampling_params"] == REQUEST.sampling.params()
    listed = native_batch_payload([REQUEST, GenerationRequest(prompt="Yo", sampling=REQUEST.sampling, logprobs=True)], per_prompt_sampling=True)
    assert listed["sampling_params"] == [REQUEST.sampling.params()] * 2  # the integrity probes' batches: one entry per prompt


def test_every_client_meets_its_protocol() -> None:
    assert isinstance(SGLangClient("http://h:1"), ServerClient) and isinstance(VLLMClient("http://h:1"), ServerClient)
    assert isinstance(OpenAICompletionsClient("http://h:1"), GenerationClient)
    assert not isinstance(OpenAICompletionsClient("http://h:1"), ServerClient)  # no tokenizer, no server facts there


# -- the raw-answer hooks see what the server sent ---------------------------------------------------


class HookedSGLang(SGLangClient):
    seen: list[tuple[dict[str, Any], Any]]

    def generate(self, payload: dict[str, Any]) -> Any:
        answer = super().generate(payload)
        self.seen.append((payload, answer))
        return answer


class HookedVLLM(VLLMClient):
    seen: list[tuple[dict[str, Any], Any]]

    def answered(self, body: dict[str, Any], result: Any) -> None:
        self.seen.append((body, result))


class HookedOpenAI(OpenAICompletionsClient):
    seen: list[tuple[dict[str, Any], Any]]

    def answered(self, api: str, body: dict[str, Any], result: Any) -> None:
        self.seen.append((body, result))


def _openai_answer(body: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": "x", "token_ids": [7], "finish_reason": "length",
                         "logprobs": {"token_logprobs": [-0.1], "tokens": ["x"]}}], "usage": {"completion_tokens": 1}}


@pytest.mark.parametrize("client, answer", [(HookedSGLang("http://h:1"), _sglang_answer), (HookedVLLM("http://h:1", model="m"), _vllm_answer),
                                            (HookedOpenAI("http://h:1"), _openai_answer)], ids=["sglang", "vllm", "openai"])
def test_a_typed_request_passes_the_raw_answer_to_the_hook_and_keeps_it(client: Any, answer: Any) -> None:
    client.seen = []
    sent = _wired(client, answer)
    result = client.generate_request(REQUEST)
    ((body, raw),) = client.seen
    assert json.loads(sent[0]["body"]) == {**body, **({"stream": False} if isinstance(client, SGLangClient) else {})}
    assert result.wire == body and result.raw is raw
    generation = result.generation
    assert generation.params == REQUEST.sampling.params()  # recorded by the protocol's names on every kind
    assert generation.text == "x" and generation.output_ids == [7]


def test_the_openai_client_sends_openai_names() -> None:
    client = HookedOpenAI("http://h:1")
    client.seen = []
    _wired(client, _openai_answer)
    client.generate_request(REQUEST)
    ((body, _),) = client.seen
    assert body["max_tokens"] == 4 and body["seed"] == 9 and body["include_stop_str_in_output"] is True
    assert "max_new_tokens" not in body and "sampling_params" not in body and "custom_params" not in body


@pytest.mark.parametrize("client, answer", [(SGLangClient("http://h:1"), _sglang_answer), (VLLMClient("http://h:1", model="m"), _vllm_answer)],
                         ids=["sglang", "vllm"])
def test_an_unfinished_answer_is_a_classified_fault_on_either_kind(client: Any, answer: Any) -> None:
    """The fault guard classifies what `parse_answer` raises: a finish-less answer is bad_finish_reason."""
    def unfinished(body: dict[str, Any]) -> Any:
        raw = answer(body)
        if "choices" in raw:
            raw["choices"][0]["finish_reason"] = None
        else:
            raw["meta_info"]["finish_reason"] = None
        return raw

    _wired(client, unfinished)
    sent = client.send_request(REQUEST)
    with pytest.raises(RequestFault) as caught:
        client.parse_answer(REQUEST, sent)
    assert caught.value.error_class in (ErrorClass.BAD_FINISH_REASON, ErrorClass.MISSING_META_INFO)
    _wired(client, answer)
    assert client.parse_answer(REQUEST, client.send_request(REQUEST)).generation.finish_reason is not None


def test_vllm_batches_shared_sampling_in_one_request_and_splits_the_choices_back() -> None:
    client = VLLMClient("http://h:1", model="m")
    sent = _wired(client, _vllm_answer)
    requests = [GenerationRequest(prompt=p, sampling=Sampling(temperature=0, max_new_tokens=4)) for p in ("a", "b", "c")]
    answers = client.generate_requests(requests)
    assert len(sent) == 1 and json.loads(sent[0]["body"])["prompt"] == ["a", "b", "c"]
    assert [a.generation.prompt for a in answers] == ["a", "b", "c"]


def test_the_native_payload_names_sglangs_fields() -> None:
    scoring = GenerationRequest(prompt_ids=[1, 2, 3], sampling=Sampling(temperature=1.0, max_new_tokens=0), logprobs=True, top_logprobs=5, logprob_start=2)
    assert native_payload(scoring) == {"input_ids": [1, 2, 3], "sampling_params": {"temperature": 1.0, "max_new_tokens": 0},
                                       "return_logprob": True, "logprob_start_len": 2, "top_logprobs_num": 5}
