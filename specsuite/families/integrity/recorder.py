"""Run the integrity checks on every answer a client receives, and record what breaks.

`CheckingClient` is an `SGLangClient` (same transport, same connection pool) whose `generate` and
`generate_stream` pass each answer through `specsuite.families.integrity.sglang_rules` before handing it back unchanged.
`CheckingVLLMClient` does the same for a `VLLMClient`'s raw answers through `specsuite.families.integrity.vllm_rules`,
and `CheckingOpenAIClient` for `/v1/completions` and `/v1/chat/completions` answers (streamed or not) through
`specsuite.families.integrity.openai_rules`. Each server kind names its checking client (specsuite/server/kinds/).
Violations go to an `IntegrityRecorder` — counted per check and quoted — and are never raised, so
a workload runs to the end; the suites assert the recorder is clean. `specsuite.families.integrity.wiring` wires
any workload in one line (`checking_client(server, recorder)`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any, Callable

from specsuite.families.integrity.openai_rules import answered_choice_count, check_openai, check_openai_stream, streamed_choice_count
from specsuite.families.integrity.records import IntegrityChecks
from specsuite.families.integrity.sglang_rules import CHECKS, IntegrityContext, Violation, check_generate, check_stream, split_payload
from specsuite.families.integrity.vllm_rules import check_vllm_completion, check_vllm_stream
from specsuite.server.openai_client import OpenAICompletionsClient
from specsuite.server.sglang_client import SGLangClient
from specsuite.server.transport import HttpTransport, shorten
from specsuite.server.vllm_client import VLLMClient

DEFAULT_QUOTES_PER_CHECK = 5
UNLABELLED = "unlabelled"


class IntegrityRecorder:
    """Thread-safe tally of integrity violations: exact counts per check and per source (the test or
    workload that caused the request), every violation kept in order, a few quoted per check."""

    def __init__(self, quotes_per_check: int = DEFAULT_QUOTES_PER_CHECK) -> None:
        self._lock = threading.Lock()
        self._quotes_per_check = quotes_per_check
        self._log: list[tuple[str, Violation]] = []
        self.answers_checked = 0
        self.streams_checked = 0
        self.source = UNLABELLED  # set by whoever drives the requests (e.g. the running test's id)

    def record(self, violations: list[Violation], answers: int, stream: bool = False) -> None:
        """Count `answers` checked answers (one per result) and keep their violations."""
        with self._lock:
            self.answers_checked += answers
            self.streams_checked += int(stream)
            self._log.extend((self.source, v) for v in violations)

    def checkpoint(self) -> int:
        """A mark to pass to `since`: violations recorded after it belong to the caller."""
        with self._lock:
            return len(self._log)

    def since(self, mark: int = 0) -> list[Violation]:
        with self._lock:
            return [v for _, v in self._log[mark:]]

    @property
    def total(self) -> int:
        with self._lock:
            return len(self._log)

    def counts(self, mark: int = 0) -> dict[str, int]:
        """Violations per check (only checks that fired), since `mark`."""
        return dict(Counter(v.check for v in self.since(mark)))

    def summary(self, mark: int = 0) -> str:
        """One paragraph for an assertion message: counts, then a few quotes per check."""
        with self._lock:
            entries = self._log[mark:]
            answers = self.answers_checked
        if not entries:
            return f"no integrity violations in {answers} checked answers"
        counts = Counter(v.check for _, v in entries)
        head = f"{len(entries)} integrity violations in {answers} checked answers (" + ", ".join(f"{c} {n}" for c, n in counts.most_common()) + ")"
        quoted: list[str] = []
        shown: Counter[str] = Counter()
        for source, violation in entries:
            if shown[violation.check] < self._quotes_per_check:
                shown[violation.check] += 1
                quoted.append(f"  - {violation.quote()} [from {source}]")
        return "\n".join([head, *quoted])

    def totals(self) -> IntegrityChecks:
        """The totals results.json records: counts per check and per source, and the quotes."""
        with self._lock:
            entries = list(self._log)
            answers, streams = self.answers_checked, self.streams_checked
        by_source: dict[str, Counter[str]] = {}
        quotes: dict[str, list[dict[str, Any]]] = {}
        for source, violation in entries:
            by_source.setdefault(source, Counter())[violation.check] += 1
            bucket = quotes.setdefault(violation.check, [])
            if len(bucket) < self._quotes_per_check:
                bucket.append({**violation.to_dict(), "source": source})
        return IntegrityChecks.written(
            answers_checked=answers,
            streams_checked=streams,
            violations=len(entries),
            counts={check: sum(c[check] for c in by_source.values()) for check in CHECKS if any(c[check] for c in by_source.values())},
            by_source={source: dict(c) for source, c in by_source.items()},
            quotes=quotes,
        )


class CheckingClient(SGLangClient):
    """An SGLangClient that checks every /generate answer (streamed or not) and records violations.

    Answers come back exactly as the server sent them; a violation never raises. A stream is
    checked once it has been read to `[DONE]` (a stream abandoned early is not checked).
    """

    def __init__(self, inner: SGLangClient, recorder: IntegrityRecorder, context: IntegrityContext) -> None:
        # No super().__init__: share the inner client's transport (session, auth, timeouts), so
        # closing either closes both and no second connection pool is opened.
        self._http = inner._http
        self.inner = inner
        self.recorder = recorder
        self.context = context

    def generate(self, payload: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        response = super().generate(payload)
        self.recorder.record(self._guarded(lambda: check_generate(payload, response, self.context)), answers=_result_count(payload))
        return response

    def generate_stream(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        # super().generate_stream sends the request now; only the reading is deferred.
        return self._checked(payload, super().generate_stream(payload))

    def _checked(self, payload: dict[str, Any], chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        seen = []
        for chunk in chunks:
            seen.append(chunk)
            yield chunk
        self.recorder.record(self._guarded(lambda: check_stream(payload, seen, self.context)), answers=_result_count(payload), stream=True)

    @staticmethod
    def _guarded(run: Callable[[], list[Violation]]) -> list[Violation]:
        return guarded_checks(run)


def guarded_checks(run: Callable[[], list[Violation]]) -> list[Violation]:
    """The checks guard every field they read; an answer shaped beyond that is itself a finding,
    and must not end the caller's workload."""
    try:
        return run()
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        return [Violation("response_shape", f"answer has an unexpected structure: {shorten(repr(exc), 100)}")]


