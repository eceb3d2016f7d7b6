"""Run GSM8K few-shot against any generation callable and collect per-question records.

The caller supplies ``generate(request) -> generation`` (a typed `GenerationRequest` in, its
`Generation` out; `specsuite.server.protocol`), so this module does no networking itself. Questions run on a thread pool;
each finished question becomes one JSON-friendly record handed to ``record_sink`` at once, so a
long run leaves a partial trail if it is interrupted. A request that raises, returns a malformed
body, or is aborted by the server becomes an error record with its error class (specsuite.server.faults), a
one-line message and the request; the run goes on. A question whose request `generate` refused to
send because the fault policy stopped the run (`RunStopped`) becomes a skipped record.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tqdm import tqdm

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k.data import GSM8KItem, one_line
from specsuite.families.gsm8k.metrics import accept_length_summary, accuracy_of, definition_summary, latency_summary
from specsuite.families.gsm8k.per_question import PerQuestionTable
from specsuite.families.gsm8k.prompt import DEFAULT_MAX_NEW_TOKENS, STOP_SEQUENCES, FewShotPlan, build_prompt, build_request, plan_few_shot, prompt_hash
from specsuite.families.gsm8k.records import Gsm8kAnswer, Gsm8kRun
from specsuite.families.gsm8k.scoring import DEFINITIONS, score_output
from specsuite.server.faults import RunStopped, classify
from specsuite.server.generation import Generation
from specsuite.server.meta_info import FinishReason, MetaInfo
from specsuite.server.protocol import GenerationRequest, request_record

__all__ = ["GSM8KResult", "PairedOutcomes", "paired_outcomes", "run_gsm8k"]

Generate = Callable[[GenerationRequest], Generation]


@dataclass
class GSM8KResult:
    """Everything one GSM8K run produced: its settings, per-question records and wall time."""

    config: dict[str, Any]
    plan: FewShotPlan
    records: list[Gsm8kAnswer]  # sorted by question_index
    wall_time_s: float
    server_accept_length: float | None = None
    _answered: list[Gsm8kAnswer] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._answered = [record for record in self.records if record.status == "ok"]

    def accuracy(self, definition: str = "sglang") -> float | None:
        """Fraction correct among answered questions under ``definition``."""
        return accuracy_of(self._answered, definition)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary: metrics per definition and per-question correctness vectors."""
        output_tokens = sum(record.completion_tokens or 0 for record in self._answered)
        errors = [record for record in self.records if record.status == "error"]
        skipped = sum(1 for record in self.records if record.status == "skipped")
        return {
            "workload": "gsm8k",
            "config": {**self.config, "shot_indices": list(self.plan.shot_indices)},
            "n_questions": len(self.records),
            "n_answered": len(self._answered),
            "n_errors": len(errors),
            "n_skipped": skipped,
            "errors": [{"question_index": r.question_index, "error": r.error} for r in errors],
            "error_classes": dict(sorted(Counter(r.error_class for r in errors).items())),
            "definitions": {d: definition_summary(self._answered, d) for d in DEFINITIONS},
            "wall_time_s": self.wall_time_s,
            "latency_s": latency_summary(record.latency_s for record in self._answered),
            "output_tokens": output_tokens,
            "output_throughput_tok_s": output_tokens / self.wall_time_s if self.wall_time_s > 0 else None,
            "accept_length": accept_length_summary(self._answered, self.server_accept_length),
            "per_question": {
                "question_index": [record.question_index for record in self._answered],
                "prompt_hash": [record.prompt_hash for record in self._answered],
                "correct": {d: [record.outcome[d] == "correct" for record in self._answered] for d in DEFINITIONS},
            },
        }


