"""Greedy equality (specsuite/families/lossless/greedy.py): every position of the candidate's output scored on the
reference, each flip classified by how far the chosen token sits below the reference's top against a tolerance
from the served dtype, the near-tie flip count against the noise model and the speculation-off control, and the
workload's comparison against a stand-in server that reports its dtype and scores teacher-forced."""

from __future__ import annotations

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.greedy import (
    DEFAULT_NUMERICS_GAP,
    NearTieCounts,
    ReferenceOutput,
    classify,
    compare_greedy,
    control_rule,
    dtype_step,
    first_divergence,
    judge_output,
    near_tie_excess,
    near_tie_rule,
    poisson_binomial_sf,
)
from specsuite.families.lossless.scoring import ScoredPosition
from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload
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
    assert divergence.kind == "real" and "2 best tokens" in divergence.reason


def test_early_end_and_missing_top_2_are_real():
    assert classify(0, [1], _reference([1, 2]), GAP).reason == "one output ended early"
    bare = ReferenceOutput([1, 2], [])
    assert classify(0, [1, 3], bare, GAP).reason == "the reference reported no top-2 here"


def _scored(reference: ReferenceOutput, test: list[int]) -> list[ScoredPosition]:
    """The reference's top-2 at each position, teacher-forced on `test` (the stand-in's reference does not depend on
    the prefix), with the test token's own logprob (-20 when not listed)."""
    positions = []
    for token, top in zip(test, reference.top, strict=False):
        listed = {t: v for v, t in top}
        positions.append(ScoredPosition(token, tuple(t for _, t in top), tuple(v for v, _ in top), listed.get(token, -20.0)))
    return positions


def _compare(concurrency, outputs, references, tolerance, control=None):
    return compare_greedy(concurrency, outputs, references, [_scored(r, o) for r, o in zip(references, outputs, strict=True)],
                          tolerance, control)


def test_compare_counts_and_fails_on_real_divergences():
    references = [_reference([1, 2, 3]), _reference([4, 5, 6], {2: (1e-4, 8)}), _reference([7, 8, 9])]
    numerics_only = _compare(8, [[1, 2, 3], [4, 5, 8], [7, 8, 9]], references, GAP)
    assert (numerics_only.equal, numerics_only.numerics, numerics_only.real, numerics_only.passed) == (2, 1, 0, True)
    with_real = _compare(8, [[1, 2, 3], [4, 5, 8], [7, 0, 9]], references, GAP)
    assert with_real.real == 1 and not with_real.passed
    assert with_real.record().divergences[1].kind == "real"
    with pytest.raises(SpecsuiteError, match="2 outputs against 3"):
        compare_greedy(1, [[1], [2]], references, [[], []], GAP)


def test_every_position_is_judged_not_only_the_first_divergence():
    """A near-tie flip first, then a wrong token far from any tie: the old first-divergence rule stopped at the flip."""
    reference = _reference([1, 2, 3, 4], {1: (1e-4, 7)})
    result = _compare(1, [[1, 7, 3, 50]], [reference], GAP)
    assert [(d.position, d.kind) for d in result.divergences] == [(2, "numerics"), (4, "real")]
    assert not result.passed


def test_an_output_cut_short_is_real():
    reference = _reference([1, 2, 3])
    judgement = judge_output(0, [1, 2], _scored(reference, [1, 2]), reference, GAP)
    assert [(d.position, d.reason) for d in judgement.divergences] == [(3, "one output ended early")]


def _lossy_case(ties: int, tied_outputs: int) -> tuple[list[list[int]], list[ReferenceOutput]]:
    """`ties` prompts with a near tie (gap 0.1 nats to id 7) at position 2; the first `tied_outputs` take id 7."""
    references = [_reference([1, 2, 3], {1: (0.1, 7)}) for _ in range(ties)]
    outputs = [[1, 7, 3] if i < tied_outputs else [1, 2, 3] for i in range(ties)]
    return outputs, references


