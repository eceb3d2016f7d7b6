"""Greedy equality (harness/workloads/lossless/greedy.py): finding the first divergence and classifying it by
the reference's top-2 logprob gap, and the workload's comparison against a stand-in server."""

from __future__ import annotations

import pytest

from harness.errors import SpecsuiteError
from harness.workloads.lossless.greedy import ReferenceOutput, classify, compare_greedy, first_divergence
from harness.workloads.lossless.workload import LosslessConfig, LosslessWorkload
from tests.helpers.native_fake import NativeFake

GAP = 1e-3


def _reference(ids: list[int], gaps: dict[int, tuple[float, int]] | None = None) -> ReferenceOutput:
    """Top-2 per position: the reference token at -0.1, a runner-up (id 99 unless given) far below
    or `gap` below."""
    top2 = []
    for index, token in enumerate(ids):
        gap, runner_up = (gaps or {}).get(index, (5.0, 99))
        top2.append([(-0.1, token), (-0.1 - gap, runner_up)])
    return ReferenceOutput(ids, top2)


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 4], [1, 2, 3]) == 2
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([], []) is None


def test_equal_outputs_are_not_divergences():
    assert classify(0, [1, 2, 3], _reference([1, 2, 3]), GAP) is None


def test_near_tie_with_the_runner_up_is_numerics():
    divergence = classify(4, [1, 7, 9], _reference([1, 2, 3], {1: (1e-4, 7)}), GAP)
    assert divergence is not None and divergence.kind == "numerics"
    assert (divergence.prompt_index, divergence.position, divergence.test_token, divergence.reference_token) == (4, 2, 7, 2)
    assert divergence.top2_gap == pytest.approx(1e-4)


def test_runner_up_at_a_clear_gap_is_real():
    divergence = classify(0, [1, 7], _reference([1, 2], {1: (0.5, 7)}), GAP)
    assert divergence.kind == "real" and "not a near-tie" in divergence.reason


def test_token_outside_the_top_2_is_real_even_at_a_near_tie():
    divergence = classify(0, [1, 8], _reference([1, 2], {1: (1e-5, 7)}), GAP)
    assert divergence.kind == "real" and "two best" in divergence.reason


def test_early_end_and_missing_top_2_are_real():
    assert classify(0, [1], _reference([1, 2]), GAP).reason == "one output ended early"
    bare = ReferenceOutput([1, 2], [])
    assert classify(0, [1, 3], bare, GAP).reason == "the reference reported no top-2 here"


def test_compare_counts_and_fails_only_on_real_divergences():
    references = [_reference([1, 2, 3]), _reference([4, 5, 6], {2: (1e-4, 8)}), _reference([7, 8, 9])]
    numerics_only = compare_greedy(8, [[1, 2, 3], [4, 5, 8], [7, 8, 9]], references, GAP)
    assert (numerics_only.equal, numerics_only.numerics, numerics_only.real, numerics_only.passed) == (2, 1, 0, True)
    with_real = compare_greedy(8, [[1, 2, 3], [4, 5, 8], [7, 0, 9]], references, GAP)
    assert with_real.real == 1 and not with_real.passed
    assert with_real.to_dict()["divergences"][1]["kind"] == "real"
    with pytest.raises(SpecsuiteError, match="2 outputs against 3"):
        compare_greedy(1, [[1], [2]], references, GAP)


class StandInServer(NativeFake):
    """One object plays both servers; greedy outputs follow the prompt's first id. Requests that
    ask for top-2 logprobs are the reference's; with `flip`, the other (the server under test's)
    emit the reference's runner-up, id 500, at position 2 of the prompt "a..."."""

    def __init__(self, gap: float, flip: bool = False) -> None:
        self.gap = gap
        self.flip = flip
        self.base_url = "stand-in"

    def tokenize(self, text: str) -> list[int]:
        return [ord(text[0])]

    def generate(self, payload: dict) -> dict:
        first = payload["input_ids"][0]
        output = [first, first + 1, first + 2]
        if self.flip and first == ord("a") and payload.get("top_logprobs_num") is None:
            output[1] = 500
        result = {"output_ids": output, "meta_info": {}}
        if payload.get("return_logprob"):
            result["meta_info"]["output_top_logprobs"] = [[[-0.1, t, None], [-0.1 - self.gap, 500, None]] for t in output]
        return result


@pytest.mark.parametrize(("gap", "passed", "kind"), [(1e-4, True, "numerics"), (0.7, False, "real")])
def test_workload_classifies_by_the_reference_gap(gap, passed, kind):
    server = StandInServer(gap, flip=True)
    config = LosslessConfig(greedy_prompts=3, greedy_max_new_tokens=3, greedy_concurrencies=(1, 4), numerics_gap=GAP)
    result = LosslessWorkload(server, server, ["abc", "bcd", "cde"], config).greedy()  # type: ignore[arg-type]
    assert result["passed"] is passed
    for run in result["concurrencies"]:
        assert run["equal"] == 2 and [d["kind"] for d in run["divergences"]] == [kind]
        assert run["divergences"][0]["position"] == 2


def test_workload_without_a_reference_says_so():
    server = StandInServer(0.1)
    with pytest.raises(SpecsuiteError, match="reference server"):
        LosslessWorkload(server, None, ["abc"], LosslessConfig()).greedy()  # type: ignore[arg-type]
