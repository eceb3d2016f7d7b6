"""The protocol sends what the pre-protocol code sent, byte for byte, and parses to the same Generations.

tests/data/protocol_wire/old_payloads.json holds, per workload request, the JSON bodies the old
`SGLangClient.generate`/`generate_stream` and `VLLMClient.generate`/`generate_stream` sent (captured at
c200c57, before the change) and the Generations parsed from fixed fake answers. Here the same requests go
in typed (`GenerationRequest`) through the protocol's clients, over the same fake answers.
The last tests show the real SGLang CPU release needs nothing beyond the native client: its recorded
answers (tests/data/sglang_live/) parse through `SGLangClient.parse_answer` and the OpenAI client.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from specsuite.families.correctness.prompts import PromptItem
from specsuite.families.correctness.workload import SamplingCase
from specsuite.families.correctness.workload import build_request as correctness_request
from specsuite.families.gsm8k.prompt import build_request as gsm8k_request
from specsuite.families.lossless.scoring import scoring_request
from specsuite.server.answer_shapes import PROMPT, SAMPLING
from specsuite.server.generation import generations_from_sglang
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.kinds.vllm.client import VLLMClient
from specsuite.server.openai_client import OpenAICompletionsClient
from specsuite.server.protocol import GenerationRequest, RawAnswer, Sampling, ServerClient, native_payload
from specsuite.server.sampling_pins import pinned
from specsuite.server.transport import encode_json

DATA = Path(__file__).parents[1] / "data"
OLD = json.loads((DATA / "protocol_wire" / "old_payloads.json").read_text())
STREAMED = ("integrity_greedy", "correctness")
# Not built by a workload (made up for the fixture, with `n` before `sampling_seed`): the typed request
# sends the same JSON with the protocol's fixed key order, so only the parsed bodies are compared.
KEY_ORDER_FREE = ("integrity_n2",)


def typed(payload: dict[str, Any]) -> list[GenerationRequest]:
    """The typed requests a native payload stands for (one per prompt)."""
    key = "text" if "text" in payload else "input_ids"
    prompts = payload[key] if isinstance(payload[key], list) and payload[key] and isinstance(payload[key][0], (str, list)) else [payload[key]]
    params = payload["sampling_params"]
    params_list = params if isinstance(params, list) else [params] * len(prompts)
    return [GenerationRequest(prompt=p if key == "text" else None, prompt_ids=p if key == "input_ids" else None,
                              sampling=Sampling.from_params(s), logprobs=bool(payload.get("return_logprob")),
                              top_logprobs=payload.get("top_logprobs_num"), logprob_start=payload.get("logprob_start_len"))
            for p, s in zip(prompts, params_list, strict=True)]


class _Response:
    ok, status_code = True, 200


def _sglang_answer(body: dict[str, Any]) -> Any:
    prompts = body.get("text") if "text" in body else body.get("input_ids")
    count = len(prompts) if isinstance(prompts, list) and prompts and isinstance(prompts[0], (str, list)) else 0
    params = body["sampling_params"]
    n = params.get("n", 1) if isinstance(params, dict) else 1
    one = {"text": "x", "output_ids": [7], "meta_info": {"finish_reason": {"type": "length", "length": 1}, "completion_tokens": 1,
                                                        "prompt_tokens": 3, "output_token_logprobs": [[-0.1, 7, None]]}}
    return [one] * (max(count, 1) * n) if count or n > 1 else one


def _vllm_answer(body: dict[str, Any]) -> Any:
    prompt = body["prompt"]
    n = len(prompt) if isinstance(prompt, list) and prompt and isinstance(prompt[0], (list, str)) else 1
    choice = {"index": 0, "text": "x", "token_ids": [7], "finish_reason": "length",
              "logprobs": {"token_logprobs": [-0.1], "tokens": ["token_id:7"], "top_logprobs": [{"token_id:7": -0.1}]}}
    if body.get("echo"):
        choice.update(prompt_token_ids=prompt, token_ids=[*prompt, 7],
                      prompt_logprobs=[None] + [{str(t): {"logprob": -1.0, "rank": 1}} for t in prompt[1:]])
    return {"id": "c", "choices": [{**choice, "index": i} for i in range(n)], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def _wired(client: Any, answer: Any) -> list[dict[str, str]]:
    """Point the client's transport at `answer`; returns the list the sent bodies land in."""
    sent: list[dict[str, str]] = []

    def request(method: str, path: str, *, json_body: Any = None, params: Any = None, stream: bool = False, admin: bool = False) -> _Response:
        sent.append({"path": path, "body": encode_json(json_body).decode()})
        return _Response()

    def sse(path: str, response: Any) -> Any:
        if "v1" not in path:
            return iter([answer(json.loads(sent[-1]["body"]))])
        return iter([{"id": "c", "choices": [{"index": 0, "text": "x", "token_ids": [7], "finish_reason": "length"}]},
                     {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}])

    client._http.request = request
    client._http.json_or_raise = lambda method, path, response: answer(json.loads(sent[-1]["body"]))
    client._http.iter_sse = sse
    return sent


