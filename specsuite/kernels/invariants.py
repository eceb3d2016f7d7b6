"""The kernel suite's invariants: rules a correct sampler keeps on any input, well-formed or not.

Each check takes the input and what the kernel committed and returns an `InvariantOutcome`: how
many rows broke the rule and one example row, described so that it can be rebuilt (class, seed,
row) and read (the ids, q and p involved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsuite.kernels.inputs import ChainInput, sampling_targets
from specsuite.kernels.invoke import ChainOutcome

INVARIANTS = ("valid-ids", "no-unsupported-fallback", "no-invalid-q-accepted", "same-coins-same-output",
              "in-target-support", "greedy-rows-argmax")
INVARIANT_RULES = {
    "in-target-support": "every committed id has positive probability under the target it was sampled for "
                         "(after the row's temperature and top-p)",
    "greedy-rows-argmax": "a greedy row (temperature 0) accepts a draft exactly when it is the target's argmax, "
                          "and commits the argmax where it stops",
    "valid-ids": "every emitted id lies in [0, tokenizer length)",
    "no-unsupported-fallback": "vocab_size-1 is emitted only where the target gives it positive probability",
    "no-invalid-q-accepted": "a draft whose q(X) is not in (0, 1] is never accepted",
    "same-coins-same-output": "the same inputs and coins give the same output, alone, in a small batch and in the full one",
}


@dataclass(frozen=True)
class InvariantOutcome:
    """One invariant on one input class."""

    invariant: str
    input_class: str
    rows: int
    violations: int
    example: dict[str, Any] | None = None  # the first violating row
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.violations == 0

    def message(self) -> str:
        if self.passed:
            return f"{self.invariant} [{self.input_class}]: held on {self.rows} rows"
        return (f"{self.invariant} [{self.input_class}]: {INVARIANT_RULES[self.invariant]} -- broken on "
                f"{self.violations}/{self.rows} rows; e.g. {describe_example(self.example)}")

    def to_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "input_class": self.input_class, "rule": INVARIANT_RULES[self.invariant],
                "rows": self.rows, "violations": self.violations, "passed": self.passed, "example": self.example, **self.details}


def describe_example(example: dict[str, Any] | None) -> str:
    if not example:
        return "-"
    return ", ".join(f"{key} {value}" for key, value in example.items())


def _float(value: float) -> float | str:
    return float(value) if np.isfinite(value) else str(float(value))  # JSON has no inf/nan


def _row_context(data: ChainInput, outcome: ChainOutcome, row: int) -> dict[str, Any]:
    accepted = int(outcome.accepted[row])
    return {"class": data.input_class, "seed": data.seed, "row": row, "accepted": accepted,
            "emitted": [int(v) for v in outcome.emitted[row, : accepted + 1]]}


def check_valid_ids(data: ChainInput, outcome: ChainOutcome) -> InvariantOutcome:
    steps = data.draft_ids.shape[1]
    within = np.arange(steps + 1)[None, :] <= outcome.accepted[:, None]
    bad_count = (outcome.accepted < 0) | (outcome.accepted > steps)
    bad_id = within & ((outcome.emitted < 0) | (outcome.emitted >= data.tokenizer_vocab))
    broken = np.flatnonzero(bad_count | bad_id.any(axis=1))
    example = None
    if broken.size:
        row = int(broken[0])
        example = {**_row_context(data, outcome, row), "tokenizer_vocab": data.tokenizer_vocab}
    return InvariantOutcome("valid-ids", data.input_class, data.batch, int(broken.size), example)


def check_no_unsupported_fallback(data: ChainInput, outcome: ChainOutcome) -> InvariantOutcome:
    """The residual/bonus id is vocab-1 only where the target row it was drawn for gives vocab-1
    positive probability (an accepted draft of vocab-1 is the draft's business, checked elsewhere)."""
    last = data.kernel_vocab - 1
    rows = np.arange(data.batch)
    positions = np.clip(outcome.accepted, 0, data.draft_ids.shape[1])
    p_last = data.target_probs[rows, positions, last]
    broken = np.flatnonzero((outcome.final_ids == last) & ~(p_last > 0))
    example = None
    if broken.size:
        row = int(broken[0])
        example = {**_row_context(data, outcome, row), "fallback_id": last, "p(fallback_id)": _float(p_last[row])}
    return InvariantOutcome("no-unsupported-fallback", data.input_class, data.batch, int(broken.size), example)


def check_no_invalid_q_accepted(data: ChainInput, outcome: ChainOutcome) -> InvariantOutcome:
    batch, steps = data.draft_ids.shape
    q_at = np.take_along_axis(data.draft_probs, data.draft_ids[:, :, None], axis=2)[:, :, 0]
    with np.errstate(invalid="ignore"):
        not_prob = ~((q_at > 0.0) & (q_at <= 1.0))
    accepted_step = np.arange(steps)[None, :] < outcome.accepted[:, None]
    bad = not_prob & accepted_step
    broken = np.flatnonzero(bad.any(axis=1))
    example = None
    if broken.size:
        row = int(broken[0])
        step = int(np.argmax(bad[row]))
        token = int(data.draft_ids[row, step])
        example = {**_row_context(data, outcome, row), "draft_step": step, "draft_id": token,
                   "q(X)": _float(q_at[row, step]), "p(X)": _float(data.target_probs[row, step, token]),
                   "coin": float(data.accept_coins[row, step])}
    return InvariantOutcome("no-invalid-q-accepted", data.input_class, batch, int(broken.size), example)


def check_same_output(data: ChainInput, reference: ChainOutcome, reruns: dict[str, tuple[np.ndarray, ChainOutcome]]) -> InvariantOutcome:
    """`reruns`: label -> (rows of `data` rerun as their own batch, what that call committed)."""
    broken: set[int] = set()
    example = None
    for label, (rows, outcome) in reruns.items():
        differs = (outcome.accepted != reference.accepted[rows]) | (outcome.emitted != reference.emitted[rows]).any(axis=1)
        for local in np.flatnonzero(differs).tolist():
            row = int(rows[local])
            if example is None:
                example = {**_row_context(data, reference, row), "rerun": label, "rerun_accepted": int(outcome.accepted[local]),
                           "rerun_emitted": [int(v) for v in outcome.emitted[local, : outcome.accepted[local] + 1]]}
            broken.add(row)
    checked = sorted({int(r) for rows, _ in reruns.values() for r in rows})
    return InvariantOutcome("same-coins-same-output", data.input_class, len(checked), len(broken), example,
                            {"reruns": {label: len(rows) for label, (rows, _) in reruns.items()}})


def rerun_rows(batch: int) -> dict[str, np.ndarray]:
    """Which rows are rerun on their own: row 0 alone (batch 1) and a strided batch of up to 7."""
    small = np.arange(0, batch, max(1, batch // 7))[:7]
    return {"batch-1": np.array([0]), f"batch-{small.size}": small}


SUPPORT_FLOOR = 1e-20  # a sampled id below this probability is outside the support (masked rows are < 1e-60)


def check_in_target_support(data: ChainInput, outcome: ChainOutcome) -> InvariantOutcome:
    """Every committed id, accepted draft or final token, has probability above SUPPORT_FLOOR under the
    sampling target of its position (float64; top-p cuts in the classes sit clear of any boundary)."""
    targets = sampling_targets(data)
    steps = data.draft_ids.shape[1]
    within = np.arange(steps + 1)[None, :] <= outcome.accepted[:, None]
    ids = np.clip(outcome.emitted, 0, data.kernel_vocab - 1)
    probability = np.take_along_axis(targets, ids[:, :, None], axis=2)[:, :, 0]
    bad = within & ((outcome.emitted < 0) | (outcome.emitted >= data.kernel_vocab) | ~(probability > SUPPORT_FLOOR))
    broken = np.flatnonzero(bad.any(axis=1))
    example = None
    if broken.size:
        row = int(broken[0])
        position = int(np.argmax(bad[row]))
        example = {**_row_context(data, outcome, row), "position": position, "id": int(outcome.emitted[row, position]),
                   "target_probability": _float(probability[row, position])}
        if data.temperature is not None:
            example["temperature"] = float(data.temperature[row])
        if data.top_p is not None:
            example["top_p"] = float(data.top_p[row])
    return InvariantOutcome("in-target-support", data.input_class, data.batch, int(broken.size), example)


def check_greedy_rows(data: ChainInput, outcome: ChainOutcome) -> InvariantOutcome:
    """On rows with temperature 0: accepted = the leading drafts equal to the target's argmax, and the
    committed ids = those drafts then the argmax at the stop (the bonus position's argmax if none stopped)."""
    greedy = np.zeros(data.batch, bool) if data.temperature is None else data.temperature == 0.0
    steps = data.draft_ids.shape[1]
    argmax = data.target_probs.argmax(axis=-1)  # (B, k+1): temperature does not move the argmax
    matches = data.draft_ids == argmax[:, :steps]
    expected_accepted = np.where(matches.all(axis=1), steps, np.argmin(matches, axis=1))
    expected = np.where(np.arange(steps + 1)[None, :] < expected_accepted[:, None],
                        np.concatenate([data.draft_ids, np.full((data.batch, 1), -1)], axis=1), -1)
    expected[np.arange(data.batch), expected_accepted] = argmax[np.arange(data.batch), expected_accepted]
    bad = greedy & ((outcome.accepted != expected_accepted) | (outcome.emitted != expected).any(axis=1))
    broken = np.flatnonzero(bad)
    example = None
    if broken.size:
        row = int(broken[0])
        example = {**_row_context(data, outcome, row), "expected_accepted": int(expected_accepted[row]),
                   "expected_emitted": [int(v) for v in expected[row, : expected_accepted[row] + 1]]}
    return InvariantOutcome("greedy-rows-argmax", data.input_class, int(greedy.sum()), int(broken.size), example)
