"""The floating-point type a server computes its logits in, read from what it reports.

The greedy comparisons need it: two forwards of one model (speculative verify of several tokens
against a one-token decode, a batch of 8 against a batch of 1) round differently, so a top-2 gap
within the type's resolution can flip (`specsuite.families.lossless.greedy.near_tie_rule`).

Where it comes from, most trusted first:
- SGLang's /server_info: every resolved server argument, `dtype` among them (0.5.23:
  entrypoints/http_server.py:863-889 -> utils/common.py:3589 `resolved_dict()`; 0.5.20:
  http_server.py:818-839; the field: arg_groups/fields/model.py:160 (0.5.20: :159), choices auto,
  half, float16, bfloat16, float, float32, default "auto"). `quantization`, `kv_cache_dtype` and
  `enable_tf32_matmul` sit beside it. The reference server reports `dtype` "float32".
- "auto" (or no `dtype`): the model's config.json (`torch_dtype`, or `dtype` in newer files), as
  SGLang resolves it (configs/model_config.py:2284-2321 `_get_and_verify_dtype`: a float32 or
  untyped model is served in float16, Gemma's in bfloat16, any other in its own type).
- vLLM 0.32 reports no dtype on /v1/models (serve/engine/protocol.py:105-113, ModelCard); only its
  development /server_info (VLLM_SERVER_DEV_MODE=1, launchers/api_server/routers.py:40-43) dumps
  the config (serve/dev/server_info/api_router.py:43-59), not read here. So on vLLM: config.json; a
  float32 or untyped model is served in the platform's first type (vLLM's "auto",
  config/model.py:2405-2446), unknown here, so bfloat16; a server launched with another --dtype than
  config.json's needs --lossless-numerics-gap.
- Nothing at all: bfloat16, the coarsest 16-bit type, so that a correct server is not failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.server import kinds

# Explicit mantissa bits of each type the logits can be rounded in (tf32: float32 matmuls on
# tensor cores, SGLang's --enable-tf32-matmul).
MANTISSA_BITS = {"float32": 23, "tf32": 10, "float16": 10, "bfloat16": 7, "fp8_e4m3": 3, "fp8_e5m2": 2}
UNKNOWN_FALLBACK = "bfloat16"
# Stated in a result's source wherever an fp8 setting was seen and did not change the type.
LOGITS_TYPE_RULE = ("logits are rounded in the model's type: the LM head is unquantized under fp8 and an fp8 KV cache "
                    "is read back in the model's type (SGLang 0.5.23 layers/logits_processor.py:1198-1201)")

_NAMES = {
    "float32": "float32", "float": "float32", "fp32": "float32", "torch.float32": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16", "torch.float16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.bfloat16": "bfloat16",
    "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "torch.float8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2", "torch.float8_e5m2": "fp8_e5m2",
}


@dataclass(frozen=True)
class ServedDtype:
    """A key of MANTISSA_BITS and where it was read (shown in results and failure messages)."""

    name: str
    source: str

    def to_dict(self) -> dict[str, str]:
        return {"dtype": self.name, "source": self.source}


def normalise(value: Any) -> str | None:
    """MANTISSA_BITS' name for a dtype as servers and config files spell it; None when unknown or "auto"."""
    return _NAMES.get(str(value).strip().lower()) if value is not None else None


def coarser(a: str, b: str) -> str:
    """The type with fewer mantissa bits (the looser resolution of two servers compared)."""
    return a if MANTISSA_BITS[a] <= MANTISSA_BITS[b] else b


def read_model_config(*folders: Any) -> dict[str, Any] | None:
    """The first readable config.json among these local model folders (never downloads)."""
    for folder in folders:
        if not folder:
            continue
        path = Path(str(folder)) / "config.json"
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            return config
    return None


def _auto(model_config: dict[str, Any] | None, kind: kinds.ServerKind) -> ServedDtype:
    config_value = None
    if model_config:
        config_value = model_config.get("dtype") or model_config.get("torch_dtype")
        text = model_config.get("text_config")
        if config_value is None and isinstance(text, dict):
            config_value = text.get("dtype") or text.get("torch_dtype")
    declared = normalise(config_value)
    if model_config is None:
        return ServedDtype(UNKNOWN_FALLBACK, "not reported and no config.json: assumed bfloat16, the coarsest 16-bit type")
    if declared in ("float16", "bfloat16"):
        return ServedDtype(declared, f"config.json torch_dtype {config_value} (dtype auto)")
    if not kind.auto_dtype_downcasts_float32:
        return ServedDtype(UNKNOWN_FALLBACK, f"config.json torch_dtype {config_value}: {kind.display_name}'s auto picks the platform's type; "
                                             "assumed bfloat16")
    model_type = str(model_config.get("model_type") or "")
    chosen = "bfloat16" if model_type.startswith("gemma") else "float16"
    return ServedDtype(chosen, f"config.json torch_dtype {config_value}: {kind.display_name}'s auto serves it in {chosen}")


def served_dtype(server_info: dict[str, Any], model_config: dict[str, Any] | None = None) -> ServedDtype:
    """The type the server's logits are computed in, from /server_info and the model's config.json."""
    kind = kinds.named_or_fallback(server_info.get("server_kind"))  # SGLang's /server_info names no kind
    reported = server_info.get("dtype")
    name = normalise(reported)
    found = ServedDtype(name, f"/server_info dtype {reported}") if name else _auto(model_config, kind)
    if found.name == "float32" and server_info.get("enable_tf32_matmul") is True:
        found = ServedDtype("tf32", found.source + ", enable_tf32_matmul")
    # An fp8 KV cache or fp8 weights round inside the layers, not the logits: SGLang 0.5.23 stores an fp8 KV cache as
    # uint8 (mem_cache/memory_pool.py:2029-2031) and attends in the model's type; Fp8Config gives the LM head no quant
    # method (layers/quantization/fp8.py:389-476 returns None for it, so vocab_parallel_embedding.py:305-306 makes it
    # UnquantizedEmbeddingMethod), so the logits come from `hidden_states.to(lm_head.weight.dtype) @ lm_head.weight.T`
    # in the model's type (layers/logits_processor.py:152-153 and 1198-1201). The extra noise they bring is counted by the
    # greedy test's near-tie flips against its control, not by a coarser tolerance.
    seen = [f"{key} {server_info.get(key)}" for key in ("quantization", "kv_cache_dtype") if "fp8" in str(server_info.get(key) or "").lower()]
    if seen:
        found = ServedDtype(found.name, f"{found.source} ({', '.join(seen)}: not the logits' type: {LOGITS_TYPE_RULE})")
    return found


def served_dtype_of(client: Any) -> ServedDtype:
    """A live server's type: its /server_info, and config.json from the model folder it names (when local)."""
    info = client.server_info()
    model = client.model_info()
    config = read_model_config(model.get("model_path"), model.get("tokenizer_path"), info.get("model_path"))
    return served_dtype(info, config)
