"""Detectors for corrupted generations: pure functions over ids and text, one small result each.

Every result carries `count`, its denominator `total` and `unit`, the first positions and examples,
and a one-sided Clopper–Pearson 95 % upper bound on the rate (`cp_upper`). The recycled `draft_probs`
bug (EAGLE's draft_probs read after its CUDA-graph pool block was reused by an -inf mask) shows up here as
fallback ids (vocab_size − 1), padded-row ids, stray "!" (the detokenizer prints token 0's text for such ids), repeated
`</think>` / `<tool_call>` fragments and degenerate loops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specsuite.families.correctness.records import DetectorTotal
from specsuite.server.generation import Generation
from specsuite.server.meta_info import FinishReason
from specsuite.server.vocab import VocabInfo
from specsuite.stats.lazy_scipy import stats

MAX_POSITIONS = 20  # positions and examples kept per result; counts are always complete
TOKENS_PER_STRAY_UNIT = 1200  # the recycled-draft_probs bug report's unit: stray tokens per 1200 generated


def cp_upper(k: int, n: int) -> float:
    """One-sided 95 % Clopper–Pearson upper bound for k events in n trials (1.0 when k ≥ n or n = 0)."""
    if n <= 0 or k >= n:
        return 1.0
    return float(stats.beta.ppf(0.95, k + 1, n - k))


@dataclass
class DetectorResult:
    """Hits of one detector on one generation (or, after `merge`, on many)."""

    name: str
    count: int
    total: int
    unit: str
    positions: list[int] = field(default_factory=list)
    examples: list[Any] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def upper95(self) -> float:
        return cp_upper(self.count, self.total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "total": self.total,
            "unit": self.unit,
            "upper95": self.upper95,
            "positions": list(self.positions),
            "examples": list(self.examples),
            "details": dict(self.details),
        }


def _id_hits(name: str, ids: Sequence[int], predicate: Any) -> DetectorResult:
    positions = [i for i, token in enumerate(ids) if predicate(token)]
    return DetectorResult(
        name=name,
        count=len(positions),
        total=len(ids),
        unit="tokens",
        positions=positions[:MAX_POSITIONS],
        examples=[ids[i] for i in positions[:MAX_POSITIONS]],
    )


def invalid_ids(ids: Sequence[int], tokenizer_length: int) -> DetectorResult:
    """Ids no tokenizer can decode: negative or ≥ tokenizer_length (padded rows included)."""
    return _id_hits("invalid_id", ids, lambda t: t < 0 or t >= tokenizer_length)


def padded_row_ids(ids: Sequence[int], tokenizer_length: int, vocab_size: int) -> DetectorResult:
    """Ids of untrained embedding rows: in [tokenizer_length, vocab_size)."""
    return _id_hits("padded_row_id", ids, lambda t: tokenizer_length <= t < vocab_size)


def out_of_vocab_ids(ids: Sequence[int], vocab_size: int) -> DetectorResult:
    """Ids no sampler may draw: negative or >= vocab_size."""
    return _id_hits("out_of_vocab_id", ids, lambda t: t < 0 or t >= vocab_size)


def model_padded_row_ids(ids: Sequence[int], tokenizer_length: int, vocab_size: int) -> DetectorResult:
    """Padded rows other than the fallback, [tokenizer_length, vocab_size - 1): the model gives them a little mass of
    its own, so they are judged against it (specsuite/families/correctness/padded_rows.py), not counted as a bug."""
    return _id_hits("model_padded_row_id", ids, lambda t: tokenizer_length <= t < vocab_size - 1)


def fallback_ids(ids: Sequence[int], vocab_size: int, tokenizer_length: int) -> DetectorResult:
    """Ids equal to vocab_size − 1, the sampler's fallback, where that id is a padded row (tokenizer_length <
    vocab_size). On a checkpoint without padded rows (Llama-2 at 32,000, Mistral at 32,768) it is an ordinary token,
    judged like any other id: none counts here."""
    padded = tokenizer_length < vocab_size
    return _id_hits("fallback_id", ids, lambda t: padded and t == vocab_size - 1)


def empty_decoding_ids(ids: Sequence[int], empty_ids: frozenset[int]) -> DetectorResult:
    """In-range ids that decode to "" on their own (specials excluded when the set was built)."""
    return _id_hits("empty_decoding_id", ids, lambda t: t in empty_ids)


def stray_chars(
    text: str, generated_tokens: int, char: str = "!", exempt_next: str = "="
) -> DetectorResult:
    """Count `char` where it is not ordinary punctuation.

    A `char` is stray when it is part of a run of two or more, or directly followed by a letter or
    digit, or preceded by whitespace or by the start of the text. "Great! The answer" has none,
    "wo!rd!!" has three. A `char` directly followed by one of `exempt_next` is never stray, so the
    operator "!=" in code does not count. The denominator is generated tokens, and
    `details["per_1200_tokens"]` is the recycled-draft_probs bug report's rate unit.
    """
    positions = []
    n = len(text)
    for i, c in enumerate(text):
        if c != char:
            continue
        before = text[i - 1] if i > 0 else ""
        after = text[i + 1] if i + 1 < n else ""
        if after and after in exempt_next:
            continue
        in_run = before == char or after == char
        if in_run or after.isalnum() or before == "" or before.isspace():
            positions.append(i)
    per_1200 = len(positions) * TOKENS_PER_STRAY_UNIT / generated_tokens if generated_tokens > 0 else None
    return _text_positions("stray_char", text, positions, generated_tokens, {"char": char, "per_1200_tokens": per_1200})


def _text_positions(name: str, text: str, positions: list[int], generated_tokens: int,
                    details: dict[str, Any] | None = None) -> DetectorResult:
    """A detector result over character positions in `text`, per generated token, with examples."""
    shown = positions[:MAX_POSITIONS]
    return DetectorResult(name=name, count=len(positions), total=generated_tokens, unit="tokens", positions=shown,
                          examples=[text[max(0, i - 8) : i + 9] for i in shown], details=details or {})


@dataclass(frozen=True)
class FragmentRule:
    """How often a structural fragment may occur in one response. Without `close`: at most
    `max_count` times. With `close`: `open` and `close` must alternate, starting with `open`."""

    open: str
    close: str | None = None
    max_count: int = 1


DEFAULT_FRAGMENT_RULES = (
    FragmentRule("<think>"),
    FragmentRule("</think>"),
    FragmentRule("<tool_call>", "</tool_call>"),
)


def fragment_excess(sequence: Sequence[str], rules: Iterable[FragmentRule]) -> tuple[int, list[int]]:
    """Occurrences beyond what the rules allow, and their indexes in `sequence` (fragment names in
    order of appearance)."""
    excess: list[int] = []
    for rule in rules:
        if rule.close is None:
            seen = [i for i, f in enumerate(sequence) if f == rule.open]
            excess += seen[rule.max_count :]
            continue
        expect_open = True
        for i, fragment in enumerate(sequence):
            if fragment not in (rule.open, rule.close):
                continue
            if (fragment == rule.open) == expect_open:
                expect_open = not expect_open
            else:
                excess.append(i)
    excess.sort()
    return len(excess), excess


def _fragment_names(rules: Iterable[FragmentRule]) -> list[str]:
    names = []
    for rule in rules:
        names += [rule.open] + ([rule.close] if rule.close else [])
    return names


def text_fragments(
    text: str, generated_tokens: int, rules: Sequence[FragmentRule] = DEFAULT_FRAGMENT_RULES
) -> DetectorResult:
    """Structural fragments repeated beyond the rules, found in the text. Special tokens that the
    server skipped while detokenizing are invisible here; `id_fragments` covers them."""
    names = sorted(set(_fragment_names(rules)), key=len, reverse=True)
    found: list[tuple[int, str]] = []
    for name in names:
        start = text.find(name)
        while start != -1:
            # A longer name claims its span first, so "</think>" is not also counted as "think>".
            if not any(s <= start < s + len(n) for s, n in found):
                found.append((start, name))
            start = text.find(name, start + 1)
    found.sort()
    count, excess = fragment_excess([name for _, name in found], rules)
    return DetectorResult(
        name="fragment_text",
        count=count,
        total=generated_tokens,
        unit="tokens",
        positions=[found[i][0] for i in excess[:MAX_POSITIONS]],
        examples=[found[i][1] for i in excess[:MAX_POSITIONS]],
    )


def id_fragments(
    ids: Sequence[int], fragment_ids: dict[str, int], rules: Sequence[FragmentRule] = DEFAULT_FRAGMENT_RULES
) -> DetectorResult:
    """The same rules applied to the ids of single-token fragments (`VocabInfo.fragment_ids`)."""
    by_id = {token: name for name, token in fragment_ids.items() if name in _fragment_names(rules)}
    found = [(i, by_id[t]) for i, t in enumerate(ids) if t in by_id]
    count, excess = fragment_excess([name for _, name in found], rules)
    return DetectorResult(
        name="fragment_id",
        count=count,
        total=len(ids),
        unit="tokens",
        positions=[found[i][0] for i in excess[:MAX_POSITIONS]],
        examples=[found[i][1] for i in excess[:MAX_POSITIONS]],
        details={"fragments_with_ids": sorted(by_id.values())},
    )


def replacement_chars(text: str, generated_tokens: int) -> DetectorResult:
    """U+FFFD in the text: bytes that did not form valid UTF-8 where the server stopped decoding."""
    return _text_positions("replacement_char", text, [i for i, c in enumerate(text) if c == "\ufffd"], generated_tokens)


def repetition_loop(
    ids: Sequence[int], max_period: int = 32, min_repeats: int = 4, min_span: int = 48
) -> DetectorResult:
    """The longest stretch where a block of p tokens (1 ≤ p ≤ max_period) repeats back to back at
    least `min_repeats` times and covers at least `min_span` tokens. count is 1 for a loop (per
    response, total 1); details give period, start, span, repeats and whether it runs to the end.

    min_span = 48 keeps markdown rules ("-----"), table separators and short refrains silent while
    a model stuck in a loop (typically hundreds of tokens) is caught; ties go to the smallest period.
    """
    array = np.asarray(ids, dtype=np.int64)
    n = len(array)
    best: RepetitionLoop | None = None
    for period in range(1, min(max_period, n - 1) + 1):
        equal = array[period:] == array[:-period]  # equal[i]: ids[i] == ids[i + period]
        for start, length in _true_runs(equal):
            span = length + period
            repeats = span // period
            if repeats >= min_repeats and span >= min_span and (best is None or span > best.span):
                best = RepetitionLoop(period, start, span, repeats, start + span == n)
    return DetectorResult(
        name="repetition_loop",
        count=int(best is not None),
        total=1,
        unit="responses",
        positions=[best.start] if best else [],
        examples=[[int(t) for t in array[best.start : best.start + best.period]]] if best else [],
        details=asdict(best) if best else {},
    )


@dataclass(frozen=True)
class RepetitionLoop:
    """The longest loop found in one response: its period, where it starts, how far it runs, whether to the end."""

    period: int
    start: int
    span: int
    repeats: int
    at_end: bool


def _true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of every run of True in a boolean array."""
    if mask.size == 0:
        return []
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(s), int(e - s)) for s, e in zip(edges[::2], edges[1::2], strict=True)]


