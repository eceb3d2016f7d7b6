"""Every sampling parameter behaves the same with speculation on as off in the reference engine.

In-process runs (tests/refserver/sampling_runs.py): the same batch through the speculative engine
(EAGLE chain, 5 steps) and the speculation-off one.  At temperature 0 the outputs must be
token-exact equal, and the parameter must change the output against the unparameterised run (so the
equality is not vacuous).  At temperature 1, where the two paths draw differently, the sampled
tokens are checked against the teacher-forced target rows: min_p 1 keeps only each row's
maximum; top_k 2 with top_p 0.5 keeps the runner-up wherever the top token holds less than half
the mass (SGLang's joint top-k/top-p, srt/layers/sampler.py:435-439 and 820-827).
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from specsuite.refserver.engine import Engine, EngineConfig
from specsuite.refserver.engine_request import LogprobConfig
from specsuite.refserver.protocol import RequestValueError, parse_generate, sampling_config
from specsuite.refserver.sampling import apply_min_p, renormalize_top_k_top_p
from tests.refserver.sampling_runs import (
    BUDGET,
    PROMPTS,
    Ask,
    both,
    greedy,
    ids,
    min_new_stop_ids,
    model,
    run,
    sampled,
    target_rows,
    token,
)


@pytest.fixture(scope="module")
def unparameterised() -> list[list[int]]:
    return ids(run([Ask(p, greedy()) for p in PROMPTS], speculative=False))


GREEDY_CASES = {
    "frequency_penalty": lambda: {"frequency_penalty": 1.0},
    "presence_penalty": lambda: {"presence_penalty": 2.0},
    "repetition_penalty": lambda: {"repetition_penalty": 2.0},
    "all_penalties": lambda: {"frequency_penalty": 0.5, "presence_penalty": 0.5, "repetition_penalty": 1.5},
    "logit_bias_ban": lambda: {"logit_bias": {token(" ="): -100.0, token("\n"): -100.0}},
    "logit_bias_boost": lambda: {"logit_bias": {token(" apple"): 9.0}},
    "min_new_tokens": lambda: {"min_new_tokens": 10, "ignore_eos": False, "stop_token_ids": min_new_stop_ids()},
    "stop_token_ids": lambda: {"ignore_eos": False, "stop_token_ids": [token(" 2")]},
    "stop_strings": lambda: {"stop": [" each", "la la la la la la la la la la la la"]},
}


@pytest.mark.parametrize("case", list(GREEDY_CASES))
def test_greedy_speculation_equals_speculation_off_and_the_parameter_acts(case, unparameterised):
    asks = [Ask(prompt, greedy(**GREEDY_CASES[case]())) for prompt in PROMPTS]
    speculative, reference = both(asks)
    assert speculative == reference
    assert any(out != base for out, base in zip(reference, unparameterised, strict=True)), f"{case} changed nothing"


def test_logit_bias_ban_and_min_new_tokens_hold_their_promises():
    banned = [token(" ="), token("\n")]
    for out in ids(run([Ask(p, greedy(logit_bias=dict.fromkeys(banned, -100.0))) for p in PROMPTS])):
        assert not set(out) & set(banned)
    stops = min_new_stop_ids()
    requests = run([Ask(p, greedy(min_new_tokens=10, ignore_eos=False, stop_token_ids=stops)) for p in PROMPTS])
    for request in requests:
        assert not set(request.output_ids[:9]) & set(stops), "a stop id before min_new_tokens"
    assert any(len(r.output_ids) == 11 for r in requests), "no stop right after min_new_tokens"
    # Masked only until then: some request stops on a stop id right after its 10 tokens are in.
    assert any(r.finish_reason.get("matched") in stops and len(r.output_ids) < BUDGET for r in requests)


def test_stops_inside_a_block_truncate_ids_and_logprobs():
    logprobs = LogprobConfig(return_logprob=True, logprob_start_len=0, top_logprobs_num=2)
    asks = [Ask(p, greedy(stop=[" each"], stop_token_ids=[token(" 2")], ignore_eos=False), logprobs=logprobs) for p in PROMPTS]
    speculative, reference = run(asks), run(asks, speculative=False)
    stopped = 0
    for spec, ref in zip(speculative, reference, strict=True):
        assert spec.output_ids == ref.output_ids and spec.finish_reason == ref.finish_reason
        assert len(spec.output_logprobs) == len(spec.output_ids) == len(spec.output_top_logprobs)
        stopped += spec.finish_reason["type"] == "stop"
    assert stopped >= 3
    assert any(r.verify_ct < len(r.output_ids) for r in speculative), "no multi-token block"


def test_output_and_prompt_logprobs_match_speculation_off_under_penalties_and_bias():
    logprobs = LogprobConfig(return_logprob=True, logprob_start_len=0, top_logprobs_num=3)
    params = {"frequency_penalty": 0.7, "presence_penalty": 0.3, "repetition_penalty": 1.4, "logit_bias": {token(" ="): -3.0},
              "min_new_tokens": 10, "ignore_eos": False}
    asks = [Ask(p, greedy(**params), logprobs=logprobs) for p in PROMPTS]
    speculative, reference = run(asks), run(asks, speculative=False)
    for spec, ref in zip(speculative, reference, strict=True):
        assert spec.output_ids == ref.output_ids
        np.testing.assert_allclose(spec.output_logprobs, ref.output_logprobs, rtol=0, atol=1e-9)
        assert [[i for _, i in top] for top in spec.output_top_logprobs] == [[i for _, i in top] for top in ref.output_top_logprobs]
        assert spec.input_logprobs == ref.input_logprobs
    plain = run([Ask(p, greedy(), logprobs=logprobs) for p in PROMPTS], speculative=False)
    assert any(a.output_logprobs[:5] != b.output_logprobs[:5] for a, b in zip(reference, plain, strict=True)), "the logprobs ignore the penalties"


def _below_row_max(prompt: str, output: list[int]) -> int:
    """Sampled ids (after the first) whose target probability is below their row's maximum."""
    rows = target_rows(prompt, output)
    chosen = rows[np.arange(len(output)), output]
    return int((chosen[1:] < rows.max(axis=1)[1:]).sum())


