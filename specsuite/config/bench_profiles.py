"""The serving benchmark's defaults, one table: a named profile per size, read by the option table's defaults and by
the one BenchConfig builder (specsuite/session/bench.py) of both front ends.

- "suite": what `pytest suites -m perf` and the main job run: the shape of the draft_probs copy's cost measurement (random 1024 in / 512 out, fixed
  lengths, concurrency 1) over 8 prompts, token-id prompts, a cache flush after warmup, and the run's --seed.
- "bench_serving": what `specsuite bench` runs: SGLang's bench_serving defaults (1000 prompts, random 1024/1024 with
  range ratio 0, no concurrency cap, text prompts, no flush, seed 42), so its commands carry over unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class BenchProfile:
    """One size of the serving benchmark; `seed` None means the run's own --seed."""

    name: str
    num_prompts: int
    random_input_len: int
    random_output_len: int
    random_range_ratio: float
    max_concurrency: int | None
    tokenize_prompt: bool
    flush_cache: bool
    seed: int | None

    def defaults(self) -> dict[str, Any]:
        """The profile's values under BenchConfig's field names (the name left out)."""
        return {key: value for key, value in asdict(self).items() if key != "name"}


SUITE = BenchProfile("suite", num_prompts=8, random_input_len=1024, random_output_len=512, random_range_ratio=1.0, max_concurrency=1,
                     tokenize_prompt=True, flush_cache=True, seed=None)
BENCH_SERVING = BenchProfile("bench_serving", num_prompts=1000, random_input_len=1024, random_output_len=1024, random_range_ratio=0.0,
                             max_concurrency=None, tokenize_prompt=False, flush_cache=False, seed=42)
BENCH_PROFILES = {profile.name: profile for profile in (SUITE, BENCH_SERVING)}