class CheckingVLLMClient(VLLMClient):
    """A `VLLMClient` whose every raw /v1/completions answer (streamed or not) is checked by the
    vLLM rules before it is translated; like `CheckingClient`, it shares the inner transport."""

    def __init__(self, inner: VLLMClient, recorder: IntegrityRecorder, context: IntegrityContext) -> None:
        self._http = inner._http
        self._model, self._card, self._spec_snapshot = inner._model, inner._card, inner._spec_snapshot
        self.inner = inner
        self.recorder = recorder
        self.context = context

    def answered(self, body: dict[str, Any], result: Any) -> None:
        self.recorder.record(guarded_checks(lambda: check_vllm_completion(body, result, self.context)), answers=answered_choice_count(result))

    def streamed(self, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        self.recorder.record(guarded_checks(lambda: check_vllm_stream(body, chunks, self.context)), answers=1, stream=True)


class CheckingOpenAIClient(OpenAICompletionsClient):
    """An OpenAI client whose every answer (completions or chat, streamed or not) is checked and
    its violations recorded; answers are returned unchanged and a violation never raises."""

    def __init__(self, transport: HttpTransport, model: str, recorder: IntegrityRecorder, context: IntegrityContext) -> None:
        # No super().__init__: share the native client's transport (session, auth, timeouts), as
        # CheckingClient does, so closing either closes both.
        self._http = transport
        self.model = model
        self.recorder = recorder
        self.context = context

    def answered(self, api: str, body: dict[str, Any], result: Any) -> None:
        self.recorder.record(guarded_checks(lambda: check_openai(api, body, result, self.context)), answers=answered_choice_count(result))

    def streamed(self, api: str, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        answers = streamed_choice_count(chunks)
        self.recorder.record(guarded_checks(lambda: check_openai_stream(api, body, chunks, self.context)), answers=answers, stream=True)


def _result_count(payload: dict[str, Any]) -> int:
    try:
        return len(split_payload(payload))
    except (TypeError, AttributeError):
        return 1
