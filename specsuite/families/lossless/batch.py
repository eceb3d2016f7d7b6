"""Send many typed generation requests at a fixed concurrency and get the results back in order, plus
the per-request seeds the lossless tests use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.server.generation import Generation
from specsuite.server.protocol import GenerationRequest, ServerClient

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")

# Distinct streams per use, so no two tests (or arms of one test) share a sampling seed.
SEED_STREAMS = {"pit": 1, "two-sample-test": 2, "two-sample-reference": 3, "pit-randomization": 4}


def request_seed(base_seed: int, stream: str, case_index: int, request_index: int) -> int:
    """A sampling_seed in [0, 2**62) that depends on every argument, reproducibly."""
    state = np.random.SeedSequence([base_seed, SEED_STREAMS[stream], case_index, request_index]).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 30 ^ int(state[1])


def parallel_map(function: Callable[[Item], Outcome], items: Sequence[Item], concurrency: int) -> list[Outcome]:
    """`function` over `items` with `concurrency` requests in flight; results in input order. The
    first SpecsuiteError stops the batch (pending requests are cancelled) and is raised."""
    if concurrency < 1:
        raise SpecsuiteError(f"concurrency must be at least 1, got {concurrency}")
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(function, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def generate_one(client: ServerClient, request: GenerationRequest) -> Generation:
    """One single-prompt request's only Generation; several (a batch, n > 1) is an error here."""
    answers = client.generate_request(request).generations
    if len(answers) != 1:
        raise SpecsuiteError(f"{client.base_url} answered {len(answers)} generations to a single-prompt request")
    return answers[0]


def output_ids_of(generation: Generation) -> list[int]:
    if generation.output_ids is None:
        raise SpecsuiteError("the answer has no output ids")
    return generation.output_ids


def tokenize_prompts(client: ServerClient, prompts: Sequence[str], concurrency: int = 8) -> list[list[int]]:
    """Prompt ids from the server's own tokenizer, so generation and scoring share the exact ids."""
    return parallel_map(client.tokenize, list(prompts), concurrency)
