"""SGLang's `ServerKind` entry, the first kind: detection asks it first, and a server no kind recognises is taken
for SGLang, whose client then says in one line what is wrong ("does not look like an SGLang server: ...").

Detection: SGLang answers `GET /model_info` (or the older `/get_model_info`) with a `model_path`. Its native
/generate speaks the project's recorded vocabulary (specsuite/server/protocol.py), so its integrity rules
(`specsuite.server.kinds.sglang.integrity_rules`) are the native rules, which the OpenAI routes' rules reuse. The
serving bench offers bench_serving's three backends: native /generate, /v1/completions and /v1/chat/completions.
The embedded reference server emulates this kind
(specsuite/server/refserver_contract.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsuite.server.bench import formats as bench_formats
from specsuite.server.bench import streams
from specsuite.server.kinds.registry import BenchBackend, ServerKind, get_json
from specsuite.server.kinds.sglang import integrity_rules
from specsuite.server.kinds.sglang.bench_stream import read_native_chunk
from specsuite.server.kinds.sglang.checking import CheckingClient
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.kinds.sglang.launch import sglang_command
from specsuite.server.transport import HttpTransport

MODEL_INFO_PATHS = ("/model_info", "/get_model_info")


def answers_model_info(http: HttpTransport) -> bool:
    """SGLang's signature: /model_info (or /get_model_info) names a model_path."""
    for path in MODEL_INFO_PATHS:
        info = get_json(http, path)
        if isinstance(info, dict) and info.get("model_path"):
            return True
    return False


def deterministic_inference(server_info: Mapping[str, Any]) -> bool | None:
    """SGLang's batch-invariance promise, --enable-deterministic-inference ("batch invariant ops",
    srt/arg_groups/fields/exec_.py:1153-1155 in 0.5.23): /server_info carries every resolved server arg
    (entrypoints/http_server.py:863-890, build_server_info -> server_args.resolved_dict(), utils/common.py:3584-3593).
    None when the answer has no such key (a release without the flag, or not SGLang's /server_info)."""
    if "enable_deterministic_inference" not in server_info:
        return None
    return bool(server_info["enable_deterministic_inference"])


SGLANG = ServerKind(
    name="sglang",
    display_name="SGLang",
    client_class=SGLangClient,
    probe=answers_model_info,
    signature="SGLang /model_info with a model_path",
    checking_client=CheckingClient,
    integrity_rules=integrity_rules,
    bench_backends=(
        # bench_serving (benchmark/serving.py 0.5.23): the native backend always sends its sampling, the OpenAI ones
        # temperature 0.0 and no top_p unless --oai-sampling (specsuite/server/bench/wire.py).
        BenchBackend("sglang", "/generate", bench_formats.native_body, read_native_chunk,
                     sends_sampling_flags=True, sends_model=False, cumulative_text=True),
        BenchBackend("sglang-oai", "/v1/completions", bench_formats.completions_body, streams.read_completions_chunk,
                     sends_sampling_flags=False, sends_model=True, cumulative_text=False, splits_chunk_gaps=True),
        BenchBackend("sglang-oai-chat", "/v1/chat/completions", bench_formats.chat_body, streams.read_chat_chunk,
                     sends_sampling_flags=False, sends_model=True, cumulative_text=False, splits_chunk_gaps=True,
                     needs_text_prompts=True),
    ),
    counters=("sglang:spec_verify_calls_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
              "sglang:num_aborted_requests_total"),
    launcher=sglang_command,
    serves_server_info=True,
    serves_model_info=True,
    flushes_cache=True,
    scores_token_ids_logprob=True,  # managers/io_struct.py:237 (0.5.23)
    # A float32 or untyped model is served in float16, Gemma's in bfloat16 (configs/model_config.py:2284-2321).
    auto_dtype_downcasts_float32=True,
    # --sampling-defaults model (the default): generation_config.json's values for these (configs/model_config.py:2210-2240)
    # fill the OpenAI chat route's omitted fields (entrypoints/openai/serving_chat.py:416-417); /generate and
    # /v1/completions keep SamplingParams' own defaults (srt/sampling/sampling_params.py:157-164).
    model_sampling_defaults=("repetition_penalty", "temperature", "top_k", "top_p", "min_p"),
    batch_invariance=deterministic_inference,
)
