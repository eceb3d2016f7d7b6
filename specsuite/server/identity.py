"""`ServerIdentity`: which server, model, vocabulary and speculative-decoding setup a run measured.

Built from /model_info, /server_info and a `VocabInfo`; the served dtype (what the greedy
comparisons' near-tie tolerance is derived from) from /server_info and the model's config.json
(`specsuite.server.served_dtype`). SGLang's /server_info echoes `api_key` and
`admin_api_key` in clear, both as fields (again inside every `internal_states` entry) and inside
`launch_command`. Nothing secret is kept: credential-like keys are dropped at every depth, the
launch command's values for such flags are replaced by `***`, and the dropped values are then
scrubbed from every remaining string. Which names count as credentials is `specsuite.server.secrets`' rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from specsuite.server import refserver_contract
from specsuite.server.secrets import REDACTED, is_secret_key_name, redact_text
from specsuite.server.served_dtype import ServedDtype, read_model_config, served_dtype
from specsuite.server.transport import display_url
from specsuite.server.vocab import VocabInfo

SPEC_FIELDS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_use_rejection_sampling",
    "speculative_accept_threshold_single",
    "speculative_accept_threshold_acc",
)


def tokenizer_folder(model_info: dict[str, Any]) -> str | None:
    """The tokenizer folder a server's /get_model_info names: its tokenizer_path, else its model_path."""
    return model_info.get("tokenizer_path") or model_info.get("model_path")


