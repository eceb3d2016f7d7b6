"""The shapes of a live SGLang server's answers, recorded so that a new release's drift fails a test.

A shape keeps keys and value types, never values: `{"text": "str", "meta_info": {"spec_verify_ct":
"number", ...}}`; a list becomes the shapes its items take (in first-seen order), and every number is
"number" (JSON writes a float 0.0 as 0, so int and float cannot be told apart reliably). `/metrics` is
recorded as its sample names. `record_answers` asks one server
the project's fixed requests: /generate plain and streamed, /v1/completions, /server_info,
/model_info, /metrics and /flush_cache.
"""

from __future__ import annotations

import json
from typing import Any

import requests

from specsuite.server.idle_connections import idle_expiring_session

TIMEOUT_S = 120.0
PROMPT = "The farmer had 12 apples and"
SAMPLING = {"temperature": 0, "max_new_tokens": 12}


def shape(value: Any) -> Any:
    """The value's shape: dict keys kept, leaves replaced by their JSON type name."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        shapes: list[Any] = []
        for item in value:
            item_shape = shape(item)
            if item_shape not in shapes:
                shapes.append(item_shape)
        return shapes
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "str"


def shape_differences(recorded: Any, live: Any, path: str = "") -> list[str]:
    """Where `live` differs from `recorded`: keys gone, keys new, leaf types changed (null matches anything)."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        problems = [f"{path}.{key}: gone" for key in recorded if key not in live]
        problems += [f"{path}.{key}: new" for key in live if key not in recorded]
        for key in recorded.keys() & live.keys():
            problems += shape_differences(recorded[key], live[key], f"{path}.{key}")
        return problems
    if isinstance(recorded, list) and isinstance(live, list):
        if not recorded or not live:
            return []
        return shape_differences(recorded[0], live[0], f"{path}[]")
    if "null" in (recorded, live) or recorded == live:
        return []
    return [f"{path}: {recorded} became {live}"]


def _stream_events(response: requests.Response) -> list[Any]:
    events = []
    for line in response.iter_lines(decode_unicode=True):
        if line and line.startswith("data:"):
            body = line[len("data:"):].strip()
            events.append(body if body == "[DONE]" else json.loads(body))
    return events


def metric_names(text: str) -> list[str]:
    """Prometheus sample names (labels and values dropped)."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return sorted(names)


def record_answers(base_url: str) -> dict[str, Any]:
    """The raw answers of one server to the fixed requests (values included: callers keep what they need)."""
    base = base_url.rstrip("/")
    session = idle_expiring_session()
    session.trust_env = False  # loopback servers: never through a proxy
    body = {"text": PROMPT, "sampling_params": SAMPLING}
    answers: dict[str, Any] = {"generate": session.post(f"{base}/generate", json=body, timeout=TIMEOUT_S).json()}
    with session.post(f"{base}/generate", json={**body, "stream": True}, timeout=TIMEOUT_S, stream=True) as streamed:
        answers["generate_stream"] = _stream_events(streamed)
    answers["generate_logprobs"] = session.post(f"{base}/generate", json={**body, "return_logprob": True, "top_logprobs_num": 2},
                                                timeout=TIMEOUT_S).json()
    completion = {"model": "default", "prompt": PROMPT, "max_tokens": 12, "temperature": 0}
    answers["v1_completions"] = session.post(f"{base}/v1/completions", json=completion, timeout=TIMEOUT_S).json()
    with session.post(f"{base}/v1/completions", json={**completion, "stream": True}, timeout=TIMEOUT_S, stream=True) as streamed:
        answers["v1_completions_stream"] = _stream_events(streamed)
    answers["server_info"] = session.get(f"{base}/server_info", timeout=TIMEOUT_S).json()
    answers["model_info"] = session.get(f"{base}/model_info", timeout=TIMEOUT_S).json()
    answers["metrics"] = metric_names(session.get(f"{base}/metrics", timeout=TIMEOUT_S).text)
    flush = session.post(f"{base}/flush_cache", timeout=TIMEOUT_S)
    answers["flush_cache"] = {"status": flush.status_code, "text": flush.text.strip()[:200]}
    return answers


def shapes_of(answers: dict[str, Any]) -> dict[str, Any]:
    """What is committed: each answer's shape, the metric names and the flush status as they are."""
    kept = {name: shape(value) for name, value in answers.items() if name not in ("metrics", "flush_cache")}
    kept["metrics"] = answers["metrics"]
    kept["flush_cache"] = {"status": answers["flush_cache"]["status"]}
    return kept
