"""Client for OpenAI-compatible `/v1/completions`, `/v1/chat/completions` and `/v1/models`,
normalised into `Generation`.

Token ids: the OpenAI logprobs object carries token *strings*, not ids. Ids come only from SGLang's
`return_token_ids` extension (`choices[i].token_ids`, which includes the final EOS/stop token like
native `output_ids`). This client always asks for them; a server that ignores the field yields
`output_ids=None`, and then only the text detectors (stray characters, fragments, U+FFFD) apply.
`logprob_ids` is always None here, so `token_source_mismatch()` has nothing to compare.
Chat answers carry ids only non-streamed (`response_token_ids`; SGLang refuses `return_token_ids`
on a chat stream), so a streamed chat Generation has `output_ids=None`.

Every raw answer (the JSON object, or a stream's chunks once read to `[DONE]`) is handed to
`answered` / `streamed` before it is normalised; they do nothing here, and
`specsuite.families.integrity.recorder.CheckingOpenAIClient` overrides them to run the integrity checks.
The protocol's typed calls (`generate_request`, `stream_request`; `specsuite.server.protocol`) rename
the sampling fields to OpenAI's and go through the same hooks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.protocol import Answer, GenerationRequest, RawAnswer
from specsuite.server.transport import HttpServerClient, int_list, shorten

# logprobs=0: the sampled token's logprob at every position, no alternatives.
DEFAULT_LOGPROBS = 0
COMPLETIONS_PATH, CHAT_PATH = "/v1/completions", "/v1/chat/completions"
COMPLETIONS, CHAT = "completions", "chat"  # the `api` names specsuite.families.integrity.openai_rules uses


class OpenAICompletionsClient(HttpServerClient):
    """One OpenAI-compatible server. Same timeouts, auth and one-line errors as `SGLangClient`."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0, connect_timeout_s: float = 5.0, model: str = "default") -> None:
        super().__init__(base_url, api_key, timeout_s, connect_timeout_s)
        self.model = model

    def models(self) -> list[dict[str, Any]]:
        """GET /v1/models: the model cards (`data`)."""
        result = self._http.json_or_raise("GET", "/v1/models", self._http.request("GET", "/v1/models"))
        data = result.get("data") if isinstance(result, dict) else None
        if not isinstance(data, list):
            raise SpecsuiteError(f"GET /v1/models on {self.base_url} has no data list")
        return data

    def _body(self, prompt: str | list[int], params: dict[str, Any], stream: bool) -> dict[str, Any]:
        single_ids = isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
        if not (isinstance(prompt, str) or single_ids) or not prompt:
            raise SpecsuiteError("a completions prompt must be one non-empty string or one list of token ids")
        body: dict[str, Any] = {"model": self.model, "logprobs": DEFAULT_LOGPROBS, "return_token_ids": True}
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(params)
        body["prompt"] = prompt
        body["stream"] = stream
        return body

    def answered(self, api: str, body: dict[str, Any], result: Any) -> None:
        """Called with every non-streamed answer as received; a hook for checking clients."""

    def streamed(self, api: str, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        """Called with every complete stream's chunks (before `[DONE]`); a hook for checking clients."""

    # -- typed generation (the protocol) ------------------------------------------------------

    def send_request(self, request: GenerationRequest) -> RawAnswer:
        """POST /v1/completions for one typed request (sampling renamed to OpenAI's fields;
        `top_logprobs` alternatives when asked); the raw answer, passed to `answered` first."""
        body = self._body(request.prompt_value, self._fields(request), stream=False)
        result = self._http.json_or_raise("POST", COMPLETIONS_PATH, self._http.request("POST", COMPLETIONS_PATH, json_body=body))
        self.answered(COMPLETIONS, body, result)
        return RawAnswer(body, result)

    def parse_answer(self, request: GenerationRequest, sent: RawAnswer) -> Answer:
        """One Generation per choice; `params` by the protocol's names."""
        choices = sent.raw.get("choices") if isinstance(sent.raw, dict) else None
        if not isinstance(choices, list) or not choices:
            raise SpecsuiteError(f"POST {COMPLETIONS_PATH} on {self.base_url} returned no choices")
        usage = (sent.raw.get("usage") or {}) if len(choices) == 1 else {}
        params = request.sampling.params()
        return Answer([_generation_from_choice(request.prompt_value, params, choice, usage) for choice in choices], sent.wire, sent.raw)

    def generate_request(self, request: GenerationRequest) -> Answer:
        return self.parse_answer(request, self.send_request(request))

    def generate_requests(self, requests: Sequence[GenerationRequest]) -> list[Answer]:
        """One request after another (the OpenAI route takes one prompt per call here)."""
        return [self.generate_request(request) for request in requests]

    def stream_request(self, request: GenerationRequest) -> Iterator[Generation]:
        """A streamed completion, read whole; yields the joined Generation (one per choice)."""
        return iter(self.complete_stream(request.prompt_value, self._fields(request), params_recorded=request.sampling.params()))

    @staticmethod
    def _fields(request: GenerationRequest) -> dict[str, Any]:
        fields = request.sampling.openai_fields()
        if request.top_logprobs is not None:
            fields["logprobs"] = request.top_logprobs
        return fields

    def complete(self, prompt: str | list[int], params: dict[str, Any]) -> list[Generation]:
        """POST /v1/completions (non-stream) for one prompt; one Generation per choice (n>1 gives n).

        `params` are OpenAI fields (max_tokens, temperature, top_p, n, stop, seed, ...); they may
        override `logprobs` and `return_token_ids`.
        """
        body = self._body(prompt, params, stream=False)
        response = self._http.request("POST", "/v1/completions", json_body=body)
        result = self._http.json_or_raise("POST", "/v1/completions", response)
        self.answered(COMPLETIONS, body, result)
        choices = result.get("choices") if isinstance(result, dict) else None
        if not isinstance(choices, list) or not choices:
            raise SpecsuiteError(f"POST /v1/completions on {self.base_url} returned no choices")
        usage = result.get("usage") or {}
        choice_usage = usage if len(choices) == 1 else {}  # usage is per request, not per choice
        return [_generation_from_choice(prompt, params, choice, choice_usage) for choice in choices]

    def complete_stream(self, prompt: str | list[int], params: dict[str, Any],
                        params_recorded: dict[str, Any] | None = None) -> list[Generation]:
        """POST /v1/completions with streaming; the text, logprob and token-id deltas of each choice
        are joined into one Generation per choice (`params_recorded`: what its `params` say, when
        not the OpenAI fields sent)."""
        body = self._body(prompt, params, stream=True)
        response = self._http.request("POST", "/v1/completions", json_body=body, stream=True)
        merged: dict[int, dict[str, Any]] = {}
        usage: dict[str, Any] = {}
        chunks = []
        for chunk in self._http.iter_sse("/v1/completions", response):
            chunks.append(chunk)
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                _merge_delta(merged.setdefault(int(choice.get("index", 0)), _empty_choice()), choice)
        self.streamed(COMPLETIONS, body, chunks)
        if not merged:
            raise SpecsuiteError(f"stream from POST /v1/completions on {self.base_url} carried no choices")
        recorded = params if params_recorded is None else params_recorded
        return [
            _generation_from_choice(prompt, recorded, merged[i], usage if len(merged) == 1 else {})
            for i in sorted(merged)
        ]

    def _chat_body(self, messages: list[dict[str, Any]], params: dict[str, Any], stream: bool) -> dict[str, Any]:
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise SpecsuiteError("chat messages must be a non-empty list of objects")
        body: dict[str, Any] = {"model": self.model, "logprobs": True}
        if stream:
            body["stream_options"] = {"include_usage": True}
        else:
            body["return_token_ids"] = True
        body.update(params)
        body["messages"] = messages
        body["stream"] = stream
        return body

    def chat(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> list[Generation]:
        """POST /v1/chat/completions (non-stream); one Generation per choice, with ids."""
        body = self._chat_body(messages, params, stream=False)
        result = self._http.json_or_raise("POST", CHAT_PATH, self._http.request("POST", CHAT_PATH, json_body=body))
        self.answered(CHAT, body, result)
        choices = result.get("choices") if isinstance(result, dict) else None
        if not isinstance(choices, list) or not choices:
            raise SpecsuiteError(f"POST {CHAT_PATH} on {self.base_url} returned no choices")
        usage = (result.get("usage") or {}) if len(choices) == 1 else {}
        return [_generation_from_chat(messages, params, choice, usage) for choice in choices]

    def chat_stream(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> list[Generation]:
        """POST /v1/chat/completions streamed; content deltas joined into one Generation per choice."""
        body = self._chat_body(messages, params, stream=True)
        response = self._http.request("POST", CHAT_PATH, json_body=body, stream=True)
        chunks = list(self._http.iter_sse(CHAT_PATH, response))
        self.streamed(CHAT, body, chunks)
        merged: dict[int, dict[str, Any]] = {}
        usage: dict[str, Any] = {}
        for chunk in chunks:
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                acc = merged.setdefault(int(choice.get("index", 0)), {"message": {"content": ""}, "logprobs": None, "finish_reason": None})
                delta = choice.get("delta") or {}
                acc["message"]["content"] += delta.get("content") or ""
                if isinstance((choice.get("logprobs") or {}).get("content"), list):
                    acc["logprobs"] = {"content": (acc["logprobs"] or {"content": []})["content"] + choice["logprobs"]["content"]}
                if choice.get("finish_reason") is not None:
                    acc["finish_reason"], acc["matched_stop"] = choice["finish_reason"], choice.get("matched_stop")
        if not merged:
            raise SpecsuiteError(f"stream from POST {CHAT_PATH} on {self.base_url} carried no choices")
        return [_generation_from_chat(messages, params, merged[i], usage if len(merged) == 1 else {}) for i in sorted(merged)]


def _generation_from_chat(messages: list[dict[str, Any]], params: dict[str, Any], choice: dict[str, Any], usage: dict[str, Any]) -> Generation:
    """Normalise one chat choice; the prompt is the messages as compact JSON (for its hash)."""
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content", ""), (str, type(None))):
        raise SpecsuiteError(f"{CHAT_PATH} choice has no message: {shorten(repr(choice), 80)}")
    ids = choice.get("response_token_ids")
    output_ids = int_list(ids, f"{CHAT_PATH} response_token_ids") if ids is not None else None
    content = (choice.get("logprobs") or {}).get("content")
    finish = choice.get("finish_reason")
    finish_reason = None if finish is None else {"type": finish, **({"matched": choice["matched_stop"]} if choice.get("matched_stop") is not None else {})}
    completion_tokens = usage.get("completion_tokens", len(output_ids) if output_ids is not None else None)
    prompt = json.dumps(messages, separators=(",", ":"), sort_keys=True)
    return Generation(prompt=prompt, prompt_ids=None, prompt_hash=prompt_hash(prompt, None), params=dict(params),
                      output_ids=output_ids, text=message.get("content") or "",
                      output_logprobs=[entry.get("logprob") for entry in content] if isinstance(content, list) else None,
                      logprob_ids=None, finish_reason=finish_reason, completion_tokens=completion_tokens, meta_info={"api": "openai-chat", "usage": usage})


def _empty_choice() -> dict[str, Any]:
    return {"text": "", "logprobs": None, "token_ids": None, "finish_reason": None, "matched_stop": None}


def _merge_delta(acc: dict[str, Any], delta: dict[str, Any]) -> None:
    """Append one streamed choice delta to the accumulated choice."""
    acc["text"] += delta.get("text") or ""
    if delta.get("token_ids") is not None:
        acc["token_ids"] = (acc["token_ids"] or []) + int_list(delta["token_ids"], "/v1/completions token_ids")
    logprobs = delta.get("logprobs")
    if logprobs:
        if acc["logprobs"] is None:
            acc["logprobs"] = {"token_logprobs": [], "tokens": []}
        acc["logprobs"]["token_logprobs"] += logprobs.get("token_logprobs") or []
        acc["logprobs"]["tokens"] += logprobs.get("tokens") or []
    if delta.get("finish_reason") is not None:
        acc["finish_reason"] = delta["finish_reason"]
        acc["matched_stop"] = delta.get("matched_stop")


def _generation_from_choice(
    prompt: str | list[int], params: dict[str, Any], choice: dict[str, Any], usage: dict[str, Any]
) -> Generation:
    """Normalise one OpenAI choice. `usage` is passed only when it belongs to this choice alone."""
    if not isinstance(choice, dict) or not isinstance(choice.get("text"), str):
        raise SpecsuiteError(f"/v1/completions choice has no text: {shorten(repr(choice), 80)}")
    token_ids = choice.get("token_ids")
    output_ids = int_list(token_ids, "/v1/completions token_ids") if token_ids is not None else None
    logprobs = choice.get("logprobs") or {}
    token_logprobs = logprobs.get("token_logprobs")
    finish = choice.get("finish_reason")
    finish_reason = None
    if finish is not None:
        # Same shape as native meta_info.finish_reason, so detectors and reports need one code path.
        finish_reason = {"type": finish}
        if choice.get("matched_stop") is not None:
            finish_reason["matched"] = choice["matched_stop"]
    completion_tokens = usage.get("completion_tokens")
    if completion_tokens is None and output_ids is not None:
        completion_tokens = len(output_ids)
    text_prompt = prompt if isinstance(prompt, str) else None
    ids_prompt = prompt if isinstance(prompt, list) else None
    return Generation(prompt=text_prompt, prompt_ids=ids_prompt, prompt_hash=prompt_hash(text_prompt, ids_prompt), params=dict(params), output_ids=output_ids,
                      text=choice["text"], output_logprobs=list(token_logprobs) if token_logprobs is not None else None, logprob_ids=None,
                      finish_reason=finish_reason, completion_tokens=completion_tokens,
                      meta_info={"api": "openai-completions", "usage": usage, "logprob_tokens": logprobs.get("tokens")})