def test_a_lossy_server_that_takes_the_runner_up_at_every_near_tie_fails():
    """The gaming case: 0 equal, every divergence a near tie, no real one: passed under the old rule, failed now."""
    outputs, references = _lossy_case(24, 24)
    result = _compare(1, outputs, references, near_tie_rule("bfloat16"))
    print(result.near_ties.describe())
    assert (result.equal, result.numerics, result.real) == (0, 24, 0)
    assert result.near_ties.excess and not result.passed
    assert result.record().near_tie_excess is True and "Poisson-binomial" in result.record().near_tie_test


def test_near_tie_flips_as_numerics_flip_them_pass():
    """Half the ties flipped (what symmetric noise at a zero gap gives) is no excess; nor all of a few."""
    outputs, references = _lossy_case(24, 12)
    assert _compare(1, outputs, references, near_tie_rule("bfloat16")).passed
    outputs, references = _lossy_case(3, 3)
    assert _compare(1, outputs, references, near_tie_rule("bfloat16")).passed


def test_the_control_must_reject_too():
    """As many near-tie flips per near-tie position on the speculation-off control: numerics of this node, no excess."""
    outputs, references = _lossy_case(24, 24)
    assert _compare(1, outputs, references, near_tie_rule("bfloat16"), NearTieCounts(20, 24)).passed
    assert not _compare(1, outputs, references, near_tie_rule("bfloat16"), NearTieCounts(2, 24)).passed


def test_poisson_binomial_tail_is_exact():
    assert poisson_binomial_sf(3, [0.5] * 3) == pytest.approx(0.125)
    assert poisson_binomial_sf(0, [0.5]) == 1.0
    assert poisson_binomial_sf(2, [0.5, 0.25]) == pytest.approx(0.125)
    assert near_tie_excess(NearTieCounts(0, 5, (0.5,) * 5), None).model_p == 1.0


class StandInServer(NativeFake):
    """One object plays both servers; greedy outputs follow the prompt's first id. Requests that
    ask for top-2 logprobs are the reference's; with `flip`, the other (the server under test's)
    emit the reference's runner-up, id 500, at position 2 of the prompt "a..."."""

    def __init__(self, gap: float, flip: bool = False, dtype: str = "float32") -> None:
        self.gap = gap
        self.flip = flip
        self.dtype = dtype
        self.base_url = "stand-in"

    def server_info(self) -> dict:
        return {"dtype": self.dtype}  # SGLang's /server_info field (specsuite/server/served_dtype.py)

    def model_info(self) -> dict:
        return {"model_path": "/nonexistent/stand-in"}

    def tokenize(self, text: str) -> list[int]:
        return [ord(text[0])]

    def generate(self, payload: dict) -> dict:
        ids = payload["input_ids"]
        if "logprob_start_len" in payload:  # a teacher-forced scoring request: the reference's answer at each position
            return {"output_ids": [], "meta_info": self._scoring(ids, payload["logprob_start_len"])}
        first = ids[0]
        output = [first, first + 1, first + 2]
        if self.flip and first == ord("a") and payload.get("top_logprobs_num") is None:
            output[1] = 500
        result = {"output_ids": output, "meta_info": {}}
        if payload.get("return_logprob"):
            result["meta_info"]["output_top_logprobs"] = [self._top(t) for t in output]
        return result

    def _top(self, token: int) -> list:
        return [[-0.1, token, None], [-0.1 - self.gap, 500, None]]

    def _scoring(self, ids: list[int], start: int) -> dict:
        """Positions from `start` on, the first null; the reference's argmax at position i of an output is first + i."""
        prompt_first = ids[0]
        tops, own = [None], [None]
        for index in range(start + 1, len(ids)):
            expected = prompt_first + index - 1
            tops.append(self._top(expected))
            own.append([-0.1 if ids[index] == expected else -0.1 - self.gap if ids[index] == 500 else -30.0, ids[index], None])
        return {"input_top_logprobs": tops, "input_token_logprobs": own}


