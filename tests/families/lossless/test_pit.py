"""The PIT calibration test (specsuite/families/lossless/pit.py, scoring.py) on synthetic distributions.

Under the null (tokens drawn from the scored distribution) the randomized PIT must be uniform and
the test must pass at its nominal rate; under a known bias (a speculative sampler that accepts
drafts with probability min(1, p/q + delta), or a sharpened sampler) it must fail. The workload
is also run end to end against an in-process synthetic server, which checks the scoring request's
alignment (SGLang's null first entry) as well as the statistics.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.greedy import near_tie_rule
from specsuite.families.lossless.pit import (
    chi_square_mde,
    chi_square_power,
    nucleus_size,
    pit_bin_edges,
    pit_values,
    pit_values_needed,
    randomized_pit,
    tail_rate_test,
    uniformity_test,
)
from specsuite.families.lossless.records import LosslessPit
from specsuite.families.lossless.scoring import ScoredPosition, parse_scoring, scoring_request
from specsuite.families.lossless.tempering import TemperedPosition, tempered
from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload, SamplingSetting
from specsuite.server.protocol import native_payload
from tests.helpers.native_fake import NativeFake

VOCAB = 40
TOP_K = 16
CONCENTRATION = 0.1  # peaked rows: a few likely tokens, a long unlikely tail, as in a language model
ALPHA = 1e-3


def _position(probs: np.ndarray, token: int, top_k: int = TOP_K) -> ScoredPosition:
    order = np.argsort(-probs, kind="stable")[:top_k]
    logprobs = np.log(probs)
    return ScoredPosition(int(token), tuple(int(i) for i in order), tuple(float(logprobs[i]) for i in order), float(logprobs[token]))


def _at(position: ScoredPosition, temperature: float = 1.0) -> TemperedPosition:
    return tempered(position, temperature, VOCAB)


def _at_each(positions: list[ScoredPosition], temperature: float = 1.0) -> list[TemperedPosition]:
    return [_at(p, temperature) for p in positions]


def _nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    order = np.argsort(-probs, kind="stable")
    before = np.cumsum(probs[order]) - probs[order]
    kept = np.zeros_like(probs)
    kept[order[before < top_p]] = probs[order[before < top_p]]
    return kept / kept.sum()


def _biased_draw(p: np.ndarray, q: np.ndarray, delta: float, rng: np.random.Generator) -> int:
    """One chain step of speculative sampling with the accept rule coin < p/q + delta."""
    draft = rng.choice(len(q), p=q)
    if rng.random() < p[draft] / q[draft] + delta:
        return int(draft)
    residual = np.maximum(p - q, 0.0)
    return int(rng.choice(len(p), p=residual / residual.sum()))


def _tempered_probs(p: np.ndarray, temperature: float) -> np.ndarray:
    weights = p ** (1.0 / temperature)
    return weights / weights.sum()


def _scored_sample(count: int, seed: int, draw=None, top_p: float = 1.0, temperature: float = 1.0) -> list[ScoredPosition]:
    """`count` positions, each with its own random target p (peaked, like a language model). Tokens are
    drawn at `temperature`; the scoring is raw (temperature 1), as SGLang's and vLLM's prompt logprobs are."""
    rng = np.random.default_rng(seed)
    positions = []
    for _ in range(count):
        p = rng.dirichlet(np.full(VOCAB, CONCENTRATION))
        at_t = _tempered_probs(p, temperature)
        target = _nucleus(at_t, top_p) if top_p < 1.0 else at_t
        token = draw(target, p, rng) if draw else int(rng.choice(VOCAB, p=target))
        positions.append(_position(p, token))
    return positions


# -- the transform -------------------------------------------------------------------------------


def test_pit_of_a_top_k_token_and_of_the_tail_bucket():
    position = ScoredPosition(7, (3, 7), (math.log(0.5), math.log(0.3)), None)
    assert randomized_pit(_at(position), 0.5).value == pytest.approx(0.5 + 0.5 * 0.3)
    tail = ScoredPosition(9, (3, 7), (math.log(0.5), math.log(0.3)), None)
    assert randomized_pit(_at(tail), 0.25).value == pytest.approx(0.8 + 0.25 * 0.2)


def test_pit_within_the_nucleus_renormalises_and_flags_tokens_outside_it():
    position = ScoredPosition(7, (3, 7, 5), (math.log(0.5), math.log(0.3), math.log(0.15)), None)
    value = randomized_pit(_at(position), 0.5, top_p=0.7)  # keeps 3 and 7 (prefix before 5 is 0.8)
    assert value.status == "ok" and value.value == pytest.approx((0.5 + 0.15) / 0.8)
    outside = randomized_pit(_at(ScoredPosition(5, position.top_ids, position.top_logprobs, None)), 0.5, top_p=0.7)
    assert outside.status == "outside-support" and outside.value == 1.0


def test_nucleus_not_decided_by_the_top_k_is_skipped():
    short = ScoredPosition(3, (3, 7), (math.log(0.4), math.log(0.3)), None)  # 0.7 < top_p: may reach past K
    assert randomized_pit(_at(short), 0.5, top_p=0.9).status == "unresolved"
    tied = ScoredPosition(3, (3, 7, 5), (math.log(0.6), math.log(0.2), math.log(0.2)), None)  # 7 and 5 tie at the edge
    assert randomized_pit(_at(tied), 0.5, top_p=0.7).status == "unresolved"


# -- null: uniform, nominal false-alarm rate -------------------------------------------------------


def test_pit_is_uniform_when_tokens_follow_the_target():
    values = pit_values(_at_each(_scored_sample(4000, seed=1)), 1.0, seed=2)
    result = uniformity_test(values.values, ALPHA)
    assert result.passed, result
    assert stats.kstest(values.values, "uniform").pvalue > ALPHA


def test_pit_is_uniform_within_the_nucleus():
    values = pit_values(_at_each(_scored_sample(4000, seed=3, top_p=0.8)), 0.8, seed=4)
    assert values.outside_support == 0
    assert uniformity_test(values.values, ALPHA).passed


def test_false_alarm_rate_matches_alpha():
    """100 null replicates at alpha 0.05: the rejection count must be plausible for Binomial(100, 0.05)."""
    rng = np.random.default_rng(5)
    rejections = sum(not uniformity_test(rng.random(400), 0.05).passed for _ in range(100))
    assert stats.binomtest(rejections, 100, 0.05).pvalue > 1e-3, rejections


# -- alternatives: detected ------------------------------------------------------------------------


def test_biased_accept_rule_is_detected():
    def biased(target, p, rng):
        q = 0.5 * p + 0.5 / VOCAB  # a flatter draft, as a weaker model's
        return _biased_draw(target, q, 0.05, rng)

    result = uniformity_test(pit_values(_at_each(_scored_sample(4000, seed=6, draw=biased)), 1.0, seed=7).values, ALPHA)
    assert not result.passed and result.chi2_p < 1e-6, result
    assert result.bin_counts[-1] > 2 * result.expected_counts[-1]  # the excess sits in the target's unlikely tokens


def test_exact_speculative_sampling_is_not_flagged():
    def exact(target, p, rng):
        return _biased_draw(target, 0.5 * p + 0.5 / VOCAB, 0.0, rng)

    assert uniformity_test(pit_values(_at_each(_scored_sample(4000, seed=8, draw=exact)), 1.0, seed=9).values, ALPHA).passed


def test_mode_seeking_sampler_is_detected():
    def sharpened(target, p, rng):
        sharp = target**1.5
        return int(rng.choice(VOCAB, p=sharp / sharp.sum()))

    result = uniformity_test(pit_values(_at_each(_scored_sample(4000, seed=10, draw=sharpened)), 1.0, seed=11).values, ALPHA)
    assert not result.passed and result.mean < 0.5


def test_sampling_outside_the_nucleus_fails():
    def ignores_top_p(target, p, rng):
        return int(rng.choice(VOCAB, p=p))

    values = pit_values(_at_each(_scored_sample(3000, seed=12, draw=ignores_top_p, top_p=0.8)), 0.8, seed=13)
    assert values.outside_support > 0
    assert not uniformity_test(values.values, ALPHA).passed


# -- temperatures other than 1: raw scoring, tempered here -------------------------------------------


@pytest.mark.parametrize("temperature", [0.4, 0.7, 1.3])
def test_tail_bounds_hold_the_true_tail(temperature):
    rng = np.random.default_rng(20)
    for _ in range(200):
        p = rng.dirichlet(np.full(VOCAB, CONCENTRATION))
        position = _at(_position(p, 0), temperature)
        at_t = _tempered_probs(p, temperature)
        true_tail = float(np.delete(at_t, list(position.top_ids)).sum())
        low, high = position.tail_mass_bounds()
        assert low - 1e-12 <= true_tail <= high + 1e-12
        top = position.top_ids[0]
        assert position.probability_bounds(float(position.top_weights[0]))[0] - 1e-12 <= at_t[top]


@pytest.mark.parametrize("temperature", [0.4, 0.7, 1.3])
def test_pit_is_uniform_at_temperatures_other_than_one(temperature):
    values = pit_values(_at_each(_scored_sample(4000, seed=21, temperature=temperature), temperature), 1.0, seed=22)
    assert uniformity_test(values.values, ALPHA).passed
    assert tail_rate_test(values, ALPHA).passed
    assert values.tail_positions == 4000 and values.tail_expected_low <= values.tail_expected_high


def test_pit_is_uniform_within_the_nucleus_at_temperature():
    values = pit_values(_at_each(_scored_sample(4000, seed=23, top_p=0.8, temperature=0.7), 0.7), 0.8, seed=24)
    assert values.outside_support == 0 and uniformity_test(values.values, ALPHA).passed


def test_raw_scores_read_as_the_tempered_target_fail():
    """The harness's old reading: the scoring's raw logprobs taken for the distribution at T = 0.7."""
    values = pit_values(_at_each(_scored_sample(4000, seed=21, temperature=0.7), 1.0), 1.0, seed=22)
    assert not uniformity_test(values.values, ALPHA).passed


def test_biased_accept_rule_is_detected_at_temperature():
    def biased(target, p, rng):
        return _biased_draw(target, 0.5 * target + 0.5 / VOCAB, 0.05, rng)

    values = pit_values(_at_each(_scored_sample(4000, seed=25, draw=biased, temperature=0.7), 0.7), 1.0, seed=26)
    # the flat draft's over-accepted tokens are mostly the target's unlikely ones: the tail-rate half fires
    assert not tail_rate_test(values, ALPHA / 2).passed


def test_mode_seeking_bias_is_detected_at_temperature():
    def biased(target, p, rng):
        sharp = target**2
        return _biased_draw(target, sharp / sharp.sum(), 0.05, rng)  # a draft that agrees with the target's mode

    values = pit_values(_at_each(_scored_sample(4000, seed=29, draw=biased, temperature=0.7), 0.7), 1.0, seed=30)
    assert not uniformity_test(values.values, ALPHA / 2).passed


def test_tail_overdraw_is_detected_at_temperature():
    """A sampler that draws from outside the target's top-K twice as often as it should."""
    def tail_heavy(target, p, rng):
        top = set(np.argsort(-p, kind="stable")[:TOP_K].tolist())
        token = int(rng.choice(VOCAB, p=target))
        if token not in top or rng.random() > float(sum(target[i] for i in range(VOCAB) if i not in top)):
            return token
        return int(rng.choice([i for i in range(VOCAB) if i not in top]))

    values = pit_values(_at_each(_scored_sample(4000, seed=27, draw=tail_heavy, temperature=1.3), 1.3), 1.0, seed=28)
    result = tail_rate_test(values, ALPHA)
    assert not result.passed and result.p_excess < ALPHA, result


