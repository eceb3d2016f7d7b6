"""The losslessness workload: sends the requests of the PIT, two-sample and greedy-equality tests
and turns the answers into JSON-ready results. The pytest suite and the false-alarm bench call it.

The server under test samples; the reference is the same model with speculation off. PIT scoring
runs on the server under test (its prefill is the target); the two-sample log-likelihood is
scored on the reference, for both arms alike. Scoring returns raw (temperature 1) logprobs, as
SGLang's and vLLM's prompt logprobs are; the PIT and the directed tests apply the sampling temperature
themselves (tempering.py), and the log-likelihood is the raw one, the same statistic for both arms.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.batch import generate_one, output_ids_of, parallel_map, request_seed, tokenize_prompts
from specsuite.families.lossless.directed import DirectedPosition, directed_positions
from specsuite.families.lossless.greedy import (
    TOP_CANDIDATES,
    NearTie,
    NearTieCounts,
    ReferenceOutput,
    compare_greedy,
    control_rule,
    judge_output,
    near_tie_of,
    top_entries,
)
from specsuite.families.lossless.pit import nucleus_decided, pit_decision, pit_values
from specsuite.families.lossless.records import (
    LoglikCalibration,
    LosslessGreedy,
    LosslessPit,
    LosslessSetting,
    LosslessTwoSample,
    PitTailRate,
    PitUniformity,
    SpecCoverageRecord,
    TokenHomogeneity,
    TwoSampleTailMass,
)
from specsuite.families.lossless.scoring import ScoredPosition, parse_scoring, scoring_request
from specsuite.families.lossless.tempering import TemperedPosition, tempered
from specsuite.families.lossless.two_sample import UNDECIDED, homogeneity_test, loglik_calibration, tail_mass_test
from specsuite.server.generation import Generation
from specsuite.server.identity import ServerIdentity
from specsuite.server.meta_info import MetaInfo
from specsuite.server.protocol import GenerationRequest, Sampling, ServerClient
from specsuite.server.sampling_pins import pinned
from specsuite.server.served_dtype import served_dtype_of

DEFAULT_DRAFT_STEPS = 5  # SGLang's chain default for EAGLE with topk 1 when the server does not say


@dataclass(frozen=True)
class SamplingSetting:
    """One sampled setting of the lossless tests."""

    temperature: float
    top_p: float = 1.0

    @property
    def key(self) -> str:
        return f"t={self.temperature:g}-top_p={self.top_p:g}"

    def params(self) -> dict[str, float]:
        return {"temperature": self.temperature, "top_p": self.top_p}

    @property
    def judges_tail_by_bounds(self) -> bool:
        """The PIT takes this setting given the top-K and bounds the tail's mass only loosely (T != 1, top_p 1):
        the two-sample tail-mass test judges it against the reference's draws."""
        return self.temperature != 1.0 and self.top_p >= 1.0

    def sampling(self, max_new_tokens: int, seed: int | None = None) -> Sampling:
        """The generation request's sampling: every field a server could default is sent (sampling_pins), so the
        distribution judged is this setting's, whatever the model's generation_config.json says."""
        return pinned(Sampling(temperature=self.temperature, top_p=self.top_p, max_new_tokens=max_new_tokens, seed=seed))

    def record(self, max_new_tokens: int) -> LosslessSetting:
        """The setting with the exact sampling parameters its requests sent (the seed differs per request)."""
        sent = {name: value for name, value in self.sampling(max_new_tokens).params().items() if name != "sampling_seed"}
        return LosslessSetting.written(temperature=self.temperature, top_p=self.top_p, sampling_params=sent)