def nan_finishes(finish_reason: dict[str, Any] | None) -> DetectorResult:
    """SGLang's own alarm: a sampled id outside [0, vocab_size) ends the request with
    {"type": "stop", "matched": "NaN happened"} and the id is overwritten with EOS."""
    hit = isinstance(finish_reason, dict) and FinishReason.parse(finish_reason).matched == "NaN happened"
    return DetectorResult(name="nan_finish", count=int(hit), total=1, unit="responses")


def token_source_mismatches(gen: Generation) -> DetectorResult:
    """Positions where output_ids and the logprob triple ids disagree (see `Generation`)."""
    positions = gen.token_source_mismatch()
    total = max(len(gen.output_ids or []), len(gen.logprob_ids or []))
    return DetectorResult(
        name="token_source_mismatch",
        count=len(positions),
        total=total if gen.logprob_ids is not None else 0,
        unit="tokens",
        positions=positions[:MAX_POSITIONS],
    )


@dataclass(frozen=True)
class DetectorConfig:
    """Knobs for `scan_generation`. Defaults match the recycled-draft_probs bug's symptoms."""

    stray_char: str = "!"
    stray_exempt_next: str = "="
    fragment_rules: tuple[FragmentRule, ...] = DEFAULT_FRAGMENT_RULES
    loop_max_period: int = 32
    loop_min_repeats: int = 4
    loop_min_span: int = 48


