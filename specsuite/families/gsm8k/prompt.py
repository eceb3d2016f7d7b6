"""Few-shot GSM8K prompts in SGLang ``few_shot_gsm8k`` format, and the shot/eval split.

Prompt: each shot is ``Question: {q}\\nAnswer: {a}`` followed by a blank line, then
``Question: {q}\\nAnswer:``. Stop sequences are the anchor's. ``max_new_tokens`` defaults to
512, the anchor's CLI default (its ``run_eval`` path uses 2048).

Shot leakage: the anchor takes shots from rows 0..k-1 of the split it evaluates and evaluates
rows 0..N-1, so the first k questions are asked with their own answers in the prompt. By default
we instead draw k shots with a seeded RNG and evaluate only the other rows, in dataset order.
``shots_from_eval=True`` reproduces the anchor: shots are rows 0..k-1, evaluation starts at row 0.
Every question shares one shot prefix, so a server's prefix cache sees the same prefix as with
the anchor.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from specsuite.errors import SpecsuiteError
from specsuite.families.gsm8k.data import GSM8KItem
from specsuite.server.protocol import GenerationRequest, Sampling
from specsuite.server.sampling_pins import pinned

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "STOP_SEQUENCES",
    "FewShotPlan",
    "build_request",
    "build_prompt",
    "plan_few_shot",
    "prompt_hash",
]

STOP_SEQUENCES = ("Question", "Assistant:", "<|separator|>")
DEFAULT_MAX_NEW_TOKENS = 512


@dataclass(frozen=True)
class FewShotPlan:
    """Which rows are shots and which are evaluated (indices into the item list)."""

    shot_indices: tuple[int, ...]
    eval_indices: tuple[int, ...]
    shots_from_eval: bool


def plan_few_shot(
    n_items: int,
    num_shots: int,
    num_questions: int | None,
    *,
    seed: int = 0,
    shots_from_eval: bool = False,
) -> FewShotPlan:
    """Choose shot rows and evaluation rows; see the module docstring for the two modes.

    :raises SpecsuiteError: more shots or questions than the items allow.
    """
    if num_shots < 0:
        raise SpecsuiteError(f"num_shots must be >= 0, got {num_shots}")
    if num_shots > n_items:
        raise SpecsuiteError(f"num_shots={num_shots} exceeds the {n_items} GSM8K items loaded")
    if shots_from_eval:
        shots = tuple(range(num_shots))
        pool = tuple(range(n_items))
    else:
        shots = tuple(sorted(random.Random(seed).sample(range(n_items), num_shots)))
        chosen = set(shots)
        pool = tuple(index for index in range(n_items) if index not in chosen)
    if num_questions is None:
        num_questions = len(pool)
    if not 1 <= num_questions <= len(pool):
        raise SpecsuiteError(
            f"num_questions={num_questions} is outside 1..{len(pool)} "
            f"({n_items} items, {num_shots} shots, shots_from_eval={shots_from_eval})"
        )
    return FewShotPlan(shot_indices=shots, eval_indices=pool[:num_questions], shots_from_eval=shots_from_eval)


def build_prompt(shots: Sequence[GSM8KItem], question: str) -> str:
    """The few-shot prompt for one question."""
    prefix = "".join(f"Question: {shot.question}\nAnswer: {shot.answer}\n\n" for shot in shots)
    return f"{prefix}Question: {question}\nAnswer:"


def build_request(
    prompt: str,
    *,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
) -> GenerationRequest:
    """One question's request (not streamed), with logprobs so the detectors can cross-check ids."""
    # Every field a server could default is sent: the answers judged are the plain softmax's, not a penalised one.
    sampling = pinned(Sampling(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=tuple(STOP_SEQUENCES)))
    return GenerationRequest(prompt=prompt, sampling=sampling, logprobs=True)


def prompt_hash(prompt: str) -> str:
    """Short stable digest of a prompt, to check that two runs asked the same thing."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]
