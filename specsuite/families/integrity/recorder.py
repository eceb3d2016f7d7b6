"""Record what breaks in the answers the checking clients check.

Each server kind names the client that runs its own rules on every answer (`ServerKind.checking_client`, in
specsuite/server/kinds/<name>/checking.py: SGLang's `CheckingClient`, vLLM's `CheckingVLLMClient`); they report to
an `IntegrityRecorder` through the server layer's `ViolationSink` interface. `CheckingOpenAIClient`, here, does the
same for any kind's `/v1/completions` and `/v1/chat/completions` answers (streamed or not) through
`specsuite.families.integrity.openai_rules`.
Violations go to an `IntegrityRecorder` — counted per check and quoted — and are never raised, so
a workload runs to the end; the suites assert the recorder is clean. `specsuite.families.integrity.wiring` wires
any workload in one line (`checking_client(server, recorder)`).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from specsuite.families.integrity.openai_rules import check_openai, check_openai_stream
from specsuite.families.integrity.records import IntegrityChecks
from specsuite.server.integrity_rules import (
    CHECKS,
    IntegrityContext,
    Violation,
    answered_choice_count,
    guarded_checks,
    streamed_choice_count,
)
from specsuite.server.openai_client import OpenAICompletionsClient
from specsuite.server.transport import HttpTransport

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


class CheckingOpenAIClient(OpenAICompletionsClient):
    """An OpenAI client whose every answer (completions or chat, streamed or not) is checked and
    its violations recorded; answers are returned unchanged and a violation never raises."""

    def __init__(self, transport: HttpTransport, model: str, recorder: IntegrityRecorder, context: IntegrityContext) -> None:
        # No super().__init__: share the native client's transport (session, auth, timeouts), as
        # the kinds' checking clients do, so closing either closes both.
        self._http = transport
        self.model = model
        self.recorder = recorder
        self.context = context

    def answered(self, api: str, body: dict[str, Any], result: Any) -> None:
        self.recorder.record(guarded_checks(lambda: check_openai(api, body, result, self.context)), answers=answered_choice_count(result))

    def streamed(self, api: str, body: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        answers = streamed_choice_count(chunks)
        self.recorder.record(guarded_checks(lambda: check_openai_stream(api, body, chunks, self.context)), answers=answers, stream=True)