def collect_secrets(value: Any) -> set[str]:
    """Every non-empty string stored under a credential-like key, at any depth."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if is_secret_key_name(str(key)) and isinstance(item, str) and item:
                found.add(item)
            else:
                found |= collect_secrets(item)
    elif isinstance(value, list):
        for item in value:
            found |= collect_secrets(item)
    return found


def redact_command(command: str) -> str:
    """Replace the value after every credential-like flag (`--api-key X`, `--hf-token=X`, ...)."""
    words = command.split(" ")
    for i, word in enumerate(words):
        name, eq, _ = word.partition("=")
        if not name.startswith("--") or not is_secret_key_name(name):
            continue
        if eq:
            words[i] = f"{name}={REDACTED}"
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            words[i + 1] = REDACTED
    return " ".join(words)


def sanitise(value: Any, secrets: set[str]) -> Any:
    """A copy without credential-like keys, with launch commands redacted and known secrets scrubbed."""
    if isinstance(value, dict):
        clean = {}
        for key, item in value.items():
            if is_secret_key_name(str(key)):
                continue
            if key == "launch_command" and isinstance(item, str):
                item = redact_command(item)
            clean[key] = sanitise(item, secrets)
        return clean
    if isinstance(value, list):
        return [sanitise(item, secrets) for item in value]
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value


def cuda_graph_state(server_info: dict[str, Any]) -> str:
    """"off" when any SGLang switch disables the decode CUDA graph, "on" when the switches are
    present and none does, "unknown" when the server reports none of them; "none (cpu)" on a CPU server,
    which reports the switches but has no CUDA graphs (SGLang's /server_info says device "cpu")."""
    if server_info.get("device") == "cpu":
        return "none (cpu)"
    off_flags = ("disable_cuda_graph", "disable_decode_cuda_graph")
    backend = server_info.get("cuda_graph_backend_decode")
    if any(server_info.get(name) is True for name in off_flags) or backend == "disabled":
        return "off"
    if any(name in server_info for name in off_flags) or backend is not None:
        return "on"
    return "unknown"


@dataclass
class ServerIdentity:
    """The facts a result must carry to say what it measured. No credentials, ever."""

    base_url: str
    model_path: str | None
    tokenizer_path: str | None
    served_model_name: str | None
    version: str | None
    random_seed: int | None
    max_running_requests: int | None
    tokenizer_length: int | None
    vocab_size: int | None
    vocab_size_source: str | None
    speculative: dict[str, Any]
    cuda_graph: str
    cuda_graph_settings: dict[str, Any]
    server_args: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None  # the type logits are computed in (specsuite.server.served_dtype.MANTISSA_BITS' names)
    dtype_source: str | None = None

    @classmethod
    def from_server(
        cls,
        base_url: str,
        model_info: dict[str, Any],
        server_info: dict[str, Any],
        vocab: VocabInfo | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ServerIdentity:
        """Assemble from raw /model_info and /server_info answers. `extra` holds run labels
        such as the A/B arm name."""
        secrets = collect_secrets(server_info) | collect_secrets(model_info)
        info = sanitise(server_info, secrets)
        model = sanitise(model_info, secrets)
        flat_args = {k: v for k, v in info.items() if k != "internal_states"}
        model_path = model.get("model_path", info.get("model_path"))
        tokenizer_path = model.get("tokenizer_path", info.get("tokenizer_path"))
        served = served_dtype(info, read_model_config(model_path, tokenizer_path))
        return cls(
            base_url=display_url(base_url),
            model_path=model_path,
            tokenizer_path=tokenizer_path,
            served_model_name=model.get("served_model_name", info.get("served_model_name")),
            version=info.get("version"),
            random_seed=info.get("random_seed"),
            max_running_requests=info.get("max_running_requests"),
            tokenizer_length=vocab.tokenizer_length if vocab else None,
            vocab_size=vocab.vocab_size if vocab else None,
            vocab_size_source=vocab.source.get("vocab_size") if vocab else None,
            speculative={name: info.get(name) for name in SPEC_FIELDS},
            cuda_graph=cuda_graph_state(info),
            cuda_graph_settings={k: v for k, v in flat_args.items() if "cuda_graph" in k},
            server_args=flat_args,
            extra=sanitise(dict(extra or {}), secrets),
            dtype=served.name,
            dtype_source=served.source,
        )

    @property
    def speculative_algorithm(self) -> Any:
        """/server_info's speculative_algorithm, as sent (None or "" when the server does not speculate)."""
        return self.speculative.get("speculative_algorithm")

    @property
    def speculative_num_draft_tokens(self) -> Any:
        """/server_info's speculative_num_draft_tokens, as sent."""
        return self.speculative.get("speculative_num_draft_tokens")

    @property
    def speculative_num_steps(self) -> Any:
        """/server_info's speculative_num_steps, as sent."""
        return self.speculative.get("speculative_num_steps")

    @property
    def incremental_streaming(self) -> bool:
        """Whether the server streams each chunk's new text only (SGLang's incremental_streaming_output)."""
        return bool(self.server_args.get("incremental_streaming_output"))

    @property
    def deterministic_inference(self) -> bool:
        """Whether the server runs with SGLang's enable_deterministic_inference."""
        return bool(self.server_args.get("enable_deterministic_inference"))

    @property
    def served_dtype(self) -> ServedDtype | None:
        return ServedDtype(self.dtype, self.dtype_source or "") if self.dtype else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def header_lines(self) -> list[str]:
        """Short lines for pytest_report_header and report front matter."""
        lines = [f"specsuite server: {self.base_url} model={self.model_path} version={self.version}"]
        if self.tokenizer_length is not None and self.vocab_size is not None:
            padded = max(0, self.vocab_size - self.tokenizer_length)
            lines.append(
                f"vocab: tokenizer {self.tokenizer_length}, model vocab_size {self.vocab_size} "
                f"({self.vocab_size_source}), padded rows {padded}"
            )
        spec = self.speculative
        if spec.get("speculative_algorithm"):
            lines.append(
                f"spec: {spec['speculative_algorithm']} steps={spec.get('speculative_num_steps')} "
                f"topk={spec.get('speculative_eagle_topk')} draft={spec.get('speculative_num_draft_tokens')} "
                f"rejection_sampling={spec.get('speculative_use_rejection_sampling')} cuda_graph={self.cuda_graph}"
            )
        else:
            lines.append(f"spec: off cuda_graph={self.cuda_graph}")
        sampler = self.server_args.get(refserver_contract.SAMPLER_KEY)
        if isinstance(sampler, dict):  # the reference server says which sampler decided
            digest = f" sha256={sampler['sha256'][:12]}" if sampler.get("sha256") else ""
            lines.append(f"sampler: {sampler.get('label')} on {sampler.get('device')}{digest}")
        if self.extra:
            lines.append("labels: " + " ".join(f"{k}={v}" for k, v in sorted(self.extra.items())))
        return lines