def _clients() -> dict[str, tuple[Any, Any]]:
    return {"sglang": (SGLangClient("http://h:1"), _sglang_answer), "vllm": (VLLMClient("http://h:1", model="m"), _vllm_answer)}


def _normal(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
@pytest.mark.parametrize("case", sorted(OLD))
def test_typed_requests_send_the_old_bytes_and_parse_to_the_old_generations(case: str, kind: str) -> None:
    client, answer = _clients()[kind]
    assert isinstance(client, ServerClient)
    sent = _wired(client, answer)
    requests = typed(OLD[case]["payload"])
    answers = client.generate_requests(requests) if len(requests) > 1 else [client.generate_request(requests[0])]
    key = (lambda entry: entry["body"]) if kind == "vllm" else (lambda entry: 0)  # vLLM sends a per-prompt batch in threads
    if case in KEY_ORDER_FREE:
        assert [(e["path"], json.loads(e["body"])) for e in sent] == [(e["path"], json.loads(e["body"])) for e in OLD[case][kind]]
    else:
        assert sorted(sent, key=key) == sorted(OLD[case][kind], key=key)
    generations = [g.to_dict() for a in answers for g in a.generations]
    assert _normal(generations) == OLD[case][f"{kind}_generations"]


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
@pytest.mark.parametrize("case", STREAMED)
def test_typed_streams_send_the_old_bytes_and_end_on_the_old_answer(case: str, kind: str) -> None:
    client, answer = _clients()[kind]
    sent = _wired(client, answer)
    (request,) = typed(OLD[case]["payload"])
    last = list(client.stream_request(request))[-1]
    assert sent == OLD[case][f"{kind}_stream"]
    (old_last,) = generations_from_sglang(OLD[case]["payload"], OLD[case][f"{kind}_stream_last"][0])
    assert _normal(last.to_dict()) == _normal(old_last.to_dict())


def test_the_workloads_build_the_requests_the_old_payloads_stood_for() -> None:
    # the recorded payloads left top_k, min_p and the penalties to the server; the requests now send them at their
    # neutral values (specsuite.server.sampling_pins), so that no model default reaches the tests
    def pins(request: GenerationRequest) -> GenerationRequest:
        return dataclasses.replace(request, sampling=pinned(request.sampling))

    prose = PromptItem("p1", "prose", "Once upon a time")
    assert correctness_request(prose, SamplingCase(0.7, 0.9), 32, 12345) == pins(typed(OLD["correctness"]["payload"])[0])
    assert correctness_request(PromptItem("p2", "math", "2+2="), SamplingCase(0.0, 1.0), 16, 0) == pins(typed(OLD["correctness_greedy"]["payload"])[0])
    assert gsm8k_request("Question: 1+1?\nAnswer:", temperature=0.0, top_p=1.0, max_new_tokens=256) == pins(typed(OLD["gsm8k"]["payload"])[0])
    assert gsm8k_request("Question: 1+1?\nAnswer:", temperature=0.6, top_p=0.95, max_new_tokens=128) == pins(typed(OLD["gsm8k_sampled"]["payload"])[0])
    # the recorded scoring payload carried the generation's temperature (0.7); prompt logprobs are raw whatever
    # it says, so the request now names the temperature 1 it gets back
    old_score = typed(OLD["lossless_score"]["payload"])[0]
    assert scoring_request([1, 2, 3], [4, 5, 6], 5) == dataclasses.replace(old_score, sampling=dataclasses.replace(old_score.sampling, temperature=1.0))


def test_a_request_needs_exactly_one_prompt() -> None:
    from specsuite.errors import SpecsuiteError

    with pytest.raises(SpecsuiteError, match="exactly one"):
        GenerationRequest(sampling=Sampling(max_new_tokens=1))
    with pytest.raises(SpecsuiteError, match="exactly one"):
        GenerationRequest(prompt="a", prompt_ids=(1,))


# -- the real SGLang CPU release: the native client is all it needs ----------------------------------


@pytest.mark.parametrize("release", ["eagle-0.5.20", "eagle-0.5.23"])
def test_the_sglang_cpu_release_answers_parse_through_the_native_client(release: str) -> None:
    answers = json.loads((DATA / "sglang_live" / f"{release}.json").read_text())["answers"]
    client = SGLangClient("http://h:1")
    plain = GenerationRequest(prompt=PROMPT, sampling=Sampling.from_params(SAMPLING))
    assert native_payload(plain) == {"text": PROMPT, "sampling_params": SAMPLING}  # what answer_shapes.record_answers sent
    generation = client.parse_answer(plain, RawAnswer(native_payload(plain), answers["generate"])).generation
    assert generation.text == answers["generate"]["text"] and generation.output_ids == answers["generate"]["output_ids"]
    assert generation.completion_tokens == 12 and generation.finish_reason["type"] == "length"

    scored = GenerationRequest(prompt=PROMPT, sampling=Sampling.from_params(SAMPLING), logprobs=True, top_logprobs=2)
    generation = client.parse_answer(scored, RawAnswer(native_payload(scored), answers["generate_logprobs"])).generation
    assert len(generation.logprob_ids or []) == 12 and generation.token_source_mismatch() == []

    last_chunk = [chunk for chunk in answers["generate_stream"] if chunk != "[DONE]"][-1]
    (streamed,) = generations_from_sglang(native_payload(plain), last_chunk)
    assert streamed.output_ids == answers["generate"]["output_ids"]

    openai = OpenAICompletionsClient("http://h:1")
    completion = openai.parse_answer(plain, RawAnswer({}, answers["v1_completions"])).generation
    assert completion.text == answers["v1_completions"]["choices"][0]["text"]


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
@pytest.mark.parametrize("case", sorted(OLD))
def test_the_native_payload_adapter_still_sends_the_old_bytes(case: str, kind: str) -> None:
    """`generate(payload)` (the integrity suites send native payloads to either kind) is unchanged."""
    client, answer = _clients()[kind]
    sent = _wired(client, answer)
    raw = client.generate(OLD[case]["payload"])
    key = (lambda entry: entry["body"]) if kind == "vllm" else (lambda entry: 0)
    assert sorted(sent, key=key) == sorted(OLD[case][kind], key=key)
    assert _normal([g.to_dict() for g in generations_from_sglang(OLD[case]["payload"], raw)]) == OLD[case][f"{kind}_generations"]


# -- the native-payload adapter (the integrity suites' SGLang payloads sent to vLLM) -------------------

# tests/data/protocol_wire/native_payloads.json: what `VLLMClient.generate`/`generate_stream` sent for native
# payloads (a stop as a plain string, as a list, empty or None; stop ids; fields with and without an OpenAI name;
# top-level fields vLLM has no use for; batches; scoring) and the native items they returned, recorded by
# capture_native_payloads.py.txt before the adapter went through `request_body`.
NATIVE = json.loads((DATA / "protocol_wire" / "native_payloads.json").read_text())



def _native_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The capture's fake vLLM answer: one stop-string finish per prompt and sample, prompt logprobs on `echo`."""
    prompt = body["prompt"]
    prompts = len(prompt) if isinstance(prompt, list) and prompt and isinstance(prompt[0], (list, str)) else 1
    choice = {"index": 0, "text": "x.", "token_ids": [7, 8], "finish_reason": "stop", "stop_reason": ".",
              "logprobs": {"token_logprobs": [-0.1, -0.2], "tokens": ["token_id:7", "token_id:8"],
                           "top_logprobs": [{"token_id:7": -0.1}, {"token_id:8": -0.2}]}}
    if body.get("echo"):
        ids = prompt if isinstance(prompt[0], int) else [1, 2]
        choice.update(prompt_token_ids=ids, token_ids=[*ids, 7], prompt_logprobs=[None] + [{str(t): {"logprob": -1.0, "rank": 1}} for t in ids[1:]])
    return {"id": "c", "choices": [{**choice, "index": i} for i in range(prompts * (body.get("n") or 1))],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


NATIVE_STREAM = [{"id": "c", "choices": [{"index": 0, "text": "x", "token_ids": [7], "finish_reason": None}]},
                 {"id": "c", "choices": [{"index": 0, "text": ".", "token_ids": [8], "finish_reason": "stop", "stop_reason": "."}]},
                 {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}]


def _native_wired(client: VLLMClient) -> list[dict[str, str]]:
    sent = _wired(client, _native_answer)
    client._http.iter_sse = lambda path, response: iter(NATIVE_STREAM)
    return sent


@pytest.mark.parametrize("case", sorted(NATIVE))
def test_native_payloads_reach_vllm_as_the_recorded_bytes(case: str) -> None:
    client = VLLMClient("http://h:1", model="m")
    sent = _native_wired(client)
    answer = client.generate(NATIVE[case]["payload"])
    assert sorted(sent, key=lambda entry: entry["body"]) == sorted(NATIVE[case]["sent"], key=lambda entry: entry["body"])
    assert _normal(answer) == NATIVE[case]["answer"]


@pytest.mark.parametrize("case", sorted(case for case in NATIVE if "stream_sent" in NATIVE[case]))
def test_streamed_native_payloads_reach_vllm_as_the_recorded_bytes(case: str) -> None:
    client = VLLMClient("http://h:1", model="m")
    sent = _native_wired(client)
    chunks = list(client.generate_stream(NATIVE[case]["payload"]))
    assert sorted(sent, key=lambda entry: entry["body"]) == sorted(NATIVE[case]["stream_sent"], key=lambda entry: entry["body"])
    assert _normal(chunks) == NATIVE[case]["stream"]