@pytest.mark.parametrize("speculative", [True, False])
def test_min_p_one_keeps_only_the_row_maximum(speculative):
    asks = [Ask(p, sampled(min_p=1.0), seed=i) for i, p in enumerate(PROMPTS)]
    assert sum(_below_row_max(a.prompt, out) for a, out in zip(asks, ids(run(asks, speculative=speculative)), strict=True)) == 0
    plain = [Ask(p, sampled(), seed=i) for i, p in enumerate(PROMPTS)]
    assert sum(_below_row_max(a.prompt, out) for a, out in zip(plain, ids(run(plain, speculative=speculative)), strict=True)) > 0


@pytest.mark.parametrize("speculative", [True, False])
def test_joint_top_k_top_p_keeps_the_runner_up_below_half_mass(speculative):
    """top_k 2, top_p 0.5: jointly, the runner-up stays wherever p1 < 0.5; renormalising the top-2 first would
    keep it only where p1 < p2, never, so every token would be the row maximum."""
    asks = [Ask(p, sampled(top_k=2, top_p=0.5), seed=i) for i, p in enumerate(PROMPTS * 2)]
    outputs = ids(run(asks, speculative=speculative))
    assert sum(_below_row_max(a.prompt, out) for a, out in zip(asks, outputs, strict=True)) > 0
    for ask, out in zip(asks, outputs, strict=True):  # never outside the top 2
        rows = target_rows(ask.prompt, out)
        ranks = (rows > rows[np.arange(len(out)), out][:, None]).sum(axis=1)
        assert ranks.max() <= 1