@dataclass
class DetectorHits:
    """All detector results for one generation, keyed by detector name. Id detectors are absent
    when the generation carries no ids."""

    prompt_hash: str
    results: dict[str, DetectorResult]

    @property
    def any_hit(self) -> bool:
        return any(r.count for r in self.results.values())

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_hash": self.prompt_hash, "results": {k: r.to_dict() for k, r in self.results.items()}}


def scan_generation(gen: Generation, vocab: VocabInfo, config: DetectorConfig | None = None) -> DetectorHits:
    """Run every applicable detector on one generation."""
    config = config or DetectorConfig()
    tokens = gen.generated_token_count
    found = [
        stray_chars(gen.text, tokens, config.stray_char, config.stray_exempt_next),
        text_fragments(gen.text, tokens, config.fragment_rules),
        replacement_chars(gen.text, tokens),
        nan_finishes(gen.finish_reason),
    ]
    if gen.output_ids is not None:
        ids = gen.output_ids
        found += [
            invalid_ids(ids, vocab.tokenizer_length),
            padded_row_ids(ids, vocab.tokenizer_length, vocab.vocab_size),
            model_padded_row_ids(ids, vocab.tokenizer_length, vocab.vocab_size),
            out_of_vocab_ids(ids, vocab.vocab_size),
            fallback_ids(ids, vocab.vocab_size, vocab.tokenizer_length),
            empty_decoding_ids(ids, vocab.empty_decoding_ids),
            id_fragments(ids, vocab.fragment_ids, config.fragment_rules),
            repetition_loop(ids, config.loop_max_period, config.loop_min_repeats, config.loop_min_span),
            token_source_mismatches(gen),
        ]
    return DetectorHits(prompt_hash=gen.prompt_hash, results={r.name: r for r in found})


def aggregate(hits_list: Iterable[DetectorHits]) -> dict[str, DetectorTotal]:
    """Totals per detector over many generations: count, total, rate, upper95, responses with a hit
    and responses scanned; stray_char also gets the pooled rate per 1200 generated tokens."""
    totals: dict[str, DetectorTotal] = {}
    for hits in hits_list:
        for name, result in hits.results.items():
            entry = totals.get(name)
            if entry is None:
                entry = totals[name] = DetectorTotal.written(count=0, total=0, unit=result.unit, responses=0, responses_with_hits=0)
            entry.count += result.count
            entry.total += result.total
            entry.responses += 1
            entry.responses_with_hits += int(result.count > 0)
    for name, entry in totals.items():
        entry.update(rate=entry.count / entry.total if entry.total else None, upper95=cp_upper(entry.count, entry.total))
        if name == "stray_char":
            entry.put("per_1200_tokens", entry.count * TOKENS_PER_STRAY_UNIT / entry.total if entry.total else None)
    return totals