@dataclass(frozen=True)
class LosslessConfig:
    """Sizes and knobs. The defaults are the CI sizes (the package docstring gives their power)."""

    settings: tuple[SamplingSetting, ...] = (SamplingSetting(1.0), SamplingSetting(0.7, 0.9))
    pit_requests: int = 300
    pit_max_new_tokens: int = 16
    top_k: int = 20
    two_sample_prompts: int = 4
    two_sample_size: int = 200
    greedy_prompts: int = 24
    greedy_max_new_tokens: int = 64
    greedy_concurrencies: tuple[int, ...] = (1, 8, 32)
    concurrency: int = 48
    numerics_gap: float | None = None  # None: from the served dtype (NearTie)
    alpha: float = 0.001
    seed: int = 0

    def check(self) -> None:
        for name in ("pit_requests", "pit_max_new_tokens", "top_k", "two_sample_prompts", "two_sample_size",
                     "greedy_prompts", "greedy_max_new_tokens", "concurrency"):
            if getattr(self, name) < 1:
                raise SpecsuiteError(f"lossless {name.replace('_', ' ')} must be at least 1, got {getattr(self, name)}")
        if self.pit_max_new_tokens < 2:
            raise SpecsuiteError("the PIT needs at least 2 new tokens per request (position 1 comes from prefill)")
        if not self.greedy_concurrencies or min(self.greedy_concurrencies) < 1:
            raise SpecsuiteError("greedy concurrencies must be positive integers")
        if not 0.0 < self.alpha < 1.0:
            raise SpecsuiteError(f"alpha must be in (0, 1), got {self.alpha}")


@dataclass
class SpecCoverage:
    """How much of what was tested came from accepted drafts (positions >= 2)."""

    verify_steps: int = 0
    accepted_drafts: int = 0
    positions_after_first: int = 0

    @classmethod
    def of(cls, results: Sequence[tuple[dict[str, Any], list[int]]]) -> SpecCoverage:
        """From (meta_info, output_ids) pairs; SGLang reports the spec counts on finished responses."""
        coverage = cls()
        for meta, output in results:
            counts = MetaInfo.parse(meta)
            coverage.verify_steps += int(counts.spec_verify_ct or 0)
            coverage.accepted_drafts += int(counts.spec_num_correct_drafts or 0)
            coverage.positions_after_first += max(0, len(output) - 1)
        return coverage

    def record(self) -> SpecCoverageRecord:
        share = self.accepted_drafts / self.positions_after_first if self.positions_after_first else None
        return SpecCoverageRecord.written(**asdict(self), accepted_draft_share=share)


def draft_steps_of(identity: ServerIdentity) -> int:
    """k, the drafts per verify step, from the server's speculative settings."""
    steps = identity.speculative_num_steps
    drafts = identity.speculative_num_draft_tokens
    if isinstance(drafts, int) and drafts > 1:
        return drafts - 1
    if isinstance(steps, int) and steps > 0:
        return steps
    return DEFAULT_DRAFT_STEPS