def run_gsm8k(
    generate: Generate,
    items: Sequence[GSM8KItem],
    *,
    num_shots: int = 5,
    num_questions: int | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    parallel: int = 16,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    seed: int = 0,
    shots_from_eval: bool = False,
    record_sink: Callable[[dict[str, Any]], None] | None = None,  # takes each record as its JSONL line
    server_accept_length: Callable[[], float | None] | None = None,
    progress: bool = True,
) -> GSM8KResult:
    """Ask every planned question through ``generate`` and score the answers.

    :param shots_from_eval: reproduce the anchor's leaky split (see gsm8k_prompt).
    :param record_sink: called on the calling thread with each record as its question finishes.
    :param server_accept_length: called once after the last request, e.g. to read
        ``avg_spec_accept_length`` from ``/server_info`` after a flush made before the run.
    :raises SpecsuiteError: bad settings (too many shots or questions, parallel < 1).
    """
    if parallel < 1:
        raise SpecsuiteError(f"parallel must be >= 1, got {parallel}")
    plan = plan_few_shot(len(items), num_shots, num_questions, seed=seed, shots_from_eval=shots_from_eval)
    shots = [items[index] for index in plan.shot_indices]
    sampling = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens}

    def ask(index: int) -> Gsm8kAnswer:
        item = items[index]
        prompt = build_prompt(shots, item.question)
        record = Gsm8kAnswer.written(question_index=index, prompt_hash=prompt_hash(prompt), label=item.label)
        request = build_request(prompt, **sampling)
        started = time.perf_counter()
        try:
            generation = generate(request)
            latency = time.perf_counter() - started
            record.update(**_answer_fields(generation, item), latency_s=latency)
        except RunStopped as err:
            record.update(status="skipped", reason=str(err), latency_s=0.0)
        except Exception as err:  # one failed request must not end the run
            record.update(status="error", error_class=classify(err).value, error=one_line(err), request=request_record(request),
                          latency_s=time.perf_counter() - started)
        return record

    records: list[Gsm8kAnswer] = []
    bar = tqdm(total=len(plan.eval_indices), desc="gsm8k", unit="q", disable=not (progress and sys.stderr.isatty()))
    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="gsm8k")
    try:
        futures = [pool.submit(ask, index) for index in plan.eval_indices]
        for future in as_completed(futures):
            record = future.result()
            records.append(record)
            if record_sink is not None:
                record_sink(record.to_dict())
            bar.update(1)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    wall_time = time.perf_counter() - started

    config = {
        "num_shots": num_shots,
        "num_questions": len(plan.eval_indices),
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "parallel": parallel,
        "seed": seed,
        "shots_from_eval": shots_from_eval,
        "stop": list(STOP_SEQUENCES),
    }
    return GSM8KResult(
        config=config,
        plan=plan,
        records=sorted(records, key=lambda record: record.question_index),
        wall_time_s=wall_time,
        server_accept_length=server_accept_length() if server_accept_length is not None else None,
    )


class PairedOutcomes(NamedTuple):
    """Correctness of the same questions in two runs, aligned by question index."""

    question_index: list[int]
    a: list[bool]
    b: list[bool]


def paired_outcomes(
    result_a: GSM8KResult | Mapping[str, Any],
    result_b: GSM8KResult | Mapping[str, Any],
    definition: str = "sglang",
) -> PairedOutcomes:
    """Align two runs (results or their ``to_dict()``) on the questions both answered.

    :raises SpecsuiteError: unknown definition, or a shared question asked with different prompts
        (the runs used different shots or data, so pairing them would be meaningless).
    """
    if definition not in DEFINITIONS:
        raise SpecsuiteError(f"unknown GSM8K definition {definition!r}; expected one of {', '.join(DEFINITIONS)}")
    table_a = _per_question(result_a, definition)
    table_b = _per_question(result_b, definition)
    shared = sorted(table_a.keys() & table_b.keys())
    for index in shared:
        if table_a[index][0] != table_b[index][0]:
            raise SpecsuiteError(f"GSM8K question {index} was asked with different prompts in the two runs")
    return PairedOutcomes(
        question_index=shared,
        a=[table_a[index][1] for index in shared],
        b=[table_b[index][1] for index in shared],
    )


def _per_question(result: GSM8KResult | Mapping[str, Any], definition: str) -> dict[int, tuple[str, bool]]:
    summary = result.to_dict() if isinstance(result, GSM8KResult) else result
    table = PerQuestionTable.from_dict(Gsm8kRun.from_dict(dict(summary)).per_question)
    columns = zip(table.question_index, table.prompt_hash, table.correct[definition], strict=True)
    return {index: (digest, correct) for index, digest, correct in columns}


def _answer_fields(generation: Generation, item: GSM8KItem) -> dict[str, Any]:
    """The record fields taken from one answer; raises on an aborted one."""
    if not isinstance(generation, Generation):
        raise ValueError(f"generate returned {type(generation).__name__}, not a Generation")
    meta = MetaInfo.parse(generation.meta_info)
    finish_reason = generation.finish_reason
    finish = FinishReason.parse(finish_reason)
    if finish.type == "abort":
        raise RuntimeError(f"server aborted the request: {finish.message}")
    text = generation.text
    output_ids = generation.output_ids
    completion_tokens = generation.completion_tokens
    verify_ct = meta.spec_verify_ct
    accept_length = meta.spec_accept_length
    if accept_length is None and verify_ct and completion_tokens is not None:
        accept_length = completion_tokens / verify_ct
    scores = score_output(text, item.answer)
    return {
        "status": "ok",
        "output_text": text,
        "output_ids_count": len(output_ids) if isinstance(output_ids, list) else None,
        "completion_tokens": completion_tokens,
        "extracted": {d: scores[d].extracted for d in DEFINITIONS},
        "outcome": {d: scores[d].outcome for d in DEFINITIONS},
        "finish_reason": finish_reason,
        "spec_verify_ct": verify_ct,
        "accept_length": accept_length,
    }
