"""What the history stores about one run, and the configuration fingerprint that decides comparability.

A run is one arm of one results.json.  Runs are comparable (same trend, usable as each other's
baseline) only when their `config_key` matches: a hash of the model, vocabulary, speculative
settings, CUDA-graph state, parallelism and dtype-like server arguments, the profile and the
accelerator.  What a nightly job is meant to vary (the build, the server version, the seed, the
URL, the reference server's arm) stays out of the key and is recorded beside it.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import orjson

from specsuite.results.types import ArmIdentity

Outcome = Literal["passed", "failed", "unknown"]
OUTCOMES = ("passed", "failed", "unknown")

# Server arguments that change what is measured (and so split a trend); absent ones are recorded as null.
CONFIG_SERVER_ARGS = ("tp_size", "dp_size", "ep_size", "dtype", "quantization", "kv_cache_dtype", "attention_backend",
                      "sampling_backend", "context_length", "enable_deterministic_inference")
CONFIG_KEY_LENGTH = 16


def config_from_identity(identity: ArmIdentity, *, profile: str | None, accelerator: str | None) -> dict[str, Any]:
    """The comparable part of a server identity, plus profile and accelerator."""
    server_args = identity.server_args.to_dict() if identity.server_args else {}
    speculative = identity.speculative.to_dict() if identity.speculative else {}
    return {
        "model": identity.served_model_name or identity.model_path,
        "tokenizer_length": identity.tokenizer_length,
        "vocab_size": identity.vocab_size,
        "speculative": dict(sorted(speculative.items())),
        "cuda_graph": identity.cuda_graph,
        "server_args": {name: server_args.get(name) for name in CONFIG_SERVER_ARGS},
        "profile": profile,
        "accelerator": accelerator,
    }


def config_key(config: dict[str, Any]) -> str:
    """A short, stable hash of a canonical JSON spelling of `config`."""
    canonical = orjson.dumps(config, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:CONFIG_KEY_LENGTH]


def config_differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Human-readable `field: A vs B` lines for every leaf where two configs differ."""
    lines = []
    for name in sorted(a.keys() | b.keys()):
        left, right = a.get(name), b.get(name)
        if isinstance(left, dict) and isinstance(right, dict):
            lines += config_differences(left, right, f"{prefix}{name}.")
        elif left != right:
            lines.append(f"{prefix}{name}: {left!r} vs {right!r}")
    return lines


@dataclass
class RunRecord:
    """One stored run (an arm of a results.json): identity, labels, outcome and its document."""

    run_key: str  # "<results run_id>/<arm>@<created_utc>": ingesting the same file twice stores it once
    results_run_id: str
    arm: str
    started_utc: str
    outcome: Outcome
    results_status: str
    profile: str | None
    seed: int | None
    repeats: int
    config_key: str
    config: dict[str, Any]
    model: str | None
    server_version: str | None
    server_url: str | None
    build_hash: str | None
    accelerator: str | None
    node: str | None
    specsuite_version: str | None
    results_schema_version: int | None
    source_path: str | None
    identity: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    ingested_utc: str | None = None

    @property
    def label(self) -> str:
        """Short text for plots and tables: the build hash, else the server version."""
        return self.build_hash or self.server_version or self.results_run_id

    def summary(self) -> dict[str, Any]:
        """JSON-ready fields without the bulky identity."""
        data = asdict(self)
        data.pop("identity")
        return data