@dataclass
class LosslessWorkload:
    """Runs the lossless tests of one server under test against one reference."""

    test: ServerClient
    reference: ServerClient | None
    prompts: Sequence[str]
    config: LosslessConfig = field(default_factory=LosslessConfig)
    draft_steps: int = DEFAULT_DRAFT_STEPS
    vocab_size: int | None = None  # the sampler's range; bounds the tail at temperatures other than 1
    near_tie: NearTie | None = None  # the greedy comparison's rule; None: from both servers' /server_info dtype
    sampling_numerics: NearTie | None = None  # the server under test's own rule (the PIT's nucleus edge); None: its dtype
    _prompt_ids: list[list[int]] | None = field(default=None, init=False, repr=False)
    # setting key -> source ("pit", "two-sample") -> per request, the positions the directed tests read
    directed: dict[str, dict[str, list[list[DirectedPosition]]]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.config.check()
        if not self.prompts:
            raise SpecsuiteError("the lossless tests need at least one prompt")

    @property
    def prompt_ids(self) -> list[list[int]]:
        if self._prompt_ids is None:
            self._prompt_ids = tokenize_prompts(self.test, self.prompts)
        return self._prompt_ids

    def _reference(self) -> ServerClient:
        if self.reference is None:
            raise SpecsuiteError("this test needs a speculation-off reference server (--lossless-reference-url, or the embedded one)")
        return self.reference

    def _sample(self, client: ServerClient, prompt: list[int], setting: SamplingSetting, max_new_tokens: int, seed: int) -> Generation:
        return generate_one(client, GenerationRequest(prompt_ids=tuple(prompt), sampling=setting.sampling(max_new_tokens, seed)))

    def _score(self, client: ServerClient, prompt: list[int], output: list[int]) -> list[ScoredPosition | None]:
        """The raw (temperature 1) top-K at each generated position: what servers return for prompt positions."""
        return parse_scoring(generate_one(client, scoring_request(prompt, output, self.config.top_k)), output)

    def _teacher_forced(self, client: ServerClient, prompt: Sequence[int], output: Sequence[int]) -> list[ScoredPosition]:
        """`output` scored on `client` at every position, the first included (scoring from the prompt's last id on)."""
        if not output:
            return []
        forced = [prompt[-1], *output]
        answer = generate_one(client, scoring_request(list(prompt[:-1]), forced, TOP_CANDIDATES))
        return [p for p in parse_scoring(answer, forced)[1:] if p is not None]

    def _tempered(self, scored: Sequence[ScoredPosition | None], setting: SamplingSetting) -> list[TemperedPosition | None]:
        return [None if p is None else tempered(p, setting.temperature, self.vocab_size) for p in scored]

    # -- PIT ---------------------------------------------------------------------------------

    def sampling_rule(self) -> NearTie:
        """How far the server under test's sampling logits may sit from its scoring logits (two forwards of one
        server, rounded in its served dtype): the near-tie rule of its dtype, read once."""
        if self.sampling_numerics is None:
            served = [] if self.config.numerics_gap is not None else [served_dtype_of(self.test)]
            self.sampling_numerics = near_tie_of(served, self.config.numerics_gap)
        return self.sampling_numerics

    def pit(self, setting: SamplingSetting, case_index: int = 0) -> LosslessPit:
        """Generate, score on the server under test, and test the PIT of positions >= 2."""
        config, prompts = self.config, self.prompt_ids
        started = time.perf_counter()

        def one(index: int) -> tuple[dict[str, Any], list[int], list]:
            prompt = prompts[index % len(prompts)]
            seed = request_seed(config.seed, "pit", case_index, index)
            result = self._sample(self.test, prompt, setting, config.pit_max_new_tokens, seed)
            output = output_ids_of(result)
            scored = self._tempered(self._score(self.test, prompt, output)[1:], setting) if len(output) > 1 else []
            return result.meta_info, output, scored

        results = parallel_map(one, range(config.pit_requests), config.concurrency)
        self.directed.setdefault(setting.key, {})["pit"] = [directed_positions(meta, output, [None, *scored]) for meta, output, scored in results]
        coverage = SpecCoverage.of([(meta, output) for meta, output, _ in results])
        positions = [p for _, _, scored in results for p in scored if p is not None]
        rule = self.sampling_rule()
        values = pit_values(positions, setting.top_p, request_seed(config.seed, "pit-randomization", case_index, 0),
                            gap=rule.tolerance / setting.temperature)  # logits divided by T: their gaps move by gap / T
        decision = pit_decision(values, config.alpha)  # the uniformity and the tail-rate tests, Bonferroni
        test, tail = decision.uniformity, decision.tail
        return LosslessPit.written(
            setting=setting.record(config.pit_max_new_tokens),
            requests=config.pit_requests,
            max_new_tokens=config.pit_max_new_tokens,
            top_k=config.top_k,
            positions=values.positions,
            unresolved_nucleus=values.unresolved,
            outside_support=values.outside_support,
            given_top_k=tail is not None,
            coverage=coverage.record(),
            test=PitUniformity.from_dict(test.to_dict()),  # the statistic's JSON-ready values (numpy and inf made plain)
            tail=None if tail is None else PitTailRate.from_dict(tail.to_dict()),
            p_value=decision.p_value,
            passed=decision.passed,
            wall_time_s=time.perf_counter() - started,
            nucleus_gap=rule.tolerance / setting.temperature if setting.top_p < 1.0 else None,
            nucleus_rule=rule.describe() if setting.top_p < 1.0 else None,
        )

    # -- two-sample --------------------------------------------------------------------------

    def two_sample(self, setting: SamplingSetting, case_index: int = 0) -> LosslessTwoSample:
        """Same prompts on both servers; chi-square per position 2..k+2 and log-likelihood z."""
        config, reference = self.config, self._reference()
        started = time.perf_counter()
        chosen = self.prompt_ids[: config.two_sample_prompts]
        positions = list(range(2, self.draft_steps + 3))
        max_new_tokens = positions[-1]
        size = config.two_sample_size

        def arm(client: ServerClient, stream: str) -> list[tuple[dict[str, Any], list[int], float, list[DirectedPosition], int]]:
            def one(job: int) -> tuple[dict[str, Any], list[int], float, list[DirectedPosition], int]:
                prompt = chosen[job // size]
                result = self._sample(client, prompt, setting, max_new_tokens, request_seed(config.seed, stream, case_index, job))
                output = output_ids_of(result)
                scored = self._score(reference, prompt, output) if len(output) > 1 else []
                meta = result.meta_info
                tempered_scored = self._tempered(scored, setting)
                return (meta, self._edge_masked(output, tempered_scored, setting), sum(_own_logprob(p) for p in scored[1:]),
                        directed_positions(meta, output, tempered_scored), sum(p is not None and p.token_id not in p.top_ids for p in scored[1:]))

            return parallel_map(one, range(len(chosen) * size), config.concurrency)

        def by_prompt(results: list, column: int) -> list[list[Any]]:
            return [[row[column] for row in results[p * size : (p + 1) * size]] for p in range(len(chosen))]

        test_results = arm(self.test, "two-sample-test")
        reference_results = arm(reference, "two-sample-reference")
        self.directed.setdefault(setting.key, {})["two-sample"] = [row[3] for row in test_results]
        coverage = SpecCoverage.of([(row[0], row[1]) for row in test_results])
        test_outputs, test_loglik = by_prompt(test_results, 1), by_prompt(test_results, 2)
        reference_outputs, reference_loglik = by_prompt(reference_results, 1), by_prompt(reference_results, 2)
        homogeneity = homogeneity_test(test_outputs, reference_outputs, positions, config.alpha)
        calibration = loglik_calibration(test_loglik, reference_loglik, config.alpha)
        # Where the PIT bounds the tail's mass only loosely (T != 1, top_p 1), the reference's draws estimate it.
        tail = (tail_mass_test(by_prompt(test_results, 4), by_prompt(reference_results, 4), config.alpha)
                if setting.judges_tail_by_bounds else None)
        return LosslessTwoSample.written(
            setting=setting.record(max_new_tokens),
            prompts=len(chosen),
            samples_per_prompt=config.two_sample_size,
            positions=positions,
            coverage=coverage.record(),
            homogeneity=TokenHomogeneity.from_dict(homogeneity.to_dict()),  # the statistics' JSON-ready values
            calibration=LoglikCalibration.from_dict(calibration.to_dict()),
            passed=homogeneity.passed and calibration.passed and (tail is None or tail.passed),
            wall_time_s=time.perf_counter() - started,
            tail=None if tail is None else TwoSampleTailMass.from_dict(tail.to_dict()),
        )

    def _edge_masked(self, output: list[int], scored: Sequence[TemperedPosition | None], setting: SamplingSetting) -> list[int]:
        """`output` with the token at each position >= 2 whose nucleus edge the reference's scoring cannot place within
        the numerics gap replaced by UNDECIDED (top_p < 1): there a server whose sampling logits differ from the
        reference's by rounding keeps an edge token in some requests and drops it in others, which moves that token's
        share against a server that always keeps (or drops) it. Whether a position is undecided depends on its context
        only, the same rule in both arms, so one category for all its draws keeps the tables' null."""
        if setting.top_p >= 1.0:
            return output
        gap = self.sampling_rule().tolerance / setting.temperature
        return [UNDECIDED if index and position is not None and not nucleus_decided(position, setting.top_p, gap) else token
                for index, (token, position) in enumerate(zip(output, scored, strict=False))] + output[len(scored):]

    def two_sample_test_arm(self, setting: SamplingSetting, case_index: int = 0) -> int:
        """Only the server-under-test half of `two_sample` (same prompts, sizes and seeds), kept for the
        directed tests; what a power measurement needs without the reference's draws. Returns the count."""
        config, reference = self.config, self._reference()
        chosen = self.prompt_ids[: config.two_sample_prompts]
        max_new_tokens, size = self.draft_steps + 2, config.two_sample_size

        def one(job: int) -> list[DirectedPosition]:
            prompt = chosen[job // size]
            result = self._sample(self.test, prompt, setting, max_new_tokens, request_seed(config.seed, "two-sample-test", case_index, job))
            output = output_ids_of(result)
            scored = self._score(reference, prompt, output) if len(output) > 1 else []
            return directed_positions(result.meta_info, output, self._tempered(scored, setting))

        draws = parallel_map(one, range(len(chosen) * size), config.concurrency)
        self.directed.setdefault(setting.key, {})["two-sample"] = draws
        return len(draws)

    # -- greedy ------------------------------------------------------------------------------

    def greedy(self) -> LosslessGreedy:
        """T=0 outputs of the server under test at each concurrency, each scored teacher-forced on the reference,
        against the reference's own outputs scored the same way (the speculation-off control)."""
        config, reference = self.config, self._reference()
        started = time.perf_counter()
        prompts = [self.prompt_ids[i % len(self.prompt_ids)] for i in range(config.greedy_prompts)]
        greedy = pinned(Sampling(temperature=0.0, max_new_tokens=config.greedy_max_new_tokens))  # penalties act at T=0 too

        def reference_one(prompt: list[int]) -> ReferenceOutput:
            result = generate_one(reference, GenerationRequest(prompt_ids=tuple(prompt), sampling=greedy, logprobs=True,
                                                               top_logprobs=TOP_CANDIDATES))
            tops = MetaInfo.parse(result.meta_info).output_top_logprobs or []
            return ReferenceOutput(output_ids_of(result), [top_entries(entry) for entry in tops])

        references = parallel_map(reference_one, prompts, config.concurrency)
        served = [] if config.numerics_gap is not None else [served_dtype_of(self.test), served_dtype_of(reference)]
        rule = self.near_tie or near_tie_of(served, config.numerics_gap)
        scored: dict[tuple[tuple[int, ...], tuple[int, ...]], list[ScoredPosition]] = {}

        def score_all(outputs: Sequence[list[int]]) -> list[list[ScoredPosition]]:
            keys = [(tuple(p), tuple(o)) for p, o in zip(prompts, outputs, strict=True)]
            missing = list(dict.fromkeys(k for k in keys if k not in scored))
            for key, positions in zip(missing, parallel_map(lambda k: self._teacher_forced(reference, *k), missing, config.concurrency),
                                      strict=True):
                scored[key] = positions
            return [scored[k] for k in keys]

        control_scored = score_all([r.output_ids for r in references])
        # Decode against prefill on the reference itself: a flip of it beyond the tolerance is this node's numerics.
        rule = control_rule(rule, [judge_output(i, r.output_ids, s, None, rule) for i, (r, s) in enumerate(zip(references, control_scored, strict=True))])
        control = NearTieCounts.of([judge_output(i, r.output_ids, s, None, rule) for i, (r, s) in enumerate(zip(references, control_scored, strict=True))])
        by_concurrency = []
        for concurrency in config.greedy_concurrencies:
            outputs = parallel_map(lambda p: output_ids_of(generate_one(self.test, GenerationRequest(prompt_ids=tuple(p), sampling=greedy))),
                                   prompts, concurrency)
            by_concurrency.append(compare_greedy(concurrency, outputs, references, score_all(outputs), rule, control).record())
        return LosslessGreedy.written(
            prompts=len(prompts),
            max_new_tokens=config.greedy_max_new_tokens,
            sampling_params=greedy.params(),
            concurrencies=by_concurrency,
            passed=all(c.passed for c in by_concurrency),
            near_tie=rule.record(),
            wall_time_s=time.perf_counter() - started,
        )


LOGPROB_FLOOR = -100.0  # SGLang clamps impossible tokens to about -3.4e38; squaring that overflows


def _own_logprob(position: Any) -> float:
    """The scored token's target logprob, floored (a missing one would make the log-likelihood meaningless)."""
    if position is None or position.token_logprob is None:
        raise SpecsuiteError("scoring request: a generated token came back without its logprob")
    return max(LOGPROB_FLOOR, position.token_logprob)