def test_tail_draws_where_the_target_has_almost_no_tail_fail():
    thin_tail = ScoredPosition(9, (3, 7), (math.log(0.6), math.log(0.3999)), None)
    values = pit_values([_at(thin_tail, 0.7)] * 30, 1.0, seed=0)
    assert values.tail_draws == 30 and not tail_rate_test(values, ALPHA).passed


# -- bins and power --------------------------------------------------------------------------------


def test_bins_refine_toward_one_while_each_expects_five():
    edges = pit_bin_edges(5000)
    widths = np.diff(edges)
    assert edges[0] == 0.0 and edges[-1] == 1.0 and np.all(widths > 0)
    assert widths.min() * 5000 >= 5 and widths.min() * 2 * 5000 >= 5 * 2 and widths[-1] < 0.01
    assert len(pit_bin_edges(30)) - 1 == 6  # few values: fewer, equal bins


def test_power_and_mde_are_inverse():
    mde = chi_square_mde(4000, 0.1, 14, 5e-4)
    assert chi_square_power(4000, 0.1, 14, mde, 5e-4) == pytest.approx(0.8, abs=1e-6)
    needed = pit_values_needed(mde, 0.1, 14, 5e-4)
    assert abs(needed - 4000) <= 1
    assert chi_square_mde(16000, 0.1, 14, 5e-4) == pytest.approx(mde / 2)


