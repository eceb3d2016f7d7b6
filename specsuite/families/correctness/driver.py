"""The correctness family's workload driver: the sampling grid of the run, each case run once per session on the server
under test, and the same case on the A/B baseline (--baseline-url) or the speculation-off reference
(--lossless-reference-url) when a suite asks for it (each reached on first use, closed with the session).

Every front end reads the grid here (`grid`, computed once from the run configuration), so the pytest plugin's
parametrization and the cases run are the same list.
"""

from __future__ import annotations

from functools import cached_property

from specsuite.families.correctness.prompts import PromptItem, load_prompts
from specsuite.families.correctness.workload import PROFILES, CaseResult, Profile, SamplingCase, run_case, sampling_grid
from specsuite.families.workload_driver import DriverSession, WorkloadDriver
from specsuite.server.session import ServerOptions, ServerUnderTest, open_server


class CorrectnessDriver(WorkloadDriver):
    """The session's sampling cases: on the server under test, the baseline and the lossless reference, each cached."""

    def __init__(self, session: DriverSession) -> None:
        super().__init__(session)
        self.cases: dict[str, CaseResult] = {}
        self.prompts: list[PromptItem] = []
        self.baseline: ServerUnderTest | None = None
        self.baseline_cases: dict[str, CaseResult] = {}
        self.reference: ServerUnderTest | None = None
        self.reference_cases: dict[str, CaseResult] = {}

    @cached_property
    def grid(self) -> list[SamplingCase]:
        """The run's sampling grid (--temperatures x --top-p, T=0 once); a bad setting raises its one-line error."""
        settings = self.session.config.correctness
        return sampling_grid(list(settings.temperatures), list(settings.top_p))

    @property
    def sampled(self) -> list[SamplingCase]:
        """The grid's cases that sample (T > 0)."""
        return [case for case in self.grid if not case.greedy]

    @property
    def profile(self) -> Profile:
        return PROFILES[self.session.config.profile]

    def started(self) -> None:
        self.prompts = load_prompts(self.session.config.prompts)

    def case_result(self, case: SamplingCase) -> CaseResult:
        """Run a case once per session on the server under test; later calls read the cached result."""
        session = self.session
        if case.case_id not in self.cases:
            assert session.server is not None
            with session.watch(f"case {case.case_id}"):
                self.cases[case.case_id] = run_case(
                    session.server.client, session.server.vocab, case, self.prompts, self.profile, seed=session.config.seed,
                    record_sink=session.writer.write if session.writer else None, guard=session.guard,
                )
            session.write_results("running")
        return self.cases[case.case_id]

    def baseline_case_result(self, case: SamplingCase) -> CaseResult:
        """The same case on the --baseline-url server (connected on first use)."""
        if self.baseline is None:
            self.baseline = self._open_other_server(self.session.config.baseline_url, "baseline")
        fresh = case.case_id not in self.baseline_cases
        result = self._case_on(self.baseline, self.baseline_cases, "baseline", case)
        if fresh:
            self.session.write_results("running")
        return result

    def reference_case_result(self, case: SamplingCase) -> CaseResult:
        """The same case on the speculation-off server of --lossless-reference-url (connected on first use): the
        correctness suite's padded-row rate where the server under test cannot score per-id logprobs (vLLM)."""
        if self.reference is None:
            self.reference = self._open_other_server(self.session.config.lossless.reference_url, "lossless-reference")
        return self._case_on(self.reference, self.reference_cases, "lossless-reference", case)

    def _open_other_server(self, url: str | None, arm: str) -> ServerUnderTest:
        options = self.session.config.server
        return open_server(ServerOptions(server_url=url, arm=arm, tokenizer=options.tokenizer, vocab_size=options.vocab_size,
                                         api_key=options.api_key, admin_api_key=options.admin_api_key), self.session.run_dir.path)

    def _case_on(self, server: ServerUnderTest, cache: dict[str, CaseResult], arm: str, case: SamplingCase) -> CaseResult:
        """`case` run once on `server`, its records under `arm`, kept in `cache`."""
        if case.case_id not in cache:
            session = self.session
            writer = session.run_dir.record_writer(arm)
            with session.watch(f"{arm} case {case.case_id}"):
                cache[case.case_id] = run_case(server.client, server.vocab, case, self.prompts, self.profile,
                                               seed=session.config.seed, record_sink=writer.write, guard=session.guard)
        return cache[case.case_id]

    def warnings(self) -> list[str]:
        return [line for result in self.cases.values() for line in result.warnings]

    def close(self) -> None:
        for server in (self.baseline, self.reference):
            if server is not None:
                server.close()
