"""Losslessness tests: does speculative sampling leave the target distribution unchanged?

Modules: `scoring` (the prefill scoring request), `pit` (randomized PIT and its uniformity test,
power and MDE), `two_sample` (chi-square homogeneity against a speculation-off reference and the
log-likelihood calibration z), `directed` (two tests aimed at over-acceptance: the target-mode rate z
and, with a greedy draft and per-step stats, an acceptance test martingale), `greedy` (T=0 equality and divergence classification), `batch`
(concurrent requests, per-request seeds), `reference` (the reference server), `workload` (runs it
all; used by suites/test_lossless.py and tools/calibration/lossless_false_alarms.py).

Multiplicity: the pytest plugin splits --alpha (0.001), the run's false-alarm budget, evenly over the
lossless tests collected (specsuite/pytest_plugin/lossless.py; 13 in the CI control, each at 7.7e-5), so a
correct server fails a run at most 0.1% of the time however many settings run.

Default sizes and their reach (the figures below were measured at alpha 0.001 per test; measured on the
reference server, 2 shared CPU cores, about 70 s for the whole suite including startup):
- PIT: 300 generations of 16 tokens per setting, about 4,400 positions >= 2, over half of them
  accepted drafts. With 80% power it detects a per-position total-variation shift of 0.027 when
  it falls in one 0.1-wide PIT bin (a mode-seeking sampler) and of 0.0036 when it falls in the
  narrowest top bin (tokens the target finds unlikely, where a too-generous accept rule puts its
  excess). The accept rule min(1, p/q + 0.05) fails with p ~ 1e-23 at T=1.
- Two-sample: 4 prompts x 200 samples per server; conservative MDE of one token's probability
  at one position 0.24 (Bonferroni over prompt-position tables). It and the log-likelihood z
  are the reference-based cross-checks; the PIT carries the sensitivity. At T != 1 with top_p 1
  the tail-mass z compares the tokens outside the reference's top-K per sample with the
  reference's own (`two_sample.tail_mass_test`; its record states the tail-mass ratios it
  detects with 80% power).
- PIT at top_p < 1: a nucleus edge within the served dtype's near-tie gap (bfloat16 0.25 nats,
  / T) is skipped, so sampling-versus-scoring numerics do not put tokens at u = 1.
- Directed (pooled PIT and two-sample draws at top_p 1; on vLLM at T=1 only; no extra requests): the
  mode-rate z caught an acceptance bias min(1, 1.25 p/q) on vLLM in 10 of 10 runs at the vLLM job's sizes
  (p 1e-22 .. 3e-14) where the omnibus PIT caught it in 3 of 10 (tools/calibration/README.md, "Lossless
  power against a planted bias").
- Greedy: 24 prompts x 64 tokens at concurrencies 1, 8, 32, every position scored teacher-forced on the
  reference; a flip is numerics only within the served dtype's tolerance of the reference's top
  (greedy.near_tie_rule: float32 1e-3 nats, float16 0.031, bfloat16 0.25, an fp8 KV cache keeping the
  model's type), and the near-tie flips must not exceed the noise model and the speculation-off
  control (a lossy verify taking the runner-up under 0.25 nats fails; tools/calibration/README.md,
  "Greedy equality's near-tie count, measured").
"""

from specsuite.families.lossless.greedy import GreedyResult, ReferenceOutput, compare_greedy
from specsuite.families.lossless.pit import UniformityResult, pit_values, randomized_pit, uniformity_test
from specsuite.families.lossless.scoring import ScoredPosition, parse_scoring, scoring_request
from specsuite.families.lossless.two_sample import CalibrationResult, HomogeneityResult, homogeneity_test, loglik_calibration
from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload, SamplingSetting

__all__ = [
    "CalibrationResult",
    "GreedyResult",
    "HomogeneityResult",
    "LosslessConfig",
    "LosslessWorkload",
    "ReferenceOutput",
    "SamplingSetting",
    "ScoredPosition",
    "UniformityResult",
    "compare_greedy",
    "homogeneity_test",
    "loglik_calibration",
    "parse_scoring",
    "pit_values",
    "randomized_pit",
    "scoring_request",
    "uniformity_test",
]