@pytest.mark.parametrize(("gap", "passed", "kind"), [(1e-4, True, "numerics"), (0.7, False, "real")])
def test_workload_classifies_by_the_reference_gap(gap, passed, kind):
    server = StandInServer(gap, flip=True)
    config = LosslessConfig(greedy_prompts=3, greedy_max_new_tokens=3, greedy_concurrencies=(1, 4), numerics_gap=GAP)
    result = LosslessWorkload(server, server, ["abc", "bcd", "cde"], config).greedy()  # type: ignore[arg-type]
    assert result.passed is passed
    written = result.to_dict()
    assert list(written) == ["prompts", "max_new_tokens", "sampling_params", "concurrencies", "passed", "near_tie", "wall_time_s"]
    assert written["sampling_params"] == {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "max_new_tokens": 3,
                                          "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}
    assert list(written["concurrencies"][0]) == ["concurrency", "prompts", "equal", "numerics", "real", "passed", "numerics_gap",
                                                 "near_tie", "divergences", "near_tie_test", "near_tie_excess"]
    assert list(written["concurrencies"][0]["divergences"][0]) == ["prompt_index", "position", "test_token", "reference_token", "top2_gap",
                                                                   "kind", "reason", "below_top"]
    for run in result.concurrencies:
        assert run.equal == 2 and [d.kind for d in run.divergences] == [kind]
        assert run.divergences[0].position == 2


def test_workload_without_a_reference_says_so():
    server = StandInServer(0.1)
    with pytest.raises(SpecsuiteError, match="reference server"):
        LosslessWorkload(server, None, ["abc"], LosslessConfig()).greedy()  # type: ignore[arg-type]


# -- the tolerance from the served dtype ----------------------------------------------------------
# Live H100 (SGLang 0.5.17, EAGLE): float16 ties flipped at 0.0078125 nats (one float16 step for logits
# in [8, 16)), bfloat16 ties at 0.0625 and 0.125 (one and two bfloat16 steps there); the rule must
# call those numerics and still fail a divergence well above the type's resolution.

FLOAT16_STEP_AT_8 = 2.0 ** -7
BFLOAT16_STEP_AT_8 = 2.0 ** -4


def test_tolerance_table():
    assert dtype_step("float16", 8.0) == FLOAT16_STEP_AT_8 and dtype_step("bfloat16", 8.0) == BFLOAT16_STEP_AT_8
    tolerances = {d: near_tie_rule(d).tolerance for d in ("float32", "tf32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2")}
    assert tolerances == {"float32": DEFAULT_NUMERICS_GAP, "tf32": 2.0 ** -5, "float16": 2.0 ** -5, "bfloat16": 0.25,
                          "fp8_e4m3": 4.0, "fp8_e5m2": 8.0}


def test_float16_tie_at_one_step_is_numerics_and_says_so():
    divergence = classify(0, [1, 7], _reference([1, 2], {1: (FLOAT16_STEP_AT_8, 7)}), near_tie_rule("float16", "/server_info dtype float16"))
    assert divergence.kind == "numerics"
    assert "float16 tolerance 0.0312 nats (/server_info dtype float16; 2 float16 steps at |logit| 16)" in divergence.reason
    assert divergence.below_top == pytest.approx(FLOAT16_STEP_AT_8)


def test_float16_half_nat_divergence_is_real():
    divergence = classify(0, [1, 7], _reference([1, 2], {1: (0.5, 7)}), near_tie_rule("float16"))
    assert divergence.kind == "real" and "not a near-tie" in divergence.reason and "float16 tolerance 0.0312" in divergence.reason


@pytest.mark.parametrize("steps", [1, 2])
def test_bfloat16_ties_of_one_and_two_steps_are_numerics(steps):
    divergence = classify(0, [1, 7], _reference([1, 2], {1: (steps * BFLOAT16_STEP_AT_8, 7)}), near_tie_rule("bfloat16"))
    assert divergence.kind == "numerics"
    assert classify(0, [1, 7], _reference([1, 2], {1: (0.5, 7)}), near_tie_rule("bfloat16")).kind == "real"


def test_float32_keeps_a_tight_tolerance():
    rule = near_tie_rule("float32")
    assert rule.tolerance == DEFAULT_NUMERICS_GAP
    assert classify(0, [1, 7], _reference([1, 2], {1: (FLOAT16_STEP_AT_8, 7)}), rule).kind == "real"
    assert classify(0, [1, 7], _reference([1, 2], {1: (1e-4, 7)}), rule).kind == "numerics"


def test_token_outside_the_top_two_counts_only_within_the_tolerance_of_the_top():
    """A third token within the tolerance of the reference's top is a three-way tie; further down, or not
    listed at all, it is real."""
    def reference(third: float) -> ReferenceOutput:
        return ReferenceOutput([1, 2], [[(-0.1, 1), (-5.0, 99)], [(-0.5, 2), (-0.5 - 0.01, 7), (-0.5 - third, 8)]])

    rule = near_tie_rule("float16")
    assert classify(0, [1, 8], reference(0.02), rule).kind == "numerics"
    far = classify(0, [1, 8], reference(0.1), rule)
    assert far.kind == "real" and "gap to this token 0.1 nats is not a near-tie" in far.reason
    assert classify(0, [1, 9], reference(0.02), rule).kind == "real"


def test_numerics_gap_overrides_the_dtype():
    rule = near_tie_rule("bfloat16", "/server_info dtype bfloat16", override=1e-3)
    assert (rule.dtype, rule.tolerance, rule.source) == (None, 1e-3, "--lossless-numerics-gap")
    assert classify(0, [1, 7], _reference([1, 2], {1: (BFLOAT16_STEP_AT_8, 7)}), rule).kind == "real"


@pytest.mark.parametrize(("dtype", "gap", "passed"), [("float16", FLOAT16_STEP_AT_8, True), ("float16", 0.5, False),
                                                      ("float32", FLOAT16_STEP_AT_8, False), ("bfloat16", 2 * BFLOAT16_STEP_AT_8, True)])
def test_workload_takes_the_tolerance_from_the_served_dtype(dtype, gap, passed):
    """No --lossless-numerics-gap: the tolerance follows what /server_info says; results carry it."""
    server = StandInServer(gap, flip=True, dtype=dtype)
    config = LosslessConfig(greedy_prompts=3, greedy_max_new_tokens=3, greedy_concurrencies=(1,))
    result = LosslessWorkload(server, server, ["abc", "bcd", "cde"], config).greedy()  # type: ignore[arg-type]
    assert result.passed is passed
    assert result.near_tie.dtype == dtype and result.near_tie.tolerance == near_tie_rule(dtype).tolerance
    assert result.concurrencies[0].numerics_gap == near_tie_rule(dtype).tolerance


def test_workload_compares_at_the_coarser_of_two_dtypes():
    test, reference = StandInServer(BFLOAT16_STEP_AT_8, flip=True, dtype="bfloat16"), StandInServer(BFLOAT16_STEP_AT_8, dtype="float32")
    config = LosslessConfig(greedy_prompts=3, greedy_max_new_tokens=3, greedy_concurrencies=(1,))
    result = LosslessWorkload(test, reference, ["abc", "bcd", "cde"], config).greedy()  # type: ignore[arg-type]
    assert result.passed and result.near_tie.dtype == "bfloat16"


def test_the_control_widens_the_tolerance_with_headroom():
    """A node whose speculation-off control flips 0.2 nats against itself (decode against prefill) judges at twice
    that, so the candidate's own furthest flip at the same noise is not called real; a control within half the
    tolerance leaves it as it is."""
    rule = near_tie_rule("bfloat16")
    reference = _reference([1, 2, 3], {1: (0.2, 7)})
    control = [judge_output(0, [1, 7, 3], _scored(reference, [1, 7, 3]), None, rule)]
    widened = control_rule(rule, control)
    assert widened.tolerance == pytest.approx(0.4) and "2 x 0.2 nats" in widened.source
    assert control_rule(rule, [judge_output(0, [1, 2, 3], _scored(reference, [1, 2, 3]), None, rule)]) is rule
    far = _reference([1, 2, 3], {1: (0.35, 7)})
    assert judge_output(0, [1, 7, 3], _scored(far, [1, 7, 3]), far, rule).divergences[0].kind == "real"
    assert judge_output(0, [1, 7, 3], _scored(far, [1, 7, 3]), far, widened).divergences[0].kind == "numerics"
