"""vLLM answering the native /generate vocabulary: a native payload (text or ids, SGLang's sampling_params, a batch
or n > 1) goes out as vLLM 0.32 /v1/completions requests built by the one body builder (`wire.request_body`), and
each choice comes back as a native answer item, prompt-major as SGLang answers. This is how `VLLMClient` serves the
protocol's typed native call (`ServerClient.generate_native`, `stream_native`), which the integrity suite uses to
send the same requests to every kind.

Per-prompt sampling_params go as one request per prompt, sent together; a streamed batch likewise, with SGLang's
`index` on each chunk. Every raw vLLM answer passes the client's `answered` / `streamed` hook first, so a checking
client runs the vLLM rules on what vLLM really sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from specsuite.errors import SpecsuiteError
from specsuite.server.kinds.vllm.wire import BATCH_WORKERS, COMPLETIONS_PATH, choice_parts, cumulative_parts, request_body
from specsuite.server.protocol import GenerationRequest, Sampling
from specsuite.server.transport import HttpTransport


class VLLMHooks(Protocol):
    """What the adapter uses of a `VLLMClient`: its transport, its served model and its raw-answer hooks."""

    _http: HttpTransport

    @property
    def base_url(self) -> str: ...

    def model_name(self) -> str: ...

    def answered(self, body: dict[str, Any], result: Any) -> None: ...

    def streamed(self, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None: ...


def answer_native(client: VLLMHooks, payload: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
    """A native /generate payload served by /v1/completions; a batch or n>1 returns a list,
    prompt-major as SGLang answers. Per-prompt sampling_params go as one request per prompt."""
    prompts, batched = native_prompts(payload)
    params = payload.get("sampling_params") or {}
    if isinstance(params, list):
        if len(params) != len(prompts):
            raise SpecsuiteError(f"/generate payload has {len(params)} sampling_params for {len(prompts)} prompts")
        with ThreadPoolExecutor(max_workers=min(BATCH_WORKERS, len(prompts))) as pool:
            parts = list(pool.map(lambda i: _complete(client, payload, [prompts[i]], params[i]), range(len(prompts))))
        return [item for part in parts for item in part]
    items = _complete(client, payload, prompts, params)
    return items if batched or len(items) > 1 else items[0]

def _complete(client: VLLMHooks, payload: dict[str, Any], prompts: list[Any], params: dict[str, Any]) -> list[dict[str, Any]]:
    body = native_body(client.model_name(), payload, prompts, params, stream=False)
    result = client._http.json_or_raise("POST", COMPLETIONS_PATH, client._http.request("POST", COMPLETIONS_PATH, json_body=body))
    client.answered(body, result)
    choices = result.get("choices") if isinstance(result, dict) else None
    if not isinstance(choices, list) or not choices:
        raise SpecsuiteError(f"POST {COMPLETIONS_PATH} on {client.base_url} returned no choices")
    choices = sorted(choices, key=lambda choice: choice.get("index", 0) if isinstance(choice, dict) else 0)
    single = len(choices) == 1
    start = payload.get("logprob_start_len") if body.get("echo") else None
    return [native_item(body, result, choice, single, logprob_start=start) for choice in choices]

def stream_native(client: VLLMHooks, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A streamed native request: yields cumulative native chunks (SGLang's default), built
    from vLLM's delta chunks; the last per request carries usage, finish and spec stats. A
    batch is streamed as one request per prompt, sent together, with SGLang's `index` on each
    chunk (the streams are read whole, then yielded in prompt order)."""
    prompts, batched = native_prompts(payload)
    params = payload.get("sampling_params") or {}
    params_list = params if isinstance(params, list) else [params] * len(prompts)
    if any((p.get("n") or 1) > 1 for p in params_list):
        raise SpecsuiteError("the vLLM adapter streams n = 1 only")

    def stream(index: int) -> list[dict[str, Any]]:
        body = native_body(client.model_name(), payload, [prompts[index]], params_list[index], stream=True)
        response = client._http.request("POST", COMPLETIONS_PATH, json_body=body, stream=True)
        chunks = list(client._http.iter_sse(COMPLETIONS_PATH, response))
        client.streamed(body, chunks)
        native = cumulative_native_chunks(body, chunks)
        return [{**chunk, "index": index} for chunk in native] if batched else native

    if not batched:
        return iter(stream(0))
    with ThreadPoolExecutor(max_workers=min(BATCH_WORKERS, len(prompts))) as pool:
        return iter([chunk for chunks in pool.map(stream, range(len(prompts))) for chunk in chunks])



def native_prompts(payload: dict[str, Any]) -> tuple[list[Any], bool]:
    """The prompts of a native payload (text or ids), and whether it was a batch."""
    text = payload.get("text")
    if text is not None:
        return (list(text), True) if isinstance(text, list) else ([text], False)
    ids = payload.get("input_ids")
    if isinstance(ids, list) and ids and isinstance(ids[0], list):
        return list(ids), True
    if isinstance(ids, list) and ids:
        return [ids], False
    raise SpecsuiteError("/generate payload has neither text nor input_ids")


def native_request(payload: dict[str, Any], prompt: str | list[int], params: dict[str, Any]) -> tuple[GenerationRequest, dict[str, Any]]:
    """One prompt of a native payload as a typed request, plus the raw fields to send as the payload spells them.

    The raw fields keep the payload's own bytes where the typed request would normalise them: a stop given as a plain
    string goes as that string, not as a one-string list. vLLM reads both alike (CompletionRequest.stop is
    `str | list[str] | None`, vllm/entrypoints/generate/base/protocol.py:26-28 and openai/completion/protocol.py:67;
    SamplingParams.__post_init__ turns a string into a one-string list, vllm/sampling_params.py:574-577), so the
    payload reaches vLLM as an SGLang client's request would, the form the integrity suites mean to test."""
    text = isinstance(prompt, str)
    request = GenerationRequest(prompt=prompt if text else None, prompt_ids=None if text else tuple(prompt),
                                sampling=Sampling.from_params(params), logprobs=bool(payload.get("return_logprob")),
                                top_logprobs=payload.get("top_logprobs_num"), logprob_start=payload.get("logprob_start_len"))
    raw = {"stop": params["stop"]} if isinstance(params.get("stop"), str) else {}
    return request, raw


def native_body(model: str, payload: dict[str, Any], prompts: Sequence[Any], params: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """The /v1/completions body for a native payload's prompts sharing `params` (several go as one list, as SGLang's
    shared-params batch): `request_body` for the first, typed, with the payload's raw fields."""
    request, raw = native_request(payload, prompts[0], params)
    body = request_body(model, request, stream=stream, raw=raw)
    if len(prompts) > 1:
        body["prompt"] = list(prompts)
    return body



def native_item(body: dict[str, Any], result: dict[str, Any], choice: dict[str, Any], single: bool,
                logprob_start: int | None = None) -> dict[str, Any]:
    """One native /generate answer item for one completions choice (the native-payload adapter
    `generate`, which the integrity suites drive with SGLang payloads)."""
    text, ids, meta, triples = choice_parts(body, result, choice, single, logprob_start)
    if triples is not None:
        meta = {**meta, "output_token_logprobs": triples}
    return {"text": text, "output_ids": ids, "meta_info": meta}



def cumulative_native_chunks(body: dict[str, Any], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Native cumulative stream chunks (the native-payload adapter's stream)."""
    native = []
    for text, ids, meta, triples in cumulative_parts(body, chunks):
        if triples is not None:
            meta = {**meta, "output_token_logprobs": triples}
        native.append({"text": text, "output_ids": ids, "meta_info": meta})
    return native
