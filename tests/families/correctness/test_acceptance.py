"""Tests for specsuite.families.correctness.acceptance: reading accept lengths and the checks built on them."""

from __future__ import annotations

import json

import pytest

from specsuite.families.correctness.acceptance import (
    accept_length_within_bounds,
    max_accept_length,
    request_accept_length,
    server_accept_length,
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
