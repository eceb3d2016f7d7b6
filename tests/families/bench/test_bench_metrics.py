"""bench_serving's metric definitions on synthetic timestamps, the random datasets' range-ratio
meaning, seeded Poisson arrivals, and the run-level A/B helpers (no server)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from specsuite.analysis.verdicts import compare_run_values, describe_run_level
from specsuite.compare.engines import log_sd, robust_log_sd
from specsuite.errors import SpecsuiteError
from specsuite.families.bench.client import RequestOutput, _StreamState
from specsuite.families.bench.datasets import (
    BenchRandom,
    _ids_from_text,
    compute_random_lens,
    sample_random_requests,
)
from specsuite.families.bench.metrics import (
    calculate_metrics,
    distribution,
    peak_buckets,
    pooled_itl,
)
from specsuite.families.bench.record import session_summary
from specsuite.families.bench.runner import arrival_offsets
from specsuite.results.types import ComparisonRow


def native_chunk(text: str, tokens: int) -> dict:
    return {"text": text, "output_ids": list(range(tokens)), "meta_info": {"completion_tokens": tokens, "prompt_tokens": 7}}


def oai_chunk(text: str) -> dict:
    return {"choices": [{"index": 0, "text": text}]}


def feed(backend: str, chunks: list[tuple[float, dict]], requested: int = 99) -> RequestOutput:
    out = RequestOutput(prompt_len=5, start_time=100.0)
    state = _StreamState(backend, out, requested)
    for stamp, data in chunks:
        state.feed(data, 100.0 + stamp)
    state.finish()
    out.success = True
    return out


# ------------------------------------------------------------------------- per-request timing


def test_native_multi_token_chunks_split_gap_per_token():
    out = feed("sglang", [(0.010, native_chunk("a", 1)), (0.030, native_chunk("abcd", 4)),
                          (0.040, native_chunk("abcd", 4)), (0.050, native_chunk("abcdef", 6))])
    assert out.ttft == pytest.approx(0.010)
    # 3 tokens over 20 ms, then the zero-token chunk at 40 ms merges into the next: 2 tokens over 20 ms.
    assert out.itl == pytest.approx([0.020 / 3] * 3 + [0.010] * 2)
    assert out.chunk_itl == pytest.approx([0.020, 0.020])
    assert out.chunk_tokens == [3, 2]
    assert out.output_len == 6 and out.generated_text == "abcdef" and out.server_prompt_len == 7
    assert len(out.itl) == out.output_len - 1  # the first chunk's token has no entry


def test_native_first_chunk_tokens_have_no_itl_and_empty_text_is_ignored():
    out = feed("sglang", [(0.001, {"text": "", "meta_info": {"completion_tokens": 0}}),
                          (0.010, native_chunk("ab", 2)), (0.020, native_chunk("abc", 3))])
    assert out.ttft == pytest.approx(0.010)
    assert out.itl == pytest.approx([0.010])


def test_openai_chunks_give_one_gap_each_and_fall_back_to_requested_length():
    out = feed("sglang-oai", [(0.005, oai_chunk("Hel")), (0.015, oai_chunk("lo wo")), (0.035, oai_chunk("rld"))], requested=12)
    assert out.ttft == pytest.approx(0.005)
    assert out.itl == pytest.approx([0.010, 0.020]) and out.chunk_itl == out.itl
    assert out.text_chunks == ["lo wo", "rld"] and out.generated_text == "Hello world"
    assert out.output_len == 12  # no usage: bench_serving's fallback to max_tokens


def test_openai_usage_chunk_sets_output_len_and_chat_counts_reasoning():
    chat = [(0.002, {"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            (0.004, {"choices": [{"delta": {"reasoning_content": "hm"}}]}),
            (0.009, {"choices": [{"delta": {"content": "ok"}}]}),
            (0.010, {"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 9}})]
    out = feed("sglang-oai-chat", chat)
    assert out.ttft == pytest.approx(0.004) and out.itl == pytest.approx([0.005])
    assert out.output_len == 3 and out.server_prompt_len == 9 and out.generated_text == "hmok"


def test_in_stream_error_object_fails_the_request():
    out = RequestOutput(prompt_len=1, start_time=0.0)
    state = _StreamState("sglang", out, 4)
    with pytest.raises(Exception, match="server error in stream"):
        state.feed({"error": {"message": "boom"}}, 0.1)


# ------------------------------------------------------------------------- aggregates


def synthetic_outputs() -> list[RequestOutput]:
    a = RequestOutput(prompt_len=10, success=True, start_time=0.0, ttft=0.1, latency=1.1, itl=[0.2] * 5, output_len=6,
                      chunk_itl=[0.2] * 5, spec_accept_length=2.0)
    b = RequestOutput(prompt_len=20, success=True, start_time=0.5, ttft=0.3, latency=2.3, itl=[0.5, 0.5, 1.0], output_len=4,
                      chunk_itl=[1.0, 1.0], spec_accept_length=3.0)
    c = RequestOutput(prompt_len=30, success=False, start_time=0.2, error="HTTP 500")
    return [a, b, c]


def test_calculate_metrics_follows_bench_serving_definitions():
    m = calculate_metrics(synthetic_outputs(), duration_s=4.0, backend="sglang", accept_length=2.5,
                          encode=lambda text: text.split())
    assert m["completed"] == 2 and m["failed"] == 1
    assert m["total_input_tokens"] == 30 and m["total_output_tokens"] == 10  # failed request not counted
    assert m["request_throughput"] == pytest.approx(0.5)
    assert m["output_throughput"] == pytest.approx(2.5) and m["total_throughput"] == pytest.approx(10.0)
    assert m["concurrency"] == pytest.approx((1.1 + 2.3) / 4.0)
    tpots = [(1.1 - 0.1) / 5, (2.3 - 0.3) / 3]
    assert m["mean_tpot_ms"] == pytest.approx(np.mean(tpots) * 1000)
    itl = [0.2] * 5 + [0.5, 0.5, 1.0]  # pooled over requests, weighted by tokens
    assert m["median_itl_ms"] == pytest.approx(np.median(itl) * 1000)
    assert m["std_itl_ms"] == pytest.approx(np.std(itl) * 1000)  # population std
    assert m["p99_itl_ms"] == pytest.approx(np.percentile(itl, 99) * 1000)  # linear interpolation
    assert m["max_itl_ms"] == pytest.approx(1000.0)
    assert m["median_chunk_itl_ms"] == pytest.approx(np.median([0.2] * 5 + [1.0, 1.0]) * 1000)
    assert m["mean_request_accept_length"] == pytest.approx(2.5) and m["accept_length"] == 2.5
    assert m["median_e2e_latency_ms"] == pytest.approx(1700.0) and m["p90_ttft_ms"] == pytest.approx(np.percentile([0.1, 0.3], 90) * 1000)


def test_empty_distribution_counts_as_zero_and_single_token_has_no_tpot():
    assert distribution([], "itl") == {f"{s}_itl_ms": 0.0 for s in ("mean", "median", "std", "p90", "p95", "p99")}
    one = RequestOutput(prompt_len=3, success=True, start_time=0.0, ttft=0.2, latency=0.25, output_len=1)
    m = calculate_metrics([one], 1.0, "sglang", None)
    assert m["mean_tpot_ms"] == 0.0 and m["mean_request_accept_length"] is None and m["total_output_tokens_retokenized"] is None


def test_oai_gaps_split_per_retokenized_token_only_when_server_speculates():
    out = feed("sglang-oai", [(0.0, oai_chunk("x")), (0.03, oai_chunk("one two three")), (0.04, oai_chunk(""))])

    def encode(text: str) -> list[str]:
        return text.split()

    assert pooled_itl([out], "sglang-oai", 2.0, encode) == pytest.approx([0.01] * 3)
    assert pooled_itl([out], "sglang-oai", None, encode) == pytest.approx([0.03])
    assert pooled_itl([out], "sglang-oai", 0.0, encode) == pytest.approx([0.03])
    assert pooled_itl([out], "sglang", 2.0, encode) == pytest.approx([0.03])  # native gaps are split already
    with pytest.raises(SpecsuiteError):
        pooled_itl([out], "sglang-oai-chat", 2.0, None)


def test_peak_buckets_use_one_second_bins():
    a = RequestOutput(prompt_len=1, success=True, start_time=10.0, ttft=0.5, latency=2.2, itl=[0.2, 0.2, 0.2, 0.6])
    b = RequestOutput(prompt_len=1, success=True, start_time=11.1, ttft=0.1, latency=0.5, itl=[0.1])
    # a's token times 10.5, 10.7, 10.9, 11.1, 11.7 -> buckets 0,0,0,1,1; b's 11.2, 11.3 -> 1,1
    assert peak_buckets([a, b]) == (4.0, 2)


# ------------------------------------------------------------------------- datasets and arrivals


def test_range_ratio_one_is_fixed_length_and_zero_is_uniform_from_one():
    rng = np.random.RandomState(0)
    assert compute_random_lens(rng, 1024, 1.0, 50) == [1024] * 50
    lens = np.array(compute_random_lens(np.random.RandomState(1), 1024, 0.0, 20000))
    assert lens.min() >= 1 and lens.max() <= 1024
    assert abs(lens.mean() - 512.5) < 10  # the r = 0 trap: about half the nominal length
    half = np.array(compute_random_lens(np.random.RandomState(2), 1000, 0.5, 5000))
    assert half.min() == 500 and half.max() == 1000
    assert compute_random_lens(rng, 0, 1.0, 3) == [0, 0, 0]
    with pytest.raises(SpecsuiteError):
        compute_random_lens(rng, 10, 1.5, 3)


def test_lengths_and_ids_reproduce_bench_serving_global_seeding():
    """Same draws as `np.random.seed(s); np.random.randint(...)` in bench_serving's order."""
    np.random.seed(7)
    want_in = np.random.randint(max(int(300 * 0.3), 1), 301, size=4).tolist()
    want_out = np.random.randint(max(int(50 * 0.3), 1), 51, size=4).tolist()
    offsets = np.random.randint(0, 1000, size=4)
    gaps = [np.random.exponential(1 / 2.0) for _ in range(4)]

    class Tok:
        vocab_size = 1000

        def num_special_tokens_to_add(self):
            return 0

    rng = BenchRandom.from_seed(7)
    rows = sample_random_requests(Tok(), rng, num_prompts=4, input_len=300, output_len=50, range_ratio=0.3,
                                  random_ids=True, tokenize_prompt=True)
    assert [r.prompt_len for r in rows] == want_in and [r.output_len for r in rows] == want_out
    assert [r.prompt[:2] for r in rows] == [[int((offsets[i] + i) % 1000), int((offsets[i] + i + 1) % 1000)] for i in range(4)]
    offsets_after = arrival_offsets(4, 2.0, rng.numpy)
    assert offsets_after == pytest.approx([0.0, *np.cumsum(gaps[:3])])