def test_bad_input_is_one_line_error():
    with pytest.raises(SpecsuiteError, match="at least 20 values"):
        uniformity_test([0.5] * 3, ALPHA)
    with pytest.raises(SpecsuiteError, match=r"lie in \[0, 1\]"):
        uniformity_test([1.5] * 40, ALPHA)


# -- the scoring request ---------------------------------------------------------------------------


def test_scoring_payload_scores_the_output_as_prompt():
    payload = native_payload(scoring_request([1, 2, 3], [4, 5], 20))
    assert payload["input_ids"] == [1, 2, 3, 4, 5] and payload["logprob_start_len"] == 3
    # temperature 1: what the server returns for prompt positions whatever the request says
    assert payload["sampling_params"] == {"temperature": 1.0, "max_new_tokens": 0} and payload["top_logprobs_num"] == 20


def test_parse_scoring_skips_the_null_first_entry_and_checks_shape():
    response = {"meta_info": {"input_token_logprobs": [[None, 4, None], [-0.1, 5, None]],
                              "input_top_logprobs": [None, [[-0.1, 5, None], [-2.5, 9, None]]]}}
    first, second = parse_scoring(response, [4, 5])
    assert first is None and second == ScoredPosition(5, (5, 9), (-0.1, -2.5), -0.1)
    with pytest.raises(SpecsuiteError, match="expected 3 input_top_logprobs"):
        parse_scoring(response, [4, 5, 6])


