"""Serving benchmark suite (marker perf): bench_serving's metrics on the server under test, the
server-side facts they rest on, and, with a baseline server, the A/B verdicts and --fail-on rules.

The benchmark itself runs once per session (specsuite/pytest_plugin/bench.py); these tests read its result.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.perf

ACCEPT_AGREEMENT = 0.10  # server-wide vs per-request accept length: fold lag and the prefill token


def test_bench_requests_succeed(bench_state, specsuite):
    run = bench_state.candidate[0]
    print(f"bench: median ITL {run.median_itl_ms:.3f} ms, median TPOT {run.median_tpot_ms:.3f} ms, "
          f"output {run.output_throughput:.1f} tok/s, accept length {run.accept_length}")
    assert run.failed == 0, f"{run.failed} of {run.failed + run.completed} benchmark requests failed"
    assert run.completed == specsuite.run_config.bench.num_prompts
    for line in run.warnings:
        print(f"bench: {line}")  # e.g. the lengths fitted to the server's context length


def test_bench_output_lengths_match_request(bench_state, specsuite):
    """With ignore_eos every request must produce exactly the tokens it asked for."""
    settings = specsuite.run_config.bench
    if settings.range_ratio != 1.0 or settings.dataset == "sharegpt":
        pytest.skip("output lengths vary with this dataset or range ratio")
    run = bench_state.candidate[0]
    wanted = run.random_output_len  # the length sent: fitted to the server's context length when needed
    short = [n for n in run.output_lens if n != wanted]
    assert not short, f"{len(short)} requests did not produce {wanted} tokens with ignore_eos: {short[:5]}"


def test_bench_itl_accounts_for_every_token(bench_state):
    """Per-token ITL entries cover the tokens after the first chunk, and never exceed the request's time."""
    run = bench_state.candidate[0]
    for index, (itl, n) in enumerate(zip(run.itls, run.output_lens, strict=False)):
        assert len(itl) <= max(n - 1, 0), f"request {index}: {len(itl)} ITL entries for {n} output tokens"
        assert all(gap >= 0 for gap in itl), f"request {index}: negative inter-token gap"


def test_bench_accept_length_consistent(bench_state, specsuite):
    """The server-wide accept length after the flush agrees with the per-request values."""
    run = bench_state.candidate[0]
    pairs = [(n, v) for n, v in zip(run.output_lens, run.spec_verify_cts, strict=False) if v]
    if run.cache_flushed is False:
        pytest.skip("; ".join(run.warnings or ["the server refused /flush_cache"]))
    if run.accept_length is None or not pairs:
        pytest.skip("the server reports no accept length (not speculative?)")
    if specsuite.run_config.bench.no_flush:
        pytest.skip("without the flush the server-wide value includes earlier traffic")
    per_request = sum(n for n, _ in pairs) / sum(v for _, v in pairs)
    server = run.accept_length
    assert all(a >= 1.0 for a in run.request_accept_lengths if a is not None)
    assert abs(server / per_request - 1.0) <= ACCEPT_AGREEMENT, (
        f"server accept length {server:.3f} vs per-request {per_request:.3f} (tokens / verify steps) differ by more than {ACCEPT_AGREEMENT:.0%}")


def test_bench_against_baseline(bench_state):
    """TOST equivalence and --fail-on rules against the baseline server: the rows printed are the rows the rules read."""
    from specsuite.analysis.verdicts import describe_run_level

    outcome = bench_state.outcome
    if outcome is None:
        pytest.skip("no baseline server: pass --baseline-url")
    for row in bench_state.rows:
        print(describe_run_level(row))
    for line in outcome.unevaluated:
        print(f"not evaluated: {line}")
    assert not outcome.triggered, "; ".join(f"{t.rule}: {t.reason}" for t in outcome.triggered)