class CharTokenizer:
    """One id per character; one special token added per encode."""

    vocab_size = 50

    def num_special_tokens_to_add(self):
        return 1

    def encode(self, text, add_special_tokens=True):
        return [ord(c) % 50 for c in text]

    def decode(self, ids):
        return "".join(chr(65 + i % 26) for i in ids)


def test_text_mode_reduces_length_by_special_tokens():
    rows = sample_random_requests(CharTokenizer(), BenchRandom.from_seed(3), num_prompts=3, input_len=10, output_len=4,
                                  range_ratio=1.0, random_ids=True, tokenize_prompt=False)
    assert all(isinstance(r.prompt, str) and r.prompt_len == 9 and len(r.prompt) == 9 for r in rows)


def test_random_prompts_take_shuffled_text_truncated_or_tiled():
    pairs = [("abcdefgh", "r"), ("xy", "r"), ("", "r"), ("pqrs", "r"), ("mnopqrstuv", "r")]
    rng = BenchRandom.from_seed(4)
    ids = _ids_from_text(CharTokenizer(), rng, pairs, [6, 6, 3])
    shuffled = list(pairs)
    random.Random(4).shuffle(shuffled)
    expected = []
    for prompt, _ in shuffled:
        if len(expected) == 3:
            break
        if not prompt:
            continue  # empty prompts are skipped, as in bench_serving
        want = [6, 6, 3][len(expected)]
        base = CharTokenizer().encode(prompt)
        expected.append((base * (-(-want // len(base))))[:want])
    assert ids == expected and [len(x) for x in ids] == [6, 6, 3]
    with pytest.raises(SpecsuiteError, match="fewer than --num-prompts"):
        _ids_from_text(CharTokenizer(), BenchRandom.from_seed(4), pairs, [5] * 5)


def test_poisson_arrivals_are_seeded_and_exponential():
    a = arrival_offsets(3000, 50.0, np.random.RandomState(11))
    b = arrival_offsets(3000, 50.0, np.random.RandomState(11))
    c = arrival_offsets(3000, 50.0, np.random.RandomState(12))
    assert a == b and a != c and a[0] == 0.0
    gaps = np.diff(a)
    assert stats.kstest(gaps, "expon", args=(0, 1 / 50.0)).pvalue > 0.001
    assert arrival_offsets(4, math.inf, np.random.RandomState(0)) == [0.0] * 4


# ------------------------------------------------------------------------- summaries and A/B


def test_session_summary_keeps_a_seeded_reservoir():
    record = {"itls": [[0.001 * i] * 10 for i in range(1, 101)], "run": {"temperature": 0.0, "top_p": 1.0}, "median_itl_ms": 50.0,
              "output_throughput": 10.0, "output_lens": [11] * 100, "request_accept_lengths": [2.0] * 100,
              "spec_verify_cts": [5] * 100, "ttfts": [0.1] * 100, "errors": [""] * 100}
    small = session_summary(record, reservoir=2000)
    assert small.itl_samples_total == 1000 and len(small.itl_ms) == 1000 and not small.itl_ms_is_reservoir
    big = session_summary(record, reservoir=100, seed=1)
    assert len(big.itl_ms) == 100 and big.itl_ms == session_summary(record, reservoir=100, seed=1).itl_ms
    assert big.itl_ms == sorted(big.itl_ms) and big.config["temperature"] == 0.0 and big.median_itl_ms == 50.0
    assert list(big.to_dict())[:2] == ["median_itl_ms", "output_throughput"]  # written in the JSONL line's order


def _run_level(candidate: list[float], baseline: list[float], margin: float, **kwargs: float) -> ComparisonRow:
    return compare_run_values(candidate, baseline, metric="median_tpot_ms", threshold=margin, higher_is_better=False, **kwargs)


def test_run_level_compare_detects_shift_and_equivalence():
    rng = np.random.default_rng(5)
    base = list(2.56 * np.exp(rng.normal(0, 0.0005, 8)))
    shifted = list(2.5702 * np.exp(rng.normal(0, 0.0005, 8)))
    same = list(2.56 * np.exp(rng.normal(0, 0.0005, 8)))
    diff = _run_level(shifted, base, 0.005, target_effect=0.004)
    assert diff.p_value < 0.05 and diff.effect.ci[0] > 0 and diff.mde.repeats_needed >= 2
    equal = _run_level(same, base, 0.005)
    tost = equal.equivalence
    assert tost.equivalent and tost.ci[0] > -0.005 and tost.ci[1] < 0.005 and equal.verdict == "equivalent"
    assert log_sd([1.0]) is None
    assert _run_level([1.0], [1.0, 1.1], 0.01).p_value is None


def test_rank_based_compare_survives_one_disturbed_run():
    """One slow run (a busy machine) swamps Welch on 0.4%; the rank-based pair still sees it."""
    rng = np.random.default_rng(11)
    base = list(3.445 * np.exp(rng.normal(0, 0.0015, 16)))
    shifted = list(3.459 * np.exp(rng.normal(0, 0.0015, 16)))
    base[3] *= 1.08  # a disturbed baseline run
    row = _run_level(shifted, base, 0.005, target_effect=0.004)
    assert row.p_value >= 0.05, "Welch should be swamped by the outlier in this fixture"
    rank = row.rank
    assert rank.p_value < 0.05 and 0.002 < rank.estimate < 0.006 and rank.ci[0] > 0
    same = list(3.445 * np.exp(rng.normal(0, 0.0015, 16)))
    same[5] *= 1.08
    assert _run_level(same, base, 0.005).rank.equivalent
    assert "rank-based: Hodges-Lehmann" in describe_run_level(row)


def test_robust_spread_ignores_a_disturbed_run_that_inflates_the_sd():
    rng = np.random.default_rng(3)
    base = list(0.8886 * np.exp(rng.normal(0, 0.002, 12)))
    other = list(0.8921 * np.exp(rng.normal(0, 0.002, 12)))
    assert robust_log_sd(base, other) == pytest.approx(0.002, rel=0.5)
    base[2] *= 1.06
    assert log_sd(base, other) > 0.008  # one slow run quadruples the sd
    assert robust_log_sd(base, other) < 0.004
    assert robust_log_sd([1.0]) is None
