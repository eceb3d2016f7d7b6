"""The GSM8K family's records: a run per temperature (``workloads.gsm8k``), its scorings, and one question's answer
(a JSONL line of the run's records).  The results model keeps the family's data raw (`Workloads.part`); `gsm8k_runs`
reads it typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from specsuite.results.types import Document, Record, Workloads, sampling_setting


@dataclass
class Proportion(Record):
    """k of n, its value and exact (Clopper-Pearson) interval."""

    value: float | None = None
    k: int | None = None
    n: int | None = None
    ci_exact: list[float] = field(default_factory=list)


@dataclass
class Gsm8kScoring(Record):
    """One answer-extraction definition's scores (sglang, lmeval_strict, lmeval_flexible)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"accuracy": ("one", Proportion), "invalid": ("one", Proportion)}

    accuracy: Proportion = field(default_factory=Proportion)
    invalid: Proportion = field(default_factory=Proportion)


@dataclass
class AcceptLengthSummary(Record):
    """A GSM8K run's ``accept_length`` (specsuite.families.gsm8k.metrics.accept_length_summary), read typed."""

    n: int | None = None
    mean: float | None = None  # the per-request accept lengths' mean
    pooled: float | None = None  # completion tokens over verify steps, pooled
    server: float | None = None  # the server's own figure after the run


@dataclass
class Gsm8kRun(Record):
    """One GSM8K run at one temperature (specsuite.families.gsm8k.runner)."""

    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {"definitions": ("map", Gsm8kScoring)}

    workload: str = "gsm8k"
    config: dict[str, Any] = field(default_factory=dict)
    temperature: float | None = None
    n_questions: int = 0
    n_answered: int = 0
    n_errors: int = 0
    n_skipped: int = 0
    errors: list[str] = field(default_factory=list)
    error_classes: dict[str, int] = field(default_factory=dict)
    definitions: dict[str, Gsm8kScoring] = field(default_factory=dict)
    wall_time_s: float | None = None
    latency_s: dict[str, Any] = field(default_factory=dict)
    output_tokens: int | None = None
    output_throughput_tok_s: float | None = None
    accept_length: dict[str, Any] = field(default_factory=dict)
    per_question: Any = None
    warnings: list[str] = field(default_factory=list)
    detectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    padded_rows: dict[str, Any] = field(default_factory=dict)  # correctness.padded_rows.PaddedRowJudgement.to_dict()
    source: str | None = None  # the GSM8K file, or the synthetic set's marker

    def scoring(self, definition: str) -> Gsm8kScoring:
        return (self.definitions or {}).get(definition) or Gsm8kScoring()

    def setting(self) -> tuple[float, float]:
        """Temperature and top_p it ran at: its config's, else its own fields, else greedy (0, 1)."""
        own_temperature = self.temperature if self.has("temperature") else 0.0
        return sampling_setting(self.config, {}, "temperature", own_temperature), sampling_setting(self.config, self.extra, "top_p", 1.0)

    def detector(self, name: str, key: str = "count") -> float:
        found = self.detectors.get(name)
        return float((found.get(key) if isinstance(found, dict) else None) or 0)


@dataclass
class Gsm8kAnswer(Record):
    """One GSM8K question as asked and answered (specsuite.families.gsm8k.runner): ok, skipped or error, with the
    fields of that status (a JSONL line of the run's records; results.json keeps only the run's summary)."""

    question_index: int = 0
    prompt_hash: str = ""
    label: Any = None
    status: str = ""  # "ok" | "skipped" | "error"
    output_text: str | None = None
    output_ids_count: int | None = None
    completion_tokens: int | None = None
    extracted: dict[str, Any] = field(default_factory=dict)  # definition -> the answer it extracted
    outcome: dict[str, str] = field(default_factory=dict)  # definition -> correct | incorrect | invalid
    finish_reason: Any = None
    spec_verify_ct: int | None = None
    accept_length: float | None = None
    reason: str | None = None  # skipped: why
    error_class: str | None = None
    error: str | None = None
    request: dict[str, Any] | None = None  # error: the request as sent
    latency_s: float = 0.0


def gsm8k_runs(workloads: Workloads) -> list[Gsm8kRun]:
    """A repeat's GSM8K runs: a list of them, or one run written as a single object."""
    written = workloads.part("gsm8k")
    if isinstance(written, dict):
        return [Gsm8kRun.from_dict(written)]
    return [Gsm8kRun.from_dict(run) for run in written if isinstance(run, dict)] if isinstance(written, list) else []


def gsm8k_sources(document: Document) -> set[str]:
    """The GSM8K sources the runs used: each run's `source`, else the run's `--gsm8k-path` option (older results)."""
    return {str(run.source or document.option("--gsm8k-path") or "unknown")
            for arm in document.arms.values() for repeat in arm.repeats for run in gsm8k_runs(repeat.workloads)}
