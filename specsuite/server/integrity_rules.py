"""What every server kind's integrity rules share: the names of the checks (`CHECKS`), the broken rule they yield
(`Violation`), what they need to know of the server (`IntegrityContext`), and the interface of the recorder a kind's
checking client reports to (`ViolationSink`; the integrity family's `IntegrityRecorder` is one).

The rules themselves live with their kind (specsuite/server/kinds/<name>/integrity_rules.py) and are reached through
the registry (`ServerKind.integrity_rules`, `ServerKind.checking_client`); the integrity family, above this layer,
owns the recorder, the wiring and the suite.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Protocol

from specsuite.server.transport import shorten

CHECKS = (
    "response_shape",  # the answer has output_ids (ints) and a meta_info object
    "completion_tokens",  # completion_tokens == len(output_ids)
    "logprob_alignment",  # one logprob triple per output id, carrying the same ids
    "retokenize",  # re-encoding the text gives about as many ids as produced it
    "finish_reason",  # a finished answer has a well-formed finish; length == len(ids) == max_new_tokens
    "max_new_tokens",  # never more ids than max_new_tokens
    "stop_token",  # a matched EOS/stop id is last; no EOS/stop id earlier; none under ignore_eos
    "stop_string",  # no requested stop string in the text (unless no_stop_trim)
    "spec_counts",  # 0 <= accepted <= drafted, rate in [0, 1] and consistent with the counts
    "stream_cumulative",  # each cumulative chunk extends the previous one, never rewrites it
    "stream_finish",  # exactly one finish per request, on its last chunk
    "stream_index",  # batch chunks carry a valid index; every request finishes
)


@dataclass(frozen=True)
class Violation:
    """One broken rule in one answer: which rule, a one-line description with the numbers, and the
    request it came from (rid and prompt hash) so it can be found again."""

    check: str
    message: str
    rid: str | None = None
    prompt_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def quote(self) -> str:
        where = [f"rid {self.rid}"] if self.rid else []
        where += [f"prompt {self.prompt_hash}"] if self.prompt_hash else []
        return f"{self.check}: {self.message}" + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True)
class IntegrityContext:
    """What the checks need to know about the server and its tokenizer.

    `encode` re-encodes text without adding special tokens (None disables `retokenize`); `decode`
    turns ids into text, skipping special tokens when asked (None: whether SGLang's stop check could
    see a stop string left in the text cannot be told, and it counts as a violation); `skipped_ids` are the ids
    `skip_special_tokens` removes from text; `num_draft_tokens` is the server's
    speculative_num_draft_tokens (None or < 2: spec off, the drafted-count formula is skipped).
    """

    eos_ids: frozenset[int] = frozenset()
    skipped_ids: frozenset[int] = frozenset()
    encode: Callable[[str], list[int]] | None = None
    decode: Callable[[list[int], bool], str] | None = None
    num_draft_tokens: int | None = None
    incremental_streaming: bool = False



class ViolationSink(Protocol):
    """Where a checking client puts what it found: `answers` checked answers (one per result) and their violations.
    Recording never raises, so a workload runs to the end."""

    def record(self, violations: list[Violation], answers: int, stream: bool = False) -> None: ...


def guarded_checks(run: Callable[[], list[Violation]]) -> list[Violation]:
    """The checks guard every field they read; an answer shaped beyond that is itself a finding,
    and must not end the caller's workload."""
    try:
        return run()
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        return [Violation("response_shape", f"answer has an unexpected structure: {shorten(repr(exc), 100)}")]


def answered_choice_count(result: Any) -> int:
    """How many choices an OpenAI answer carries; 1 when it names none."""
    choices = result.get("choices") if isinstance(result, dict) else None
    return len(choices) if isinstance(choices, list) and choices else 1


def streamed_choice_count(chunks: list[dict[str, Any]]) -> int:
    """How many choices (distinct `index`es) an OpenAI stream's chunks carry; 1 when they name none."""
    indexes = {c.get("index") for chunk in chunks for c in (chunk.get("choices") or []) if isinstance(c, dict)}
    return max(len(indexes), 1)
