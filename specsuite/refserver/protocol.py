"""Request validation for /generate, matching SGLang 0.5.23's strict contract.

Unknown `sampling_params` keys and wrong JSON types are rejected with serde-style messages
(400 `{"error": "<string>"}`); range errors found after normalisation use SGLang's ValueError
shape (400 `{"error": {"message": ...}}`).  Unknown top-level keys are ignored, as in SGLang.
Penalties, min_p, logit_bias and min_new_tokens are accepted and honoured by the engine;
stop_regex and the grammar keys are refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from specsuite.refserver.engine_request import LogprobConfig, SamplingConfig

INT64_MAX = (1 << 63) - 1
MAX_N = 64  # parallel samples per prompt; a huge n would stall the event loop building requests


class ContractError(ValueError):
    """A schema violation: SGLang answers 400 with a plain-string `error`."""


class RequestValueError(ValueError):
    """A semantic error: SGLang answers 400 with `{"error": {"message": ...}}`."""


class UnhandledServerError(Exception):
    """A request SGLang's contract admits but its Python code then fails on with something other
    than a ValueError (a TypeError), which FastAPI answers 500 `Internal Server Error`."""


# The contract (api/v1/api_types.py: decode_SamplingParams) maps null to the default for every key.
_SAMPLING_TYPES: dict[str, tuple[str, ...]] = {
    "max_new_tokens": ("int", "null"),
    "stop": ("str", "list_str", "null"),
    "stop_token_ids": ("list_int", "null"),
    "stop_regex": ("str", "list_str", "null"),
    "temperature": ("num", "null"),
    "top_p": ("num", "null"),
    "top_k": ("int", "null"),
    "min_p": ("num", "null"),
    "frequency_penalty": ("num", "null"),
    "presence_penalty": ("num", "null"),
    "repetition_penalty": ("num", "null"),
    "min_new_tokens": ("int", "null"),
    "n": ("int", "null"),
    "json_schema": ("str", "null"),
    "regex": ("str", "null"),
    "ebnf": ("str", "null"),
    "structural_tag": ("str", "null"),
    "ignore_eos": ("bool", "null"),
    "skip_special_tokens": ("bool", "null"),
    "spaces_between_special_tokens": ("bool", "null"),
    "no_stop_trim": ("bool", "null"),
    "stream_interval": ("int", "null"),
    "logit_bias": ("dict", "null"),
    "sampling_seed": ("int", "null"),
    "custom_params": ("any",),  # the contract passes any JSON value through
    "beam_width": ("int", "null"),
    "watermark": ("watermark", "null"),
    "choice": ("list_str", "null"),
}
SAMPLING_PARAM_KEYS = tuple(_SAMPLING_TYPES)
_WATERMARK_TYPES = {"enabled": "bool", "key": "str", "context_window": "int"}
WATERMARK_CONTEXT_WINDOW = 4  # srt/arg_groups/fields/exec_.py: watermark_context_window's default
_UNSUPPORTED_HERE = ("stop_regex", "json_schema", "regex", "ebnf", "structural_tag")


def _json_kind_matches(value: Any, kind: str) -> bool:
    if kind == "any":
        return True
    if kind == "null":
        return value is None
    if kind == "watermark":
        return isinstance(value, dict)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "num":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict)
    if kind == "list_str":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "list_int":
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    raise AssertionError(kind)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value[:40]}"'
    return "a sequence" if isinstance(value, list) else "a map"


def _check_contract(params: Any) -> None:
    if not isinstance(params, dict):
        raise ContractError(f"invalid type: {_describe(params)}, expected struct SamplingParams")
    for key, value in params.items():
        kinds = _SAMPLING_TYPES.get(key)
        if kinds is None:
            expected = ", ".join(f"`{k}`" for k in _SAMPLING_TYPES)
            raise ContractError(f"unknown field `{key}`, expected one of {expected}")
        if not any(_json_kind_matches(value, kind) for kind in kinds):
            wanted = {"int": "i64", "num": "f64", "str": "a string", "bool": "a boolean", "list_int": "a sequence of i64",
                      "list_str": "a sequence of strings", "dict": "a map", "null": "null"}
            raise ContractError(f"invalid type: {_describe(value)}, expected {wanted[kinds[0]]} for `{key}`")
        if key == "watermark" and value is not None:
            _check_watermark_contract(value)


def _check_watermark_contract(watermark: dict[str, Any]) -> None:
    for key, value in watermark.items():
        kind = _WATERMARK_TYPES.get(key)
        if kind is None:
            expected = ", ".join(f"`{k}`" for k in _WATERMARK_TYPES)
            raise ContractError(f"unknown field `{key}`, expected one of {expected}")
        if value is not None and not _json_kind_matches(value, kind):
            raise ContractError(f"invalid type: {_describe(value)}, expected {kind} for `watermark.{key}`")


def _normalize_watermark(watermark: dict[str, Any] | None) -> None:
    """SamplingParams.__post_init__'s watermark checks (srt/sampling/watermarking/core.py:
    normalize_watermark_request; the key format from watermarking/config.py: parse_watermark_key)."""
    if watermark is None:
        return
    key, window = watermark.get("key"), watermark.get("context_window")
    if window is not None and window < 1:
        raise RequestValueError("watermark context_window must be a positive integer")
    if key is not None:
        digits = key[2:] if key.lower().startswith("0x") else key
        if not 1 <= len(digits) <= 16 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise RequestValueError("watermark key must contain 1 to 16 hex digits")


def _resolve_watermark(watermark: dict[str, Any] | None) -> None:
    """The tokenizer's watermark admission on a server without --enable-watermark, which the
    reference server is (srt/sampling/watermarking/core.py: resolve_watermark_request):
    enabled=false is accepted, anything that would turn watermarking on is a ValueError."""
    if watermark is None:
        return
    enabled, key, window = watermark.get("enabled"), watermark.get("key"), watermark.get("context_window")
    if window is not None and window > WATERMARK_CONTEXT_WINDOW:
        raise RequestValueError("request watermark context_window cannot exceed the server's watermark context_window")
    if enabled is False:
        if key is not None:
            raise RequestValueError("request watermark key cannot be combined with enabled=false")
        return
    if enabled is not True and key is None:
        raise RequestValueError("request watermark must set enabled or key")
    raise RequestValueError("request watermarking requires the server to enable --enable-watermark")


def sampling_config(params: dict[str, Any]) -> SamplingConfig:
    """Validate one sampling_params object and return the engine's config (ValueError on error)."""
    _check_contract(params)
    if "choice" in params:
        # SamplingParams (a msgspec Struct) has no `choice` field: SamplingParams(**kwargs) raises
        # TypeError (srt/managers/tokenizer_manager.py:1565), which no handler turns into a 4xx.
        raise UnhandledServerError("SamplingParams.__init__() got an unexpected keyword argument 'choice'")
    # null is "use the default" for every key but max_new_tokens, where it means "no limit".
    params = {key: value for key, value in params.items() if value is not None or key == "max_new_tokens"}
    _normalize_watermark(params.get("watermark"))
    beam_width = params.get("beam_width")
    if beam_width is not None and beam_width < 1:
        raise RequestValueError(f"beam_width must be at least 1, got {beam_width}.")
    for key in _UNSUPPORTED_HERE:
        if params.get(key):
            raise RequestValueError(f"sampling param `{key}` is not supported by the reference server")
    temperature = params.get("temperature")
    temperature = 1.0 if temperature is None else float(temperature)
    top_k = params.get("top_k")
    top_k = 1 << 30 if top_k in (None, -1) else int(top_k)
    config = SamplingConfig(
        max_new_tokens=128 if "max_new_tokens" not in params else params["max_new_tokens"],
        min_new_tokens=params.get("min_new_tokens", 0),
        temperature=temperature,
        top_p=float(params.get("top_p", 1.0)),
        top_k=top_k,
        min_p=float(params.get("min_p", 0.0)),
        frequency_penalty=float(params.get("frequency_penalty", 0.0)),
        presence_penalty=float(params.get("presence_penalty", 0.0)),
        repetition_penalty=float(params.get("repetition_penalty", 1.0)),
        logit_bias=_logit_bias(params.get("logit_bias")),
        stop=[params["stop"]] if isinstance(params.get("stop"), str) else list(params.get("stop") or []),
        stop_token_ids=list(params.get("stop_token_ids") or []),
        ignore_eos=params.get("ignore_eos", False),
        skip_special_tokens=params.get("skip_special_tokens", True),
        no_stop_trim=params.get("no_stop_trim", False),
        sampling_seed=params.get("sampling_seed"),
    )
    _check_ranges(config, params)
    _resolve_watermark(params.get("watermark"))
    if config.temperature < 1e-6:  # SGLang: near-zero temperature means greedy
        config.temperature, config.top_k = 1.0, 1
    return config


