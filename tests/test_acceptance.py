"""Tests for harness.workloads.correctness.acceptance: reading accept lengths and the checks built on them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.workloads.correctness.acceptance import (
    SUSPICIOUS_ACCEPT_RATE,
    SUSPICIOUS_MIN_TEMPERATURE,
    accept_length_within_bounds,
    acceptance_rises_with_temperature,
    max_accept_length,
    request_accept_length,
    server_accept_length,
    suspicious_acceptance_rate,
)


def test_request_accept_length_prefers_reported_value():
    meta = {"spec_accept_length": 3.25, "completion_tokens": 100, "spec_verify_ct": 10}
    assert request_accept_length(meta) == 3.25


def test_request_accept_length_falls_back_to_ratio():
    assert request_accept_length({"completion_tokens": 30, "spec_verify_ct": 12}) == pytest.approx(2.5)


@pytest.mark.parametrize(
    "meta",
    [
        {"completion_tokens": 1},  # max_new_tokens=1: no verify step, no spec keys
        {"completion_tokens": 5, "spec_verify_ct": 0},
        {},
    ],
)
def test_request_accept_length_absent(meta):
    assert request_accept_length(meta) is None


def test_server_accept_length_averages_ranks_equally():
    info = {"internal_states": [{"avg_spec_accept_length": 2.0}, {"avg_spec_accept_length": 3.0}, {"other": 1}]}
    assert server_accept_length(info) == pytest.approx(2.5)
    assert server_accept_length({"internal_states": [{}]}) is None
    assert server_accept_length({}) is None


def test_max_accept_length_formula():
    # completion ≤ 1 + v·draft, so completion / v ≤ draft + 1/v.
    assert max_accept_length(6, verify_ct=4) == pytest.approx(6.25)
    assert max_accept_length(6) == 7.0
    for v in (1, 2, 7, 100):
        assert (1 + v * 6) / v == pytest.approx(max_accept_length(6, v))


def test_bounds_accept_legal_values():
    check = accept_length_within_bounds([1.0, 3.5, 6.0, 6.2], 6, verify_cts=[10, 10, 10, 5])
    assert check.passed, check.violations


def test_bounds_flag_values_outside():
    check = accept_length_within_bounds([0.5, 3.0, 6.2, 7.5], 6, verify_cts=[4, 4, 10, None])
    assert [v[0] for v in check.violations] == [0, 2, 3]
    assert check.violations[1][2] == pytest.approx(6.1)
    json.dumps(check.to_dict())


def test_bounds_without_verify_counts_use_worst_case():
    assert accept_length_within_bounds([6.9], 6).passed
    assert not accept_length_within_bounds([7.01], 6).passed


def test_bounds_reject_misaligned_verify_counts():
    with pytest.raises(ValueError):
        accept_length_within_bounds([1.0, 2.0], 6, verify_cts=[3])


def test_rise_detected_when_sampled_acceptance_is_higher():
    rng = np.random.default_rng(1234)
    greedy = rng.normal(3.0, 0.3, 40)
    sampled = rng.normal(5.5, 0.3, 40)  # the seed bug: acceptance climbs toward the ceiling
    trend = acceptance_rises_with_temperature(greedy, sampled)
    assert trend.rises
    assert trend.p_value < 1e-6
    assert trend.median_sampled > trend.median_greedy


def test_no_rise_when_sampled_acceptance_is_lower_or_equal():
    rng = np.random.default_rng(1234)
    greedy = rng.normal(3.0, 0.3, 40)
    assert not acceptance_rises_with_temperature(greedy, rng.normal(2.6, 0.3, 40)).rises
    same = acceptance_rises_with_temperature(greedy, greedy)
    assert same.verdict == "no rise"
    assert same.p_value > 0.4


def test_rise_with_no_data_is_inconclusive():
    trend = acceptance_rises_with_temperature([], [3.0])
    assert trend.verdict == "insufficient data"
    assert trend.p_value is None
    json.dumps(trend.to_dict())


@pytest.mark.parametrize(
    ("rate", "temperature", "flag"),
    [(0.99, 1.0, True), (0.95, 0.7, True), (0.94, 1.0, False), (0.99, 0.5, False), (None, 1.0, False)],
)
def test_suspicious_acceptance_rate(rate, temperature, flag):
    assert suspicious_acceptance_rate(rate, temperature) is flag


def test_suspicious_rate_gives_the_correctness_suites_former_verdicts():
    """suites/test_correctness.py used to skip below T 0.7 and fail on a mean rate >= 0.95 with its own
    constants; it now skips below SUSPICIOUS_MIN_TEMPERATURE and fails where this function flags."""
    assert (SUSPICIOUS_ACCEPT_RATE, SUSPICIOUS_MIN_TEMPERATURE) == (0.95, 0.7)
    for temperature in (0.7, 0.8, 1.0, 1.5):
        for rate in (0.0, 0.5, 0.9499, 0.95, 0.951, 1.0):
            assert suspicious_acceptance_rate(rate, temperature) is (rate >= 0.95)