# -- end to end against a synthetic server ---------------------------------------------------------


class SyntheticServer(NativeFake):
    """A bigram model behind SGLang's /generate shape: sampling (optionally through a biased
    speculative accept rule) and prefill-only scoring with top logprobs and the null first entry."""

    def __init__(self, bias: float = 0.0, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.logits = np.log(rng.dirichlet(np.full(VOCAB, CONCENTRATION), size=VOCAB))
        self.draft_logits = np.log(0.5 * np.exp(self.logits) + 0.5 / VOCAB)
        self.bias = bias
        self.base_url = "synthetic"

    def _probs(self, logits: np.ndarray, previous: int, temperature: float) -> np.ndarray:
        scaled = logits[previous] / temperature
        weights = np.exp(scaled - scaled.max())
        return weights / weights.sum()

    def tokenize(self, text: str) -> list[int]:
        return [len(text) % VOCAB, 3]

    def generate(self, payload: dict) -> dict:
        ids = list(payload["input_ids"])
        params = payload["sampling_params"]
        temperature = params["temperature"]
        if params["max_new_tokens"] == 0:
            return self._score(ids, payload["logprob_start_len"], payload["top_logprobs_num"], temperature)
        rng = np.random.default_rng(params["sampling_seed"])
        output = []
        for _ in range(params["max_new_tokens"]):
            previous = (ids + output)[-1]
            p = _nucleus(self._probs(self.logits, previous, temperature), params.get("top_p", 1.0))
            q = self._probs(self.draft_logits, previous, temperature)
            output.append(_biased_draw(p, q, self.bias, rng) if output else int(rng.choice(VOCAB, p=p)))
        return {"output_ids": output, "meta_info": {"spec_verify_ct": len(output) - 1, "spec_num_correct_drafts": 0}}

    def _score(self, ids: list[int], start: int, top_k: int, temperature: float) -> dict:
        """Raw logprobs whatever the request's temperature, as SGLang's input logprobs
        (srt/layers/logprob_processor.py, InputLogprobProcessor)."""
        tokens, tops = [[None, ids[start], None]], [None]
        for j in range(start + 1, len(ids)):
            logprobs = np.log(self._probs(self.logits, ids[j - 1], 1.0))
            order = np.argsort(-logprobs, kind="stable")[:top_k]
            tokens.append([float(logprobs[ids[j]]), ids[j], None])
            tops.append([[float(logprobs[i]), int(i), None] for i in order])
        return {"output_ids": [], "meta_info": {"input_token_logprobs": tokens, "input_top_logprobs": tops}}


def _pit_workload(server: SyntheticServer, setting: SamplingSetting, concurrency: int = 4) -> LosslessPit:
    config = LosslessConfig(settings=(setting,), pit_requests=200, pit_max_new_tokens=12, top_k=TOP_K, concurrency=concurrency, alpha=ALPHA)
    workload = LosslessWorkload(server, None, ["a", "bb", "ccc"], config, sampling_numerics=near_tie_rule("float32", "synthetic"))  # type: ignore[arg-type]
    return workload.pit(setting)


@pytest.mark.parametrize("setting", [SamplingSetting(1.0), SamplingSetting(0.7, 0.9), SamplingSetting(0.7), SamplingSetting(0.4),
                                     SamplingSetting(1.3)], ids=lambda s: s.key)
def test_workload_passes_an_exact_sampler(setting):
    result = _pit_workload(SyntheticServer(), setting)
    assert result.passed, result.test
    assert result.positions == 200 * 11 and result.outside_support == 0
    written = result.to_dict()  # the keys results.json has always had for a PIT result, in that order
    assert list(written) == ["setting", "requests", "max_new_tokens", "top_k", "positions", "unresolved_nucleus", "outside_support",
                             "given_top_k", "coverage", "test", "tail", "p_value", "passed", "wall_time_s",
                             "nucleus_gap", "nucleus_rule"]
    assert list(written["coverage"]) == ["verify_steps", "accepted_drafts", "positions_after_first", "accepted_draft_share"]
    assert LosslessPit.from_dict(written).to_dict() == written


@pytest.mark.parametrize("setting", [SamplingSetting(1.0), SamplingSetting(0.7, 0.9)], ids=lambda s: s.key)
def test_workload_fails_a_biased_sampler(setting):
    result = _pit_workload(SyntheticServer(bias=0.05), setting)
    assert not result.passed, result.test


def test_workload_fails_a_biased_sampler_given_the_top_k():
    """T != 1, top_p 1: the PIT taken given the top-K, with the tail-rate count beside it, still fails the bias."""
    result = _pit_workload(SyntheticServer(bias=0.05), SamplingSetting(0.7))
    assert result.given_top_k and not result.passed, (result.test, result.tail)


class ModelDefaultsServer(SyntheticServer):
    """A server that fills the sampling fields a request leaves out from the model's generation_config.json, as vLLM
    does (--generation-config auto): here top_k 5, repetition_penalty 1.3 (every id already in the context) and
    presence_penalty 1.0 (every id already generated). Correct for what it was asked, and scoring still reports the
    model: the harness must ask for everything."""

    DEFAULTS = {"top_k": 5, "repetition_penalty": 1.3, "presence_penalty": 1.0}

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        # a repetitive model, as language models are: every row favours the same few ids, so the ids already in the
        # context are the likely ones and a repetition penalty takes mass from the top (the PIT's top bins empty)
        rng = np.random.default_rng(seed)
        favoured = np.zeros(VOCAB)
        favoured[:6] = rng.dirichlet(np.ones(6))
        self.logits = np.log(0.8 * favoured + 0.2 * rng.dirichlet(np.full(VOCAB, CONCENTRATION), size=VOCAB))

    def generate(self, payload: dict) -> dict:
        params = payload["sampling_params"]
        if not params["max_new_tokens"]:
            return super().generate(payload)
        self.sent = params
        top_k = params.get("top_k", self.DEFAULTS["top_k"])
        penalty = params.get("repetition_penalty", self.DEFAULTS["repetition_penalty"])
        presence = params.get("presence_penalty", self.DEFAULTS["presence_penalty"])
        rng = np.random.default_rng(params["sampling_seed"])
        context, output = list(payload["input_ids"]), []
        for _ in range(params["max_new_tokens"]):
            logits = self.logits[(context + output)[-1]].copy()
            seen = sorted(set(context + output))
            logits[seen] = np.where(logits[seen] > 0, logits[seen] / penalty, logits[seen] * penalty)
            logits[sorted(set(output))] -= presence  # vLLM: over the output's ids only
            if top_k > 0:
                logits = np.where(logits >= np.sort(logits)[-top_k], logits, -np.inf)
            weights = np.exp((logits - logits.max()) / params["temperature"])
            output.append(int(rng.choice(VOCAB, p=_nucleus(weights / weights.sum(), params.get("top_p", 1.0)))))
        return {"output_ids": output, "meta_info": {"spec_verify_ct": len(output) - 1, "spec_num_correct_drafts": 0}}


def test_sampling_requests_leave_the_server_no_default_to_fill(monkeypatch):
    """Every field a server could take from the model's generation config goes on the request (vLLM's list: the
    penalties, top_k, min_p, top_p, temperature, the budget), so a correct server with model defaults passes."""
    server = ModelDefaultsServer()
    result = _pit_workload(server, SamplingSetting(1.0))
    assert result.passed, result.test
    assert {name: server.sent[name] for name in ("top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty")} == {
        "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}
    assert result.setting.sampling_params == {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "max_new_tokens": 12,
                                              "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}
    # the faulty arm, the request as it was: top_k and min_p named, the penalties left out. The server applies the
    # model's penalties, and the PIT blames a correct sampler (p about 1e-73 here; the live vLLM case: 5.8e-59)
    monkeypatch.setattr("specsuite.families.lossless.workload.pinned", lambda sampling: replace(sampling, top_k=-1, min_p=0.0))
    assert not _pit_workload(ModelDefaultsServer(), SamplingSetting(1.0)).passed


# -- the nucleus edge under the served numerics ----------------------------------------------------


def test_nucleus_edge_within_the_numerics_gap_is_undecided():
    """A prefix mass 0.895 against top_p 0.9: float32 logits cannot move it across (decided, 2 tokens); bfloat16
    logits (0.25 nats between two forwards) can, so the position is skipped rather than judged."""
    probs = np.array([0.6, 0.295, 0.05, 0.03, 0.025])
    assert nucleus_size(probs, 0.9, near_tie_rule("float32").tolerance) == 3
    assert nucleus_size(probs, 0.9, near_tie_rule("bfloat16").tolerance) is None
    # neighbours closer than the gap can swap at the edge
    swap = np.array([0.5, 0.3, 0.06, 0.055, 0.085 / 2, 0.085 / 2])
    assert nucleus_size(swap, 0.85, near_tie_rule("float32").tolerance) == 3
    assert nucleus_size(swap, 0.85, near_tie_rule("bfloat16").tolerance) is None


class NoisyServer(SyntheticServer):
    """Samples from logits that differ from the scored ones by Gaussian noise of `sigma` nats per logit, fresh
    at every request and position: a correct server whose decode or verify forward rounds otherwise than its
    prefill, as bfloat16 kernels do."""

    def __init__(self, sigma: float, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.sigma = sigma

    def generate(self, payload: dict) -> dict:
        params = payload["sampling_params"]
        if params["max_new_tokens"] == 0:
            return super().generate(payload)
        rng = np.random.default_rng(params["sampling_seed"])
        ids, output = list(payload["input_ids"]), []
        for _ in range(params["max_new_tokens"]):
            noisy = self.logits[(ids + output)[-1]] + rng.normal(0.0, self.sigma, VOCAB)
            weights = np.exp((noisy - noisy.max()) / params["temperature"])
            output.append(int(rng.choice(VOCAB, p=_nucleus(weights / weights.sum(), params.get("top_p", 1.0)))))
        return {"output_ids": output, "meta_info": {"spec_verify_ct": len(output) - 1, "spec_num_correct_drafts": 0}}


def test_bfloat16_numerics_at_the_nucleus_edge_fail_no_correct_server():
    """Sampling logits 0.1 nats (sd) off the scored ones put tokens just outside the scorer's nucleus; judged with
    float32's gap they pile up at u = 1 and fail a correct server, with the bfloat16 rule they are skipped."""
    setting = SamplingSetting(0.7, 0.9)
    config = LosslessConfig(settings=(setting,), pit_requests=400, pit_max_new_tokens=12, top_k=TOP_K, concurrency=4, alpha=ALPHA)
    server = NoisyServer(sigma=0.1, seed=3)
    as_float32 = LosslessWorkload(server, None, ["a", "bb", "ccc"], config, sampling_numerics=near_tie_rule("float32", "synthetic")).pit(setting)  # type: ignore[arg-type]
    assert not as_float32.passed and as_float32.outside_support > 0, as_float32.test
    as_bfloat16 = LosslessWorkload(server, None, ["a", "bb", "ccc"], config, sampling_numerics=near_tie_rule("bfloat16", "synthetic")).pit(setting)  # type: ignore[arg-type]
    assert as_bfloat16.passed, as_bfloat16.test
    assert as_bfloat16.nucleus_gap == pytest.approx(0.25 / 0.7) and "bfloat16" in as_bfloat16.nucleus_rule