def _logit_bias(bias: dict[str, Any] | None) -> dict[int, float]:
    """`logit_bias` by token id: keys are read with int() as SGLang's verify does
    (srt/sampling/sampling_params.py:295-300); their range is checked against the model's
    vocabulary when the request is built (server.engine_requests)."""
    out: dict[int, float] = {}
    for key, value in (bias or {}).items():
        if not _json_kind_matches(value, "num"):
            raise ContractError(f"invalid type: {_describe(value)}, expected f64 for `logit_bias`")
        try:
            token_id = int(key)
        except ValueError:
            raise RequestValueError(f"logit_bias keys must be token ids, got {key[:40]!r}.") from None
        if value != value or abs(value) == float("inf"):
            raise RequestValueError(f"logit_bias values must be finite, got {value} for token {token_id}.")
        out[token_id] = float(value)  # "1" and "01" are one id: the last value wins, as SGLang's dedup
    return out


def check_logit_bias_ids(sampling: SamplingConfig, vocab_size: int) -> None:
    """Every biased id must be a row of the model's vocabulary (SamplingParams.verify's message)."""
    for token_id in sampling.logit_bias:
        if not 0 <= token_id < vocab_size:
            raise RequestValueError(f"logit_bias must has keys in [0, {vocab_size - 1}], got {token_id}.")


