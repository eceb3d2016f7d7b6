"""Each fault arm of the reference engine (faults.py) fails the check that speculation on behaves as
speculation off, and the same check passes with the arm off.

The checks are the ones a black-box client can run against two servers: at temperature 0 the output
ids of speculation on against off; at temperature 1 the sampled ids against the teacher-forced target
rows (min_p 1 keeps only the row maximum; joint top-k 2 / top-p 0.5 keeps the runner-up where the top
token holds less than half the mass); for a seed, its answer alone against inside a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from specsuite.refserver import faults
from specsuite.refserver.cli import build_parser, resolve_config
from specsuite.refserver.engine_request import SamplingConfig
from tests.refserver.sampling_runs import PROMPTS, Ask, greedy, ids, min_new_stop_ids, model, run, sampled, target_rows, token


def _greedy_parity(params: Callable[[], dict]) -> Callable[[tuple[str, ...]], bool]:
    """True when speculation (with the given faults) gives the speculation-off ids at temperature 0."""
    def check(arms: tuple[str, ...]) -> bool:
        asks = [Ask(prompt, greedy(**params())) for prompt in PROMPTS]
        return ids(run(asks, faults=arms)) == ids(run(asks, speculative=False))
    return check


def _below_row_max(params: SamplingConfig, copies: int = 1) -> Callable[[tuple[str, ...]], int]:
    """How many sampled ids (after the prefill's) lie below their target row's maximum."""
    def count(arms: tuple[str, ...]) -> int:
        asks = [Ask(prompt, params, seed=i) for i, prompt in enumerate(PROMPTS * copies)]
        total = 0
        for ask, out in zip(asks, ids(run(asks, faults=arms)), strict=True):
            rows = target_rows(ask.prompt, out)
            total += int((rows[np.arange(len(out)), out][1:] < rows.max(axis=1)[1:]).sum())
        return total
    return count


def _min_p_holds(arms: tuple[str, ...]) -> bool:
    return _below_row_max(sampled(min_p=1.0))(arms) == 0


def _joint_nucleus_reached(arms: tuple[str, ...]) -> bool:
    return _below_row_max(sampled(top_k=2, top_p=0.5), copies=2)(arms) > 0


def _seed_holds_in_a_batch(arms: tuple[str, ...]) -> bool:
    seeded = Ask(PROMPTS[0], sampled(top_p=0.95, sampling_seed=1234))
    noise = [Ask(p, sampled(), seed=100 + i) for i, p in enumerate(PROMPTS[1:])]
    return ids(run([seeded], faults=arms))[0] == ids(run([*noise, seeded], faults=arms))[-1]


@dataclass(frozen=True)
class FaultCase:
    fault: str
    check: Callable[[tuple[str, ...]], bool]  # True: speculation behaves as speculation off


CASES = [
    FaultCase(faults.RELAXED_PENALTIES, _greedy_parity(lambda: {"frequency_penalty": 1.0})),
    FaultCase(faults.RELAXED_PENALTIES, _greedy_parity(lambda: {"presence_penalty": 2.0})),
    FaultCase(faults.RELAXED_PENALTIES, _greedy_parity(lambda: {"repetition_penalty": 2.0, "max_new_tokens": 200})),
    FaultCase(faults.MIN_NEW_TOKENS_IN_STEPS,
              _greedy_parity(lambda: {"min_new_tokens": 10, "ignore_eos": False, "stop_token_ids": min_new_stop_ids()})),
    FaultCase(faults.VERIFY_IGNORES_LOGIT_BIAS, _greedy_parity(lambda: {"logit_bias": {token(" ="): -100.0, token("\n"): -100.0}})),
    FaultCase(faults.STOP_STRING_AT_BLOCK_END_ONLY, _greedy_parity(lambda: {"stop": [" each", " eggs"]})),
    FaultCase(faults.LEAK_REJECTED_SLOT, _greedy_parity(dict)),
    FaultCase(faults.VERIFY_SKIPS_MIN_P, _min_p_holds),
    FaultCase(faults.VERIFY_TOP_K_RENORM_BEFORE_TOP_P, _joint_nucleus_reached),
    FaultCase(faults.BATCH_IGNORES_SEED, _seed_holds_in_a_batch),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.fault)
def test_the_fault_arm_fails_the_check_that_passes_without_it(case):
    assert case.check(()), "the check fails on the correct engine"
    assert not case.check((case.fault,)), f"{case.fault} went unseen"


def test_every_fault_arm_has_a_case():
    assert {case.fault for case in CASES} == set(faults.FAULT_ARMS)


def test_the_leaked_slot_is_token_zero_after_a_rejection():
    asks = [Ask(prompt, greedy(max_new_tokens=40)) for prompt in PROMPTS]
    clean, leaky = ids(run(asks)), ids(run(asks, faults=(faults.LEAK_REJECTED_SLOT,)))
    assert sum(out.count(0) for out in leaky) > sum(out.count(0) for out in clean)


def test_fault_arms_change_nothing_with_speculation_off():
    asks = [Ask(prompt, greedy(frequency_penalty=1.0, min_new_tokens=10, stop=[" each"], ignore_eos=False)) for prompt in PROMPTS]
    assert ids(run(asks, speculative=False, faults=tuple(faults.FAULT_ARMS))) == ids(run(asks, speculative=False))


def test_each_flag_reaches_the_engine_and_the_help(capsys):
    parser = build_parser()
    assert resolve_config(parser.parse_args([]), parser, eos_ids=()).faults == frozenset()
    for name in faults.FAULT_ARMS:
        args = parser.parse_args([faults.fault_flag(name)])
        assert resolve_config(args, parser, eos_ids=()).faults == {name}
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    help_text = capsys.readouterr().out
    assert all(faults.fault_flag(name) in help_text for name in faults.FAULT_ARMS)


def test_the_reference_model_has_the_tokens_the_cases_use():
    assert model().encode(" each") and all(len(model().encode(text)) == 1 for text in (" =", "\n", ".", " eggs"))
