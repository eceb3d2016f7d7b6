"""The facts the workloads take from a server's answers, parsed into typed values: SGLang's /server_info
(context limit, speculative settings, the reported accept lengths), /get_model_info (the tokenizer path) and the
first card of /v1/models (served model id, its path `root`, vLLM's `max_model_len`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def positive_int(value: Any) -> int | None:
    """A positive integer as the server sent it (a bool is not one); None otherwise."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class ServerInfoContext:
    """SGLang's /server_info fields that bound a request's length; None where the answer names none."""

    context_length: int | None
    max_req_input_len: int | None
    speculative_algorithm: str  # upper-cased; "" without speculative decoding
    eagle_topk: int | None
    num_steps: int | None
    num_draft_tokens: int | None
    max_num_draft_tokens: int | None

    @classmethod
    def from_server_info(cls, server_info: dict[str, Any]) -> ServerInfoContext:
        return cls(context_length=positive_int(server_info.get("context_length")),
                   max_req_input_len=positive_int(server_info.get("max_req_input_len")),
                   speculative_algorithm=str(server_info.get("speculative_algorithm") or "").upper(),
                   eagle_topk=positive_int(server_info.get("speculative_eagle_topk")),
                   num_steps=positive_int(server_info.get("speculative_num_steps")),
                   num_draft_tokens=positive_int(server_info.get("speculative_num_draft_tokens")),
                   max_num_draft_tokens=positive_int(server_info.get("max_speculative_num_draft_tokens")))


def reported_accept_length(server_info: dict[str, Any] | None) -> Any:
    """/server_info's `internal_states[0].avg_spec_accept_length`, as sent; None when absent."""
    internal = (server_info or {}).get("internal_states") or [{}]
    return internal[0].get("avg_spec_accept_length") if isinstance(internal[0], dict) else None


def reported_accept_lengths(server_info: dict[str, Any]) -> list[Any]:
    """`avg_spec_accept_length` of every DP rank's `internal_states` entry that names one, as sent."""
    states = server_info.get("internal_states")
    if not isinstance(states, list):
        return []
    return [state.get("avg_spec_accept_length") for state in states if isinstance(state, dict) and "avg_spec_accept_length" in state]


def model_path_of(model_info: dict[str, Any]) -> Any:
    """/get_model_info's model_path, as sent."""
    return model_info.get("model_path")


def model_type_of(model_info: dict[str, Any]) -> Any:
    """/get_model_info's model_type, as sent."""
    return model_info.get("model_type")


def speculative_algorithm_of(server_info: dict[str, Any]) -> Any:
    """/server_info's speculative_algorithm, as sent (None or "NONE" without speculative decoding)."""
    return server_info.get("speculative_algorithm")


def tokenizer_path_of(model_info: dict[str, Any]) -> str:
    """/get_model_info's tokenizer path, else its model path; "" when it names neither."""
    return model_info.get("tokenizer_path") or model_info.get("model_path") or ""


@dataclass(frozen=True)
class ModelCard:
    """The first card of /v1/models: the served model's id, its path (`root`, vLLM's name) and `max_model_len`,
    each as sent (None where absent)."""

    id: Any
    root: Any
    max_model_len: Any

    @classmethod
    def first_of(cls, cards: list[Any]) -> ModelCard | None:
        """The first card of the list; None for an empty list. A card that is not an object names nothing."""
        if not cards:
            return None
        card = cards[0] if isinstance(cards[0], dict) else {}
        return cls(id=card.get("id"), root=card.get("root"), max_model_len=card.get("max_model_len"))