def _check_ranges(config: SamplingConfig, params: dict[str, Any]) -> None:
    if config.max_new_tokens is not None and config.max_new_tokens < 0:
        raise RequestValueError(f"max_new_tokens must be at least 0, got {config.max_new_tokens}.")
    if config.max_new_tokens is not None and config.min_new_tokens > config.max_new_tokens:
        raise RequestValueError("min_new_tokens must be in [0, max_new_tokens].")
    if config.min_new_tokens < 0:
        raise RequestValueError(f"min_new_tokens must be at least 0, got {config.min_new_tokens}.")
    if not (config.temperature >= 0.0) or config.temperature == float("inf"):
        raise RequestValueError(f"temperature must be non-negative and finite, got {config.temperature}.")
    if not 0.0 < config.top_p <= 1.0:
        raise RequestValueError(f"top_p must be in (0, 1], got {config.top_p}.")
    if config.top_k < 1:
        raise RequestValueError(f"top_k must be -1 (disable), or at least 1, got {config.top_k}.")
    if len(config.stop) > 32:
        raise RequestValueError("at most 32 stop strings are allowed.")
    if config.sampling_seed is not None and not -INT64_MAX - 1 <= config.sampling_seed <= INT64_MAX:
        raise RequestValueError("sampling_seed must fit in int64.")
    for key, low, high in (("min_p", 0.0, 1.0), ("frequency_penalty", -2.0, 2.0), ("presence_penalty", -2.0, 2.0)):
        if key in params and not low <= params[key] <= high:
            raise RequestValueError(f"{key} must be in [{low}, {high}], got {params[key]}.")
    if not 0.0 < config.repetition_penalty <= 2.0:
        raise RequestValueError(f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {config.repetition_penalty}.")
    if params.get("n", 1) > MAX_N:
        raise RequestValueError(f"n must be at most {MAX_N} in the reference server.")


@dataclass
class GenerateItem:
    """One prompt of a (possibly batched) /generate request."""

    rid: str
    text: str | None
    input_ids: list[int] | None
    sampling: SamplingConfig
    logprobs: LogprobConfig
    index: int
    beam_width: int = 1  # > 1: a beam-search request (the server decides whether it can run it)
    # False: left out of the sglang: request counters, as SGLang's health check is (GenerateReqInput.log_metrics,
    # srt/managers/io_struct.py:258; checked at srt/managers/tokenizer_manager.py:2788 before collect_metrics).
    log_metrics: bool = True


def _per_item(value: Any, batch: int, name: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != batch:
            raise RequestValueError(f"`{name}` has {len(value)} entries for a batch of {batch}.")
        return value
    return [value] * batch


def _logprob_option(body: dict[str, Any], name: str, kind: str, default: Any, batch: int) -> list[Any]:
    """A per-item logprob option: a scalar (broadcast) or one value per item; null means the default."""
    value = body.get(name)
    if value is None:
        return [default] * batch
    if not (_json_kind_matches(value, kind) or (isinstance(value, list) and all(_json_kind_matches(v, kind) for v in value))):
        expected = "a boolean" if kind == "bool" else "i64"
        raise ContractError(f"invalid type: {_describe(value)}, expected {expected} or a sequence of them for `{name}`")
    return _per_item(value, batch, name)


def _token_ids_logprob(value: Any, batch: int) -> list[tuple[int, ...] | None]:
    """`token_ids_logprob` per item as SGLang normalises it (0.5.23 managers/io_struct.py:571-572 for one prompt,
    :809-816 for a batch): empty or null is None; one list of ids goes to every item; a list of lists is per item."""
    if not value:
        return [None] * batch
    if not isinstance(value, list):
        value = [value]
    if all(_json_kind_matches(t, "int") for t in value):
        return [tuple(int(t) for t in value)] * batch
    if all(isinstance(item, list) and all(_json_kind_matches(t, "int") for t in item) for item in value) and len(value) == batch:
        return [tuple(int(t) for t in item) or None for item in value]
    raise ContractError("invalid type for `token_ids_logprob`, expected a sequence of i64 or one sequence per prompt")


def parallel_sample_count(raw_params: Any) -> int:
    """`n` as SGLang reads it before any validation (srt/managers/io_struct.py:531-547): from the
    first params object, equal across a list, and 1 for a beam-search request (beam_width > 1)."""
    first = raw_params[0] if isinstance(raw_params, list) and raw_params else raw_params
    if not isinstance(first, dict):
        return 1
    n = first.get("n", 1)
    if isinstance(raw_params, list) and any(isinstance(p, dict) and p.get("n", 1) != n for p in raw_params):
        raise RequestValueError("The parallel_sample_num should be the same for all samples in sample params.")
    if (first.get("beam_width") or 1) > 1:
        return 1
    if n is None:
        # `"n": null` passes the contract, then `None > 1` raises TypeError (io_struct.py:550).
        raise UnhandledServerError("'>' not supported between instances of 'NoneType' and 'int'")
    return n


def _with_top_level_watermark(body: dict[str, Any], raw_params: Any, batch: int, is_batch: bool) -> Any:
    """GenerateReqInput's own `watermark` field is copied into each item's sampling params
    (srt/managers/io_struct.py: _normalize_watermark; tokenizer_manager.py:1553-1559)."""
    watermark = body.get("watermark")
    if watermark is None:
        return raw_params
    if isinstance(watermark, list):
        if not is_batch or len(watermark) != batch:
            raise RequestValueError("The length of watermark should be equal to the batch size.")
    elif not isinstance(watermark, dict):
        raise RequestValueError("watermark must be an object")
    values = watermark if isinstance(watermark, list) else [watermark] * batch
    for value in values:  # not contract-checked: normalize_watermark_request's own rules (core.py:171-188)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise RequestValueError("watermark must be an object")
        if set(value) - set(_WATERMARK_TYPES):
            raise RequestValueError("watermark contains unknown fields")
        if value.get("enabled") is not None and not isinstance(value["enabled"], bool):
            raise RequestValueError("watermark enabled must be a boolean")
        if value.get("key") is not None and not isinstance(value["key"], str):
            raise RequestValueError("watermark key must be a hex string")
        window = value.get("context_window")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise RequestValueError("watermark context_window must be a positive integer")
    params_list = raw_params if isinstance(raw_params, list) else [raw_params] * batch
    merged = []
    for params, value in zip(params_list, values, strict=False):
        if not isinstance(params, dict):
            return raw_params  # the contract check reports it
        if params.get("watermark") is not None and value is not None:
            raise RequestValueError("watermark must be provided either at the request top level or inside sampling_params, not both")
        merged.append({**params, "watermark": value} if value is not None else params)
    return merged


def parse_generate(body: Any, new_rid: Callable[[], str]) -> tuple[list[GenerateItem], bool, bool]:
    """Validate a /generate body; return (items, is_batch_response, stream)."""
    if not isinstance(body, dict):
        raise ContractError(f"invalid type: {_describe(body)}, expected struct GenerateRequest")
    text, input_ids = body.get("text"), body.get("input_ids")
    if text is None and input_ids is None:
        raise RequestValueError("Either text or input_ids should be provided.")
    if text is not None and not (isinstance(text, str) or (isinstance(text, list) and all(isinstance(t, str) for t in text))):
        raise ContractError(f"invalid type: {_describe(text)}, expected a string or a sequence of strings for `text`")
    if input_ids is not None:
        flat = isinstance(input_ids, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in input_ids)
        nested = isinstance(input_ids, list) and input_ids and all(_json_kind_matches(t, "list_int") for t in input_ids)
        if not (flat or nested):
            raise ContractError("invalid type for `input_ids`, expected a sequence of i64 or a sequence of sequences")
        if flat and not input_ids:
            raise RequestValueError("input_ids is empty.")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ContractError(f"invalid type: {_describe(stream)}, expected a boolean for `stream`")
    if not isinstance(body.get("return_text_in_logprobs", False), bool):
        raise ContractError("invalid type for `return_text_in_logprobs`, expected a boolean")

    if input_ids is not None:  # SGLang tokenizes from input_ids when both are sent
        is_batch = isinstance(input_ids[0], list)
        prompts = [(None, ids) for ids in input_ids] if is_batch else [(None, input_ids)]
    else:
        is_batch = isinstance(text, list)
        prompts = [(t, None) for t in text] if is_batch else [(text, None)]

    raw_params = body.get("sampling_params") or {}
    # The contract gate sees the whole body before any Python-side normalisation runs
    # (srt/entrypoints/http_server.py:933-940).
    for params in raw_params if isinstance(raw_params, list) else [raw_params]:
        _check_contract(params)
    raw_params = _with_top_level_watermark(body, raw_params, len(prompts), is_batch)
    n = parallel_sample_count(raw_params)
    params_list = _per_item(raw_params, len(prompts), "sampling_params")
    if n > 1 or (n < 1 and is_batch):
        if n < 1:
            # n < 1 on a batch empties the expanded inputs and indexing them raises IndexError
            # (srt/managers/io_struct.py: _expand_inputs, then __getitem__).
            raise UnhandledServerError("list index out of range")
        # Parallel sampling answers prompt-major, every sample under a fresh rid: the tokenizer
        # loops prompts, then samples, calling regenerate_rid() for each
        # (srt/managers/tokenizer_manager.py:2164-2185).
        for name in ("return_logprob", "logprob_start_len", "top_logprobs_num"):
            if isinstance(body.get(name), list):
                raise RequestValueError(f"Cannot use list {name} with parallel_sample_num > 1")
        rid = body.get("rid")
        if isinstance(rid, list) and len(rid) != len(prompts):
            raise RequestValueError("The specified rids length mismatch with the batch_size for batch processing.")
        prompts = [prompt for prompt in prompts for _ in range(n)]
        params_list = [params for params in params_list for _ in range(n)]
        is_batch, fresh_rids = True, True
    else:
        fresh_rids = False
    samplings = [sampling_config(p) for p in params_list]
    beam_widths = [(p.get("beam_width") or 1) if isinstance(p, dict) else 1 for p in params_list]

    batch = len(prompts)
    logprob_flags = _logprob_option(body, "return_logprob", "bool", False, batch)
    starts = _logprob_option(body, "logprob_start_len", "int", -1, batch)
    tops = _logprob_option(body, "top_logprobs_num", "int", 0, batch)
    token_ids = _token_ids_logprob(body.get("token_ids_logprob"), batch)
    rid = body.get("rid")
    if rid is not None and not _json_kind_matches(rid, "str") and not _json_kind_matches(rid, "list_str"):
        raise ContractError(f"invalid type: {_describe(rid)}, expected a string or a sequence of strings for `rid`")
    if fresh_rids:
        rids = [new_rid() for _ in range(batch)]
    elif isinstance(rid, list):
        if len(rid) != batch:
            raise RequestValueError("The specified rids length mismatch with the batch_size for batch processing.")
        rids = rid
        if len(set(rids)) != len(rids):
            raise RequestValueError(f"Duplicate request IDs detected within the request: {sorted({r for r in rids if rids.count(r) > 1})}")
    elif isinstance(rid, str):
        rids = [f"{rid}_{i}" for i in range(batch)] if is_batch else [rid]
    else:
        rids = [new_rid() for _ in range(batch)]
    # One flag for the whole request, copied to each prompt of a batch (io_struct.py:995); not in the contract gate,
    # so any JSON value is taken by its truth, as Python's `if obj.log_metrics` reads it.
    log_metrics = bool(body.get("log_metrics", True))
    items = []
    for index, ((prompt_text, prompt_ids), sampling) in enumerate(zip(prompts, samplings, strict=False)):
        if not isinstance(tops[index], int) or tops[index] < 0:
            raise RequestValueError("top_logprobs_num must be a non-negative integer.")
        logprobs = LogprobConfig(bool(logprob_flags[index]), int(starts[index]), int(tops[index]), bool(body.get("return_text_in_logprobs", False)),
                                 token_ids[index])
        items.append(GenerateItem(str(rids[index]), prompt_text, prompt_ids, sampling, logprobs, index, beam_widths[index], log_metrics))
    return items, is_batch, stream
