"""vLLM's `ServerKind` entry, the second kind. Facts and their vLLM 0.32 source lines are in docs/vllm_api_facts.md.

Detection: vLLM has no /model_info, answers `GET /version` with `{"version": ...}` and lists its model in
`GET /v1/models` with `owned_by: "vllm"` (vllm/entrypoints/openai/models/serving.py builds the card). Its client
(`specsuite.server.kinds.vllm.client.VLLMClient`) speaks /v1/completions and reads the server-wide accept length from the
`vllm:spec_decode_*` counters of /metrics (no /server_info, /model_info or /flush_cache). Its integrity rules
(`specsuite.server.kinds.vllm.integrity_rules`) check what vLLM really sent; its native adapter
(`specsuite.server.kinds.vllm.native_adapter`) answers the protocol's native call. The serving bench speaks
`vllm bench serve`'s completions format (vllm 0.32 benchmarks/lib/endpoint_request_func.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsuite.server.bench import formats as bench_formats
from specsuite.server.kinds.registry import AcceptCounters, BenchBackend, ServerKind, get_json
from specsuite.server.kinds.vllm import integrity_rules
from specsuite.server.kinds.vllm.bench_stream import read_token_ids_chunk
from specsuite.server.kinds.vllm.checking import CheckingVLLMClient
from specsuite.server.kinds.vllm.client import VLLMClient
from specsuite.server.kinds.vllm.launch import vllm_command
from specsuite.server.kinds.vllm.wire import SERVER_KIND
from specsuite.server.transport import HttpTransport

OWNER = "vllm"  # /v1/models' owned_by on every card vLLM serves


def lists_a_vllm_model(http: HttpTransport) -> bool:
    """vLLM's signature: /version names a version and /v1/models holds a card owned by vLLM."""
    version = get_json(http, "/version")
    if not (isinstance(version, dict) and version.get("version")):
        return False
    models = get_json(http, "/v1/models")
    cards = models.get("data") if isinstance(models, dict) else None
    return OWNER in {card.get("owned_by") for card in cards or [] if isinstance(card, dict)}


def batch_invariant_mode(server_info: Mapping[str, Any]) -> bool | None:
    """vLLM's batch-invariance promise, VLLM_BATCH_INVARIANT=1 (envs.py:636). Seen from outside only on the development
    /server_info (VLLM_SERVER_DEV_MODE=1), which VLLMClient.server_info reads as `batch_invariant`; None without it."""
    value = server_info.get("batch_invariant")
    return value if isinstance(value, bool) else None


VLLM = ServerKind(
    name=SERVER_KIND,  # the name its client puts in /server_info answers (served_dtype reads it)
    display_name="vLLM",
    client_class=VLLMClient,
    probe=lists_a_vllm_model,
    signature="vLLM /version with a vLLM model in /v1/models",
    checking_client=CheckingVLLMClient,
    integrity_rules=integrity_rules,
    bench_backends=(
        # Always sends the temperature (as `vllm bench serve --temperature`) and top_p below 1.
        BenchBackend("vllm", "/v1/completions", bench_formats.token_ids_completions_body, read_token_ids_chunk,
                     sends_sampling_flags=True, sends_model=True, cumulative_text=False),
    ),
    # v1/spec_decode/metrics.py, v1/metrics/loggers.py; the spec counters exist only when it speculates.
    counters=("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
              "vllm:spec_decode_num_accepted_tokens_total", "vllm:generation_tokens_total"),
    bench_accept_counters=AcceptCounters(drafts="vllm:spec_decode_num_drafts_total", accepted="vllm:spec_decode_num_accepted_tokens_total"),
    launcher=vllm_command,
    answers_over_completions=True,
    seeds_each_request=True,  # vllm/sampling_params.py:322, v1/worker/gpu_model_runner.py:1257-1264
    sees_stop_strings_anywhere=True,  # the new text plus len(stop) - 1 characters before it: v1/engine/detokenizer.py:321-370
    earliest_stop_string_wins=True,  # check_stop_strings, ties by list order: v1/engine/detokenizer.py:321-370
    ignore_eos_keeps_stop_token_ids=True,  # ignore_eos drops only the EOS check: vllm/v1/core/sched/utils.py:104-112
    # get_diff_sampling_param's list (vllm/config/model.py:1869-1878), filled into every completions request that omits
    # them (entrypoints/openai/completion/protocol.py:351-359; serving.py:80 reads them once at start).
    model_sampling_defaults=("repetition_penalty", "presence_penalty", "frequency_penalty", "temperature", "top_k", "top_p",
                             "min_p", "max_new_tokens"),
    batch_invariance=batch_invariant_mode,
)
