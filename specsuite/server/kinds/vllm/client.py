"""vLLM's OpenAI-compatible server, behind the server-client protocol (`specsuite.server.protocol`).

`generate_request` / `stream_request` turn a typed `GenerationRequest` into vLLM 0.32's
`/v1/completions` body (`request_body`, the one body builder) and each choice straight into a
`Generation` (`generation_of_choice`; both in `specsuite.server.kinds.vllm.wire`). The protocol's native
call (`generate_native` / `stream_native`, which the integrity suite sends to every kind in SGLang's
vocabulary) is served by `specsuite.server.kinds.vllm.native_adapter`: each native payload becomes a
typed request plus the raw fields it spells its own way, and goes through `request_body` too. Facts it
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
(`specsuite.server.kinds.vllm.checking`) overrides them to run the vLLM accounting rules on what the
server really sent, not on the translation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.counters import label_values, parse_prometheus
from specsuite.server.faults import check_generate_result
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.kinds.vllm.native_adapter import answer_native, stream_native
from specsuite.server.kinds.vllm.wire import (
    BATCH_WORKERS,
    COMPLETIONS_PATH,
    SERVER_KIND,
    cumulative_parts,
    generation_of_choice,
    one_kind,
    request_body,
)
from specsuite.server.protocol import Answer, GenerationRequest, NativeCallsThroughPayloads, RawAnswer
from specsuite.server.transport import HttpServerClient, int_list, shorten

DEV_SERVER_INFO = "/server_info"
SPEC_PREFIX = "vllm:spec_decode_"


class VLLMClient(NativeCallsThroughPayloads, HttpServerClient):
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
        if len(requests) > 1 and one_kind(requests):
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

    # -- the native vocabulary (the integrity suite sends the same native requests to every kind) ----------
    # The protocol's native calls (`NativeCallsThroughPayloads`) go through these two, served over /v1/completions.

    def generate(self, payload: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """A native /generate payload served by /v1/completions; a batch or n>1 returns a list, prompt-major."""
        return answer_native(self, payload)

    def generate_stream(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """A streamed native payload (`native_adapter.stream_native`)."""
        return stream_native(self, payload)

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
