"""In-process runs of the reference engine for the sampling-parameter tests: the same requests
through a speculative engine (EAGLE chain, 5 steps, rejection sampling for sampled rows, no graph
pool) and a speculation-off one, with fault arms chosen by name. No HTTP, no subprocess."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsuite.refserver.engine import Engine, EngineConfig
from specsuite.refserver.engine_request import EngineRequest, LogprobConfig, SamplingConfig
from specsuite.refserver.model_loading import ReferenceModel, load_reference_model
from specsuite.refserver.sampling import apply_min_p, renormalize_top_k_top_p

STEPS = 5
WAIT_S = 60

ROOT = Path(__file__).resolve().parents[2]
_FIXTURE = [json.loads(line)["prompt"] for line in (ROOT / "specsuite/fixtures/data/correctness_prompts.jsonl").read_text().splitlines()]
# Prompts where the penalties bite within the budget (found once; fixed here): math word problems and a loop.
PROMPTS = [_FIXTURE[i] for i in (46, 55, 10, 34, 52)] + ["la la la la la la la la"]
BUDGET = 120


def greedy(**params) -> SamplingConfig:
    return SamplingConfig(**{"max_new_tokens": BUDGET, "temperature": 0.0, "top_k": 1, "ignore_eos": True, **params})


def sampled(**params) -> SamplingConfig:
    return SamplingConfig(**{"max_new_tokens": 60, "temperature": 1.0, "ignore_eos": True, **params})


def token(text: str) -> int:
    (token_id,) = model().encode(text)
    return token_id


def min_new_stop_ids() -> list[int]:
    """Stop ids the greedy outputs hit early and often, so a block crosses min_new_tokens right before one."""
    return [token("."), token("\n"), token(" =")]


@functools.lru_cache(maxsize=1)
def model() -> ReferenceModel:
    return load_reference_model()


@dataclass
class Ask:
    """One request: prompt text, sampling parameters, logprobs and its generator's seed."""

    prompt: str
    sampling: SamplingConfig
    seed: int = 0
    logprobs: LogprobConfig | None = None


def run(asks: list[Ask], *, speculative: bool = True, faults: tuple[str, ...] = (), random_seed: int = 0) -> list[EngineRequest]:
    """Run the asks as one batch (all queued before the loop starts) and return the finished requests."""
    m = model()
    config = EngineConfig(arm="fix", speculative_algorithm="EAGLE" if speculative else "NONE", num_steps=STEPS,
                          num_draft_tokens=STEPS + 1, use_rejection_sampling=True, disable_cuda_graph=True,
                          max_running_requests=max(len(asks), 1), random_seed=random_seed, eos_ids=m.eos_ids,
                          faults=frozenset(faults))
    engine = Engine(config, m.target, m.draft, m.decode_text)
    requests = []
    for index, ask in enumerate(asks):
        sampling = SamplingConfig(**{**ask.sampling.__dict__})  # the engine must not share state between runs
        sampling.stop_str_max_len = m.stop_str_max_len(sampling.stop)
        seed = sampling.sampling_seed if sampling.sampling_seed is not None else ask.seed
        requests.append(EngineRequest(f"r{index}", np.asarray(m.encode(ask.prompt), dtype=np.int64), sampling,
                                      ask.logprobs or LogprobConfig(), index, np.random.default_rng(seed & ((1 << 64) - 1))))
    for request in requests:
        engine.submit(request)
    engine.start()
    try:
        for request in requests:
            assert request.finished.wait(timeout=WAIT_S), "the engine did not finish"
    finally:
        engine.stop()
    return requests


def ids(requests: list[EngineRequest]) -> list[list[int]]:
    return [list(r.output_ids) for r in requests]


def both(asks: list[Ask], faults: tuple[str, ...] = ()) -> tuple[list[list[int]], list[list[int]]]:
    """(speculative output ids, speculation-off output ids) of the same asks."""
    return ids(run(asks, faults=faults)), ids(run(asks, speculative=False))


def target_rows(prompt: str, output: list[int]) -> np.ndarray:
    """The raw target rows the model gives before each output id (teacher-forced), (len, V)."""
    m = model()
    prompt_ids = m.encode(prompt)
    contexts = [np.asarray(prompt_ids + output[:j], dtype=np.int64) for j in range(len(output))]
    return m.target.probabilities_for_contexts(contexts)


def filtered_rows(prompt: str, output: list[int], sampling: SamplingConfig) -> np.ndarray:
    """The sampler's distribution before each output id for a request with no penalties:
    temperature, joint top-k/top-p, min-p (teacher-forced)."""
    rows = target_rows(prompt, output)
    tempered = model().target.tempered(rows, np.full(len(rows), sampling.temperature))
    size = len(rows)
    filtered = renormalize_top_k_top_p(tempered, np.full(size, sampling.top_k), np.full(size, sampling.top_p))
    return apply_min_p(filtered, np.full(size, sampling.min_p))