def test_filters_in_sglangs_order_on_a_constructed_row():
    row = np.array([[0.4, 0.3, 0.2, 0.1]])
    joint = renormalize_top_k_top_p(row, np.array([2]), np.array([0.5]))
    sequential = renormalize_top_k_top_p(row, np.array([2]), np.array([0.5]), joint=False)
    np.testing.assert_allclose(joint, [[4 / 7, 3 / 7, 0, 0]])  # the mass before 0.3 is 0.4 < 0.5
    np.testing.assert_allclose(sequential, [[1, 0, 0, 0]])  # renormalised first: 0.4 / 0.7 >= 0.5
    np.testing.assert_allclose(apply_min_p(row, np.array([0.5])), [[4 / 9, 3 / 9, 2 / 9, 0]])
    np.testing.assert_array_equal(apply_min_p(row, np.array([0.0])), row)


def test_a_seed_reproduces_its_answer_alone_and_inside_a_batch():
    seeded = Ask(PROMPTS[0], sampled(top_p=0.95, sampling_seed=1234))
    noise = [Ask(p, sampled(), seed=100 + i) for i, p in enumerate(PROMPTS[1:])]
    alone = ids(run([seeded]))[0]
    in_batch = ids(run([*noise[:2], seeded, *noise[2:]]))[2]
    assert alone == in_batch
    other_seed = ids(run([Ask(PROMPTS[0], sampled(top_p=0.95, sampling_seed=99))]))[0]
    assert other_seed != alone


def test_n_draws_are_independent_and_each_gets_its_own_row():
    """n > 1 through the request parser and the server's request builder: n engine requests with
    generators of their own, so unseeded draws differ."""
    from specsuite.refserver.server import ServerState, engine_requests

    m = model()
    config = EngineConfig(num_steps=5, num_draft_tokens=6, use_rejection_sampling=True, disable_cuda_graph=True, eos_ids=m.eos_ids)
    engine = Engine(config, m.target, m.draft, m.decode_text)
    state = ServerState(model=m, engine=engine, server_args={"random_seed": 0}, launch_command="", api_key=None, enable_metrics=False)
    items, _, _ = parse_generate({"text": PROMPTS[0], "sampling_params": {"temperature": 1.0, "n": 4, "max_new_tokens": 40,
                                                                         "ignore_eos": True, "frequency_penalty": 0.5}}, lambda: "n")
    loop = asyncio.new_event_loop()
    try:
        pairs = engine_requests(state, items, loop)
        for request, _ in pairs:
            engine.submit(request)
        engine.start()
        assert all(request.finished.wait(timeout=60) for request, _ in pairs)
    finally:
        engine.stop()
        loop.close()
    outputs = [tuple(request.output_ids) for request, _ in pairs]
    assert len(outputs) == 4 and len(set(outputs)) == 4


def test_the_parser_accepts_the_parameters_and_names_bad_values_in_one_line():
    config = sampling_config({"frequency_penalty": -2, "presence_penalty": 2, "repetition_penalty": 2.0, "min_p": 0.1,
                              "logit_bias": {"5": 1.5, "007": -100}})
    assert (config.frequency_penalty, config.presence_penalty, config.repetition_penalty, config.min_p) == (-2, 2, 2.0, 0.1)
    assert config.logit_bias == {5: 1.5, 7: -100.0}
    for params, message in (({"repetition_penalty": 0}, "repetition_penalty must be in (0, 2]"),
                            ({"repetition_penalty": 2.5}, "repetition_penalty must be in (0, 2]"),
                            ({"logit_bias": {"x": 1}}, "logit_bias keys must be token ids"),
                            ({"frequency_penalty": 3}, "frequency_penalty must be in [-2.0, 2.0]")):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
            sampling_config(params)


def test_a_biased_id_outside_the_vocabulary_is_a_400_line():
    from specsuite.refserver.server import ServerState, engine_requests

    m = model()

    class _Config:
        speculative, num_steps, num_draft_tokens = True, 5, 6

    state = ServerState(model=m, engine=type("E", (), {"config": _Config})(), server_args={"random_seed": 0}, launch_command="",
                        api_key=None, enable_metrics=False)
    items, _, _ = parse_generate({"text": "Hi", "sampling_params": {"logit_bias": {str(m.vocab_size): 1.0}}}, lambda: "b")
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RequestValueError, match=rf"logit_bias must has keys in \[0, {m.vocab_size - 1}\], got {m.vocab_size}\."):
            engine_requests(state, items, loop)
    finally:
        loop.close()
