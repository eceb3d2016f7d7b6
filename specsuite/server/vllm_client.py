"""vLLM's OpenAI-compatible server, behind the server-client protocol (`specsuite.server.protocol`).

`generate_request` / `stream_request` turn a typed `GenerationRequest` into vLLM 0.32's
`/v1/completions` body (`request_body`, the one body builder) and each choice straight into a
`Generation` (`generation_of_choice`). `generate` / `generate_stream` remain as a native-payload
adapter for the integrity suites, which send SGLang /generate payloads to either server kind on
purpose and read the answers in SGLang's shape: each payload becomes a typed request plus the raw
fields it spells its own way (`native_request`), and goes through `request_body` too. Facts it
relies on are in docs/vllm_api_facts.md, each with its vLLM source line:

* ids come from `return_token_ids` (`choices[i].token_ids`, EOS and stop-string tokens included);
  the logprob ids come separately, from `logprobs` with `return_tokens_as_token_ids`
  (`token_id:<id>`), so `Generation.token_source_mismatch` compares two independent sources;
* speculation stats come per request from `metrics.speculative_decoding` (the server must run with
  `--per-request-spec-decode-metrics`); vLLM leaves them out for `n > 1`, for several prompts in
  one request and for a stop-string finish, and then `meta_info` has no `spec_*` keys;
* the server-wide accept length comes from `/metrics` (`vllm:spec_decode_*` counters): vLLM has no
  `/flush_cache`, so `flush_cache` takes a snapshot of the counters and `server_info` reports the
  accept length since the last snapshot, which is what SGLang's flush-then-read gives.

Every raw vLLM answer is handed to `answered` / `streamed` before translation; a checking client
(`specsuite.families.integrity.recorder`) overrides them to run the vLLM accounting rules on what the
server really sent, not on the translation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.counters import label_values, parse_prometheus
from specsuite.server.faults import check_generate_result
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.protocol import Answer, GenerationRequest, RawAnswer, Sampling
from specsuite.server.transport import HttpServerClient, int_list, shorten

SERVER_KIND = "vllm"
COMPLETIONS_PATH = "/v1/completions"
DEV_SERVER_INFO = "/server_info"
TOKEN_AS_ID = re.compile(r"^token_id:(-?\d+)$")
SPEC_PREFIX = "vllm:spec_decode_"
BATCH_WORKERS = 8


class VLLMClient(HttpServerClient):
    """One vLLM server, with `SGLangClient`'s methods. Same timeouts, auth and one-line errors."""

    kind = SERVER_KIND

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0, connect_timeout_s: float = 5.0,
                 admin_api_key: str | None = None, model: str | None = None) -> None:
        super().__init__(base_url, api_key, timeout_s, connect_timeout_s, admin_api_key=admin_api_key)
        self._model = model
        self._card: dict[str, Any] | None = None
        self._spec_snapshot: dict[str, float] | None = None

    # -- hooks for checking clients -----------------------------------------------------------

    def answered(self, body: dict[str, Any], result: Any) -> None:
        """Called with every non-streamed /v1/completions answer as received."""

    def streamed(self, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        """Called with every complete stream's chunks (before `[DONE]`)."""

    # -- typed generation (the protocol) ------------------------------------------------------

    def send_request(self, request: GenerationRequest) -> RawAnswer:
        """POST /v1/completions for one typed request; the raw answer, checked by `answered` first."""
        body = request_body(self.model_name(), request, stream=False)
        result = self._http.json_or_raise("POST", COMPLETIONS_PATH, self._http.request("POST", COMPLETIONS_PATH, json_body=body))
        self.answered(body, result)
        choices = result.get("choices") if isinstance(result, dict) else None
        if not isinstance(choices, list) or not choices:
            raise SpecsuiteError(f"POST {COMPLETIONS_PATH} on {self.base_url} returned no choices")
        return RawAnswer(body, result)

    def parse_answer(self, request: GenerationRequest, sent: RawAnswer) -> Answer:
        """One Generation per choice (n > 1 gives n), by index; an unusable one (no finish, no
        counts) is the same classified RequestFault a native answer gets."""
        choices = sorted(sent.raw["choices"], key=lambda choice: choice.get("index", 0) if isinstance(choice, dict) else 0)
        generations = [generation_of_choice(request, sent.wire, sent.raw, choice, len(choices) == 1) for choice in choices]
        check_generate_result([{"meta_info": g.meta_info, "output_ids": g.output_ids} for g in generations])
        return Answer(generations, sent.wire, sent.raw)

    def generate_request(self, request: GenerationRequest) -> Answer:
        """POST /v1/completions for one typed request; one Generation per choice (n > 1 gives n)."""
        return self.parse_answer(request, self.send_request(request))

    def generate_requests(self, requests: Sequence[GenerationRequest]) -> list[Answer]:
        """Requests of one kind (the same sampling and logprob flags, all text or all ids, no
        scoring) go as one /v1/completions request with a list of prompts, as SGLang's shared-params
        batch; otherwise one request each, sent together. vLLM reports usage and speculation per
        request, so a several-prompt request's Generations carry neither."""
        if not requests:
            return []
        if len(requests) > 1 and _one_kind(requests):
            body = request_body(self.model_name(), requests[0], stream=False)
            body["prompt"] = [request.prompt_value for request in requests]
            result = self._http.json_or_raise("POST", COMPLETIONS_PATH, self._http.request("POST", COMPLETIONS_PATH, json_body=body))
            self.answered(body, result)
            choices = result.get("choices") if isinstance(result, dict) else None
            if not isinstance(choices, list) or len(choices) % len(requests) != 0:
                raise SpecsuiteError(f"POST {COMPLETIONS_PATH} on {self.base_url} answered {shorten(repr(choices), 60)} for {len(requests)} prompts")
            choices = sorted(choices, key=lambda choice: choice.get("index", 0) if isinstance(choice, dict) else 0)
            per = len(choices) // len(requests)  # vLLM numbers the choices prompt-major: prompt k, sample j is k * n + j
            answers = []
            for k, request in enumerate(requests):
                generations = [generation_of_choice(request, body, result, choice, False) for choice in choices[k * per:(k + 1) * per]]
                check_generate_result([{"meta_info": g.meta_info, "output_ids": g.output_ids} for g in generations])
                answers.append(Answer(generations, body, result))
            return answers
        with ThreadPoolExecutor(max_workers=min(BATCH_WORKERS, len(requests))) as pool:
            return list(pool.map(self.generate_request, requests))

    def stream_request(self, request: GenerationRequest) -> Iterator[Generation]:
        """POST /v1/completions streamed, read whole: one cumulative Generation per chunk that
        carried a choice; the last carries finish, usage and the speculation stats."""
        if (request.sampling.n or 1) > 1:
            raise SpecsuiteError("the vLLM client streams n = 1 only")
        body = request_body(self.model_name(), request, stream=True)
        response = self._http.request("POST", COMPLETIONS_PATH, json_body=body, stream=True)
        chunks = list(self._http.iter_sse(COMPLETIONS_PATH, response))
        self.streamed(body, chunks)
        prompt_ids = list(request.prompt_ids) if request.prompt_ids is not None else None
        return iter([Generation(prompt=request.prompt, prompt_ids=prompt_ids, prompt_hash=prompt_hash(request.prompt, prompt_ids),
                                params=request.sampling.params(), output_ids=ids, text=text,
                                output_logprobs=None if triples is None else [t[0] for t in triples],
                                logprob_ids=None if triples is None else [t[1] for t in triples],
                                finish_reason=meta.get("finish_reason"), completion_tokens=meta.get("completion_tokens"), meta_info=meta)
                     for text, ids, meta, triples in cumulative_parts(body, chunks)])

    # -- native-payload adapter (the integrity suites send SGLang payloads to either kind) ----------

    def generate(self, payload: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """A native /generate payload served by /v1/completions; a batch or n>1 returns a list,
        prompt-major as SGLang answers. Per-prompt sampling_params go as one request per prompt."""
        prompts, batched = native_prompts(payload)
        params = payload.get("sampling_params") or {}
        if isinstance(params, list):
            if len(params) != len(prompts):
                raise SpecsuiteError(f"/generate payload has {len(params)} sampling_params for {len(prompts)} prompts")
            with ThreadPoolExecutor(max_workers=min(BATCH_WORKERS, len(prompts))) as pool:
                parts = list(pool.map(lambda i: self._complete(payload, [prompts[i]], params[i]), range(len(prompts))))
            return [item for part in parts for item in part]
        items = self._complete(payload, prompts, params)
        return items if batched or len(items) > 1 else items[0]

    def _complete(self, payload: dict[str, Any], prompts: list[Any], params: dict[str, Any]) -> list[dict[str, Any]]:
        body = native_body(self.model_name(), payload, prompts, params, stream=False)
        result = self._http.json_or_raise("POST", COMPLETIONS_PATH, self._http.request("POST", COMPLETIONS_PATH, json_body=body))
        self.answered(body, result)
        choices = result.get("choices") if isinstance(result, dict) else None
        if not isinstance(choices, list) or not choices:
            raise SpecsuiteError(f"POST {COMPLETIONS_PATH} on {self.base_url} returned no choices")
        choices = sorted(choices, key=lambda choice: choice.get("index", 0) if isinstance(choice, dict) else 0)
        single = len(choices) == 1
        start = payload.get("logprob_start_len") if body.get("echo") else None
        return [native_item(body, result, choice, single, logprob_start=start) for choice in choices]

    def generate_stream(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
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
            body = native_body(self.model_name(), payload, [prompts[index]], params_list[index], stream=True)
            response = self._http.request("POST", COMPLETIONS_PATH, json_body=body, stream=True)
            chunks = list(self._http.iter_sse(COMPLETIONS_PATH, response))
            self.streamed(body, chunks)
            native = cumulative_native_chunks(body, chunks)
            return [{**chunk, "index": index} for chunk in native] if batched else native

        if not batched:
            return iter(stream(0))
        with ThreadPoolExecutor(max_workers=min(BATCH_WORKERS, len(prompts))) as pool:
            return iter([chunk for chunks in pool.map(stream, range(len(prompts))) for chunk in chunks])

    # -- server facts -----------------------------------------------------------------------

    def model_card(self) -> dict[str, Any]:
        """The first card of GET /v1/models (vLLM serves one model per server)."""
        if self._card is None:
            result = self._http.json_or_raise("GET", "/v1/models", self._http.request("GET", "/v1/models"))
            data = result.get("data") if isinstance(result, dict) else None
            if not isinstance(data, list) or not data or not isinstance(data[0], dict):
                raise SpecsuiteError(f"GET /v1/models on {self.base_url} lists no model")
            self._card = data[0]
        return self._card

    def model_name(self) -> str:
        return self._model or str(self.model_card().get("id"))

    def version(self) -> str | None:
        result = self._http.json_or_raise("GET", "/version", self._http.request("GET", "/version"))
        return str(result.get("version")) if isinstance(result, dict) and result.get("version") else None

    def model_info(self) -> dict[str, Any]:
        """SGLang's /model_info fields from the model card: `root` is the model folder the server
        loaded (relative to the server's working directory when it was given so)."""
        card = self.model_card()
        root = card.get("root")
        return {"model_path": root, "tokenizer_path": root, "served_model_name": card.get("id"),
                "max_model_len": card.get("max_model_len"), "server_kind": SERVER_KIND}

    def check_connection(self) -> dict[str, Any]:
        info = self.model_info()
        if not info.get("model_path"):
            raise SpecsuiteError(f"{self.base_url}: /v1/models names no model folder (root)")
        return info

    def server_info(self) -> dict[str, Any]:
        """What SGLang's /server_info would say, from /version and /metrics. vLLM does not say
        which speculative method it runs over HTTP, only that it speculates and how many tokens
        it drafts (one `position` label per draft token)."""
        info: dict[str, Any] = {"version": self.version(), "server_kind": SERVER_KIND, "served_model_name": self.model_name()}
        info.update(self.dev_facts())
        counters = self._spec_counters()
        positions = int(counters.pop("positions", 0))
        if positions:
            info.update(speculative_algorithm="vllm (method not reported over HTTP)", speculative_num_steps=positions,
                        speculative_eagle_topk=1, speculative_num_draft_tokens=positions + 1)
            accept = accept_length_between(self._spec_snapshot, counters)
            if accept is not None:
                info["internal_states"] = [{"avg_spec_accept_length": accept}]
        return info

    def dev_facts(self) -> dict[str, Any]:
        """What only vLLM's development /server_info tells (served with VLLM_SERVER_DEV_MODE=1, vLLM 0.32
        entrypoints/serve/__init__.py:57-61): `batch_invariant` from its `vllm_env` (VLLM_BATCH_INVARIANT,
        envs.py:636; dev/server_info/api_router.py:43-59) and the model config's `generation_config` source and
        `override_generation_config` (config/model.py:354, :1862-1867). Empty when the route is not served."""
        response = self._http.request("GET", DEV_SERVER_INFO, params={"config_format": "json"})
        with response:
            if not response.ok:
                return {}
            try:
                body = response.json()
            except ValueError:
                return {}
        env = body.get("vllm_env") if isinstance(body, dict) else None
        config = body.get("vllm_config") if isinstance(body, dict) else None
        model = config.get("model_config") if isinstance(config, dict) else None
        facts: dict[str, Any] = {}
        if isinstance(env, dict) and "VLLM_BATCH_INVARIANT" in env:
            facts["batch_invariant"] = bool(env["VLLM_BATCH_INVARIANT"])
        if isinstance(model, dict):
            facts.update({name: model[name] for name in ("generation_config", "override_generation_config") if name in model})
        return facts

    def _spec_counters(self) -> dict[str, float]:
        text = self.metrics_text()
        if text is None:
            return {}
        return spec_counters(text)

    def health(self) -> bool:
        return self._probe("/health")

    def ready(self) -> bool:
        return self._probe("/health")


    # -- tokenizer endpoints -----------------------------------------------------------------

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        body = {"model": self.model_name(), "prompt": text, "add_special_tokens": add_special_tokens}
        result = self._http.json_or_raise("POST", "/tokenize", self._http.request("POST", "/tokenize", json_body=body))
        return int_list(result.get("tokens") if isinstance(result, dict) else None, f"/tokenize on {self.base_url} answered tokens that")

    def detokenize(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """POST /detokenize. vLLM's takes no skip_special_tokens and keeps specials (the raw decoding)."""
        body = {"model": self.model_name(), "tokens": ids}
        result = self._http.json_or_raise("POST", "/detokenize", self._http.request("POST", "/detokenize", json_body=body))
        text = result.get("prompt") if isinstance(result, dict) else None
        if not isinstance(text, str):
            raise SpecsuiteError(f"/detokenize on {self.base_url} answered {shorten(repr(result), 80)}, not a prompt text")
        return text

    def detokenize_each(self, ids: list[int], skip_special_tokens: bool = False) -> list[str]:
        """Each id on its own: vLLM's /detokenize takes one sequence, so one call per distinct id."""
        distinct = sorted(set(ids))
        with ThreadPoolExecutor(max_workers=BATCH_WORKERS) as pool:
            texts = dict(zip(distinct, pool.map(lambda token: self.detokenize([token]), distinct), strict=True))
        return [texts[token] for token in ids]

    # -- maintenance ------------------------------------------------------------------------

    def flush_cache(self) -> bool:
        """vLLM has no /flush_cache. What a flush does for the harness (restart the server-wide
        accept length) is done by a snapshot of the spec counters; always succeeds."""
        counters = self._spec_counters()
        counters.pop("positions", None)
        self._spec_snapshot = counters
        return True



# -- translation: native request -> vLLM body ------------------------------------------------


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


def _one_kind(requests: Sequence[GenerationRequest]) -> bool:
    first = requests[0]
    return first.logprob_start is None and all(
        (r.prompt is None, r.sampling, r.logprobs, r.top_logprobs, r.logprob_start)
        == (first.prompt is None, first.sampling, first.logprobs, first.top_logprobs, first.logprob_start) for r in requests)


def request_body(model: str, request: GenerationRequest, *, stream: bool, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """The /v1/completions body for a typed request: ids always (`return_token_ids`), logprob ids
    when logprobs are asked for, prompt logprobs (`echo`) for a scoring request (`logprob_start`).
    `raw` (the native-payload adapter's, `native_request`): fields sent as given, in the typed field's place."""
    body: dict[str, Any] = {"model": model, "prompt": request.prompt_value, "stream": stream, "return_token_ids": True}
    body.update(request.sampling.openai_fields())
    body.update(raw or {})
    # top_k -1 is sent as it is: vLLM 0.32 reads 0 or -1 as "no top-k" (sampling_params.py:315-317), while
    # an omitted field takes the model's generation_config.json default (entrypoints/openai/completion/serving.py:80).
    if request.logprobs:
        body["logprobs"] = int(request.top_logprobs or 0)
        body["return_tokens_as_token_ids"] = True
        if request.logprob_start is not None and request.logprob_start >= 0:
            body["echo"] = True
            body["prompt_logprobs"] = int(request.top_logprobs or 0)
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# -- translation: vLLM answer -> native item ----------------------------------------------------


def token_id_of(token: Any) -> int:
    """The id in a `token_id:<id>` logprob token (return_tokens_as_token_ids)."""
    match = TOKEN_AS_ID.match(token) if isinstance(token, str) else None
    if match is None:
        raise SpecsuiteError(f"vLLM logprob token {shorten(repr(token), 40)} is not of the form token_id:<id>")
    return int(match.group(1))


def output_triples(logprobs: Any) -> list[list[Any]] | None:
    """SGLang's `[logprob, id, None]` triples from a completions logprobs object."""
    if not isinstance(logprobs, dict):
        return None
    values, tokens = logprobs.get("token_logprobs") or [], logprobs.get("tokens") or []
    return [[value, token_id_of(token), None] for value, token in zip(values, tokens, strict=False)]


def top_triples(logprobs: Any) -> list[list[list[Any]]] | None:
    """SGLang's `output_top_logprobs`: per position the `[logprob, id, None]` of vLLM's
    `top_logprobs` dict, most likely first (vLLM adds the sampled token: up to N+1 entries)."""
    tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(tops, list):
        return None
    ranked = []
    for entry in tops:
        pairs = [[value, token_id_of(token), None] for token, value in (entry or {}).items()]
        ranked.append(sorted(pairs, key=lambda triple: -(triple[0] if triple[0] is not None else float("-inf"))))
    return ranked


def finish_reason(choice: dict[str, Any], ids: list[int], params: dict[str, Any]) -> dict[str, Any] | None:
    """SGLang's finish_reason object: a stop string or stop id is `matched`; EOS (vLLM's
    stop_reason None) matches the last id; `length` carries the budget."""
    reason = choice.get("finish_reason")
    if reason is None:
        return None
    if reason == "length":
        return {"type": "length", "length": params.get("max_tokens", len(ids))}
    if reason == "stop":
        matched = choice.get("stop_reason")
        return {"type": "stop", "matched": matched if matched is not None else (ids[-1] if ids else None)}
    return {"type": reason, "message": str(choice.get("stop_reason") or reason)}


def spec_meta(metrics: Any) -> dict[str, Any]:
    """SGLang's per-request spec fields from vLLM's `metrics.speculative_decoding`, the raw
    object kept beside them. vLLM's accept length is 1 + accepted / steps (the bonus token)."""
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return {}
    meta: dict[str, Any] = {"vllm_speculative_decoding": spec}
    steps = spec.get("num_spec_steps")
    if isinstance(steps, int) and steps > 0:
        meta["spec_verify_ct"] = steps
        meta["spec_accept_length"] = spec.get("mean_acceptance_length")
        meta["spec_accept_rate"] = spec.get("draft_acceptance_rate")
        meta["spec_num_correct_drafts"] = spec.get("num_accepted_draft_tokens")
        meta["spec_num_proposed_drafts"] = spec.get("num_draft_tokens")
    return meta


def native_item(body: dict[str, Any], result: dict[str, Any], choice: dict[str, Any], single: bool,
                logprob_start: int | None = None) -> dict[str, Any]:
    """One native /generate answer item for one completions choice (the native-payload adapter
    `generate`, which the integrity suites drive with SGLang payloads)."""
    text, ids, meta, triples = choice_parts(body, result, choice, single, logprob_start)
    if triples is not None:
        meta = {**meta, "output_token_logprobs": triples}
    return {"text": text, "output_ids": ids, "meta_info": meta}


def generation_of_choice(request: GenerationRequest, body: dict[str, Any], result: dict[str, Any], choice: dict[str, Any],
                         single: bool) -> Generation:
    """One `Generation` straight from one completions choice of a typed request."""
    text, ids, meta, triples = choice_parts(body, result, choice, single, request.logprob_start)
    prompt_ids = list(request.prompt_ids) if request.prompt_ids is not None else None
    return Generation(prompt=request.prompt, prompt_ids=prompt_ids, prompt_hash=prompt_hash(request.prompt, prompt_ids),
                      params=request.sampling.params(), output_ids=ids, text=text,
                      output_logprobs=None if triples is None else [t[0] for t in triples],
                      logprob_ids=None if triples is None else [t[1] for t in triples],
                      finish_reason=meta.get("finish_reason"), completion_tokens=meta.get("completion_tokens"), meta_info=meta)


def choice_parts(body: dict[str, Any], result: dict[str, Any], choice: dict[str, Any], single: bool,
                 logprob_start: int | None = None) -> tuple[str, list[int], dict[str, Any], list[list[Any]] | None]:
    """Text, output ids, meta_info (the Generation's fields by SGLang's names) and the output
    `[logprob, id, None]` triples (None when not asked for) of one completions choice. Usage and
    metrics belong to the request, so they are used only when the request had one choice. A
    scoring request (`echo`) reports the prompt's logprobs from `logprob_start` on, as SGLang does."""
    if not isinstance(choice, dict):
        raise SpecsuiteError(f"/v1/completions choice is not an object: {shorten(repr(choice), 80)}")
    ids = int_list(choice.get("token_ids"), "/v1/completions token_ids")
    prompt_ids = choice.get("prompt_token_ids") or []
    if body.get("echo"):
        ids = ids[len(prompt_ids):]  # echo returns prompt + output ids
    usage = result.get("usage") if single and isinstance(result.get("usage"), dict) else {}
    meta: dict[str, Any] = {
        "id": result.get("id"),
        "finish_reason": finish_reason(choice, ids, body),
        "prompt_tokens": usage.get("prompt_tokens", len(prompt_ids)),
        "completion_tokens": usage.get("completion_tokens", len(ids)),
        "cached_tokens": 0,
        "server_kind": SERVER_KIND,
    }
    logprobs = choice.get("logprobs")
    triples = None
    if body.get("echo"):
        meta.update(scoring_logprobs(choice, len(prompt_ids), int(body.get("prompt_logprobs") or 0), logprob_start or 0))
        triples = []
        ids = [] if body.get("max_tokens") == 0 else ids
    elif "logprobs" in body:
        triples = output_triples(logprobs) or []
        if body["logprobs"] > 0:
            meta["output_top_logprobs"] = top_triples(logprobs) or []
    if single:
        meta.update(spec_meta(result.get("metrics")))
    return choice.get("text", ""), ids, meta, triples


def scoring_logprobs(choice: dict[str, Any], prompt_len: int, top_k: int, start: int = 0) -> dict[str, Any]:
    """`input_token_logprobs` and the top-k (`input_top_logprobs`, ranks 1..k only) of prompt
    positions `start`.. from vLLM's `prompt_logprobs`: a list, one entry per prompt position
    (None first), each a dict id -> {logprob, rank, decoded_token} holding the top-k and the
    prompt's own token, whatever its rank (kept out of the top-k unless it is in it)."""
    entries = choice.get("prompt_logprobs") or []
    prompt_ids = choice.get("prompt_token_ids") or []
    triples, tops = [], []
    for position, entry in enumerate(entries[:prompt_len]):
        if position < start:
            continue
        token = prompt_ids[position] if position < len(prompt_ids) else None
        if not isinstance(entry, dict):
            triples.append([None, token, None])
            tops.append(None)
            continue
        own = entry.get(str(token)) or {}
        triples.append([own.get("logprob"), token, None])
        ranked = sorted(((int(key), value) for key, value in entry.items() if (value.get("rank") or 0) <= top_k),
                        key=lambda kv: kv[1].get("rank") or 0)
        tops.append([[value.get("logprob"), key, None] for key, value in ranked])
    return {"input_token_logprobs": triples, "input_top_logprobs": tops}


def cumulative_native_chunks(body: dict[str, Any], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Native cumulative stream chunks (the native-payload adapter's stream)."""
    native = []
    for text, ids, meta, triples in cumulative_parts(body, chunks):
        if triples is not None:
            meta = {**meta, "output_token_logprobs": triples}
        native.append({"text": text, "output_ids": ids, "meta_info": meta})
    return native


def cumulative_parts(body: dict[str, Any], chunks: list[dict[str, Any]]) -> list[tuple[str, list[int], dict[str, Any], list[list[Any]] | None]]:
    """Cumulative (text, ids, meta, logprob triples) from vLLM's delta chunks: one per chunk that
    carried a choice; the usage-only last chunk (and its spec stats) completes the final one.
    Triples are None when the request asked for no logprobs."""
    text, ids, triples = "", [], []
    parts: list[tuple[str, list[int], dict[str, Any], list[list[Any]] | None]] = []
    usage, metrics, last_choice = None, None, None
    for chunk in chunks:
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        if isinstance(chunk.get("metrics"), dict):
            metrics = chunk["metrics"]
        for choice in chunk.get("choices") or []:
            text += choice.get("text") or ""
            ids = ids + int_list(choice.get("token_ids") or [], "streamed token_ids")
            triples = triples + (output_triples(choice.get("logprobs")) or [])
            last_choice = choice
            meta = {"id": chunk.get("id"), "finish_reason": None, "completion_tokens": len(ids), "server_kind": SERVER_KIND}
            parts.append((text, list(ids), meta, list(triples) if "logprobs" in body else None))
    if not parts:
        raise SpecsuiteError(f"the {COMPLETIONS_PATH} stream carried no choice")
    final = parts[-1][2]
    final["finish_reason"] = finish_reason(last_choice or {}, ids, body)
    if usage is not None:
        final["prompt_tokens"] = usage.get("prompt_tokens")
        final["completion_tokens"] = usage.get("completion_tokens")
    final.update(spec_meta(metrics))
    return parts


# -- /metrics -----------------------------------------------------------------------------------


def spec_counters(metrics_text: str) -> dict[str, float]:
    """vLLM's speculation counters summed over engines (`num_drafts`, `num_draft_tokens`,
    `num_accepted_tokens`) and `positions`, the number of draft positions; empty when the
    server does not speculate (vLLM then exports none of them)."""
    values = parse_prometheus(metrics_text)
    totals = {name[len(SPEC_PREFIX):-len("_total")]: value for name, value in values.items()
              if name.startswith(SPEC_PREFIX) and name.endswith("_total") and "_per_pos" not in name}
    if totals:
        totals["positions"] = float(len(label_values(metrics_text, f"{SPEC_PREFIX}num_accepted_tokens_per_pos_total", "position")))
    return totals


def accept_length_between(before: dict[str, float] | None, after: dict[str, float]) -> float | None:
    """1 + accepted / drafts over the interval (vLLM's own formula, v1/spec_decode/metrics.py);
    None before any draft."""
    before = before or {}
    drafts = after.get("num_drafts", 0.0) - before.get("num_drafts", 0.0)
    accepted = after.get("num_accepted_tokens", 0.0) - before.get("num_accepted_tokens", 0.0)
    return 1.0 + accepted / drafts if drafts > 0 else None
