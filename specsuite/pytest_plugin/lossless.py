"""pytest plugin of the losslessness suite: its options (declared in specsuite/session/option_table.py), the
session-wide workload (run once per setting, cached) and the speculation-off reference
(--lossless-reference-url, alias --reference-url; else the embedded reference server launched
with --speculative-algorithm NONE when the server under test serves its model).

Results are kept typed (`LosslessResults`) and written to results.json's `workloads.lossless` after every test.

Multiplicity: `--alpha` is the lossless family's per-run false-alarm budget. The family is every lossless test
collected (known at collection; a test skipped at run time still counts, which errs toward fewer false alarms),
and each test runs at budget / members (`specsuite.stats.family_budget`), so a correct server fails a run with
probability at most the budget, however many settings are tested.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.lossless.directed import DraftSampling, acceptance_betting_test, draft_sampling_of, top_token_rate_test
from specsuite.families.lossless.records import LosslessDirected, LosslessGreedy, LosslessPit, LosslessResults, LosslessTwoSample
from specsuite.families.lossless.reference import ReferenceServer, open_reference
from specsuite.families.lossless.workload import LosslessConfig, LosslessWorkload, SamplingSetting, draft_steps_of
from specsuite.server import kinds
from specsuite.server.sampling_pins import model_generation_defaults
from specsuite.server.secrets import load_api_key
from specsuite.session.option_table import add_pytest_options
from specsuite.stats import FamilyBudget, family_budget

if TYPE_CHECKING:
    from specsuite.session.config import RunConfig


LOSSLESS_MARKER = "lossless"
FAMILY_KEY = pytest.StashKey[int]()  # how many lossless tests were collected


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "lossless")  # --lossless-* (specsuite/session/option_table.py)


def lossless_family_size(items: list[pytest.Item]) -> int:
    """The lossless tests of this run: collected, selected and not skipped by a mark (an empty parametrization)."""
    return sum(1 for item in items if item.get_closest_marker(LOSSLESS_MARKER) and not item.get_closest_marker("skip"))


@pytest.hookimpl(trylast=True)  # after -m/-k deselection
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[FAMILY_KEY] = lossless_family_size(items)


def family_of(config: pytest.Config, run_config: RunConfig) -> FamilyBudget:
    """The run's budget (--alpha) split over the lossless tests collected."""
    return family_budget(run_config.alpha, max(1, config.stash.get(FAMILY_KEY, 1)))


def run_config_of(config: pytest.Config) -> RunConfig:
    # Imported late, as the other plugins do: an early import of specsuite.pytest_plugin.core defeats its assertion rewriting.
    from specsuite.pytest_plugin.core import specsuite_session

    return specsuite_session(config).run_config


def model_defaults_of(server: Any) -> dict[str, Any] | None:
    """What the server under test would fill into a request that left its sampling fields out: the model folder's
    generation_config.json values of its kind's list (None when the folder is not on this machine), with vLLM's
    generation-config source where its development /server_info names it. The requests override every one."""
    identity = server.identity
    kind = kinds.kind_of_client(server.client)
    defaults = model_generation_defaults((identity.tokenizer_path, identity.model_path), kind.model_sampling_defaults)
    # Where the server says which defaults it uses: vLLM's development /server_info `generation_config` ("auto": the
    # model's, "vllm": none, or a folder); SGLang's /server_info `sampling_defaults` ("model" or "openai").
    source = next((identity.server_args[key] for key in ("generation_config", "sampling_defaults") if key in identity.server_args), None)
    if defaults is not None and source is not None:
        defaults = {**defaults, "source": source}
    return defaults


def lossless_config(run_config: RunConfig, family: FamilyBudget | None = None) -> LosslessConfig:
    """The workload config from the run configuration's lossless section, each test at its share of the run's budget;
    bad values raise a one-line SpecsuiteError."""
    alpha = run_config.alpha if family is None else family.per_test_alpha
    return run_config.lossless.workload_config(alpha=alpha, seed=run_config.seed)


class LosslessSession:
    """The lossless workload of one pytest session: runs each test's requests once, keeps its typed results
    and writes them to results.json after each."""

    def __init__(self, specsuite: Any, config: LosslessConfig, reference: ReferenceServer, family: FamilyBudget | None = None) -> None:
        server = specsuite.server
        self.specsuite = specsuite
        self.reference = reference
        self.family = family or family_budget(config.alpha, 1)
        self.workload = LosslessWorkload(server.client, reference.client, [p.prompt for p in specsuite.prompts], config,
                                         draft_steps_of(server.identity), vocab_size=server.vocab.vocab_size)
        # The session's workloads map holds each section as results.json writes it; a section already there is kept.
        self.results = LosslessResults.from_dict(specsuite.workloads.get("lossless") or {})
        self.model_defaults = model_defaults_of(server)
        self.results.update(config={**_config_dict(config), "family": self.family.to_dict()}, reference=reference.description,
                            draft_steps=self.workload.draft_steps, model_sampling_defaults=self.model_defaults, pit={}, two_sample={})
        self._publish()

    def _publish(self) -> None:
        """The results as the session's next results.json write takes them (`workloads.lossless`)."""
        self.specsuite.workloads["lossless"] = self.results.to_dict()

    def _write(self) -> None:
        self._publish()
        self.specsuite.write_results("running")

    def require_reference(self) -> None:
        if self.reference.client is None:
            pytest.skip(self.reference.unavailable_reason or "no reference server")

    def pit(self, setting: SamplingSetting) -> LosslessPit:
        if setting.key not in self.results.pit:
            index = self.workload.config.settings.index(setting)
            self.results.pit[setting.key] = self.workload.pit(setting, index)
            self._write()
        return self.results.pit[setting.key]

    def two_sample(self, setting: SamplingSetting) -> LosslessTwoSample:
        self.require_reference()
        if setting.key not in self.results.two_sample:
            index = self.workload.config.settings.index(setting)
            self.results.two_sample[setting.key] = self.workload.two_sample(setting, index)
            self._write()
        return self.results.two_sample[setting.key]

    def directed_settings(self) -> list[SamplingSetting]:
        """Settings whose tempered scoring is the distribution the server samples from: top_p 1."""
        return [s for s in self.workload.config.settings if s.top_p == 1.0]

    def directed(self) -> LosslessDirected:
        """The tests aimed at over-acceptance (specsuite/families/lossless/directed.py), pooled over the
        PIT and two-sample generations of the eligible settings (run here if not yet; no extra requests)."""
        if self.results.directed is None:
            settings = self.directed_settings()
            if not settings:
                pytest.skip("no lossless setting with top_p 1: nothing exact to test the mode rate on")
            for setting in settings:
                self.pit(setting)
                if self.reference.client is not None:
                    self.two_sample(setting)
            sources = {f"{s.key} {source}": requests for s in settings for source, requests in self.workload.directed[s.key].items()}
            positions = [p for requests in sources.values() for request in requests for p in request]
            alpha = self.workload.config.alpha
            self.results.put("directed", LosslessDirected.written(
                settings=[s.key for s in settings],
                sources={name: sum(map(len, requests)) for name, requests in sources.items()},
                top_token_rate=top_token_rate_test(positions, alpha),
                acceptance_betting=acceptance_betting_test(positions, alpha),
            ))
            self._write()
        return self.results.directed

    def draft_sampling(self) -> DraftSampling:
        """How the server under test's draft picks its tokens, where it says (greedy unless told otherwise)."""
        return draft_sampling_of(self.specsuite.server.identity.server_args)

    def greedy(self) -> LosslessGreedy:
        self.require_reference()
        if self.results.greedy is None:
            self.results.put("greedy", self.workload.greedy())
            self._write()
        return self.results.greedy


def _config_dict(config: LosslessConfig) -> dict[str, Any]:
    return {
        "settings": [s.key for s in config.settings],
        "pit_requests": config.pit_requests,
        "pit_max_new_tokens": config.pit_max_new_tokens,
        "top_k": config.top_k,
        "two_sample_prompts": config.two_sample_prompts,
        "two_sample_size": config.two_sample_size,
        "greedy_prompts": config.greedy_prompts,
        "greedy_max_new_tokens": config.greedy_max_new_tokens,
        "greedy_concurrencies": list(config.greedy_concurrencies),
        "numerics_gap": config.numerics_gap,
        "concurrency": config.concurrency,
        "alpha": config.alpha,
        "seed": config.seed,
    }


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lossless_setting" in metafunc.fixturenames:
        try:
            settings = list(run_config_of(metafunc.config).lossless.settings)
        except SpecsuiteError:
            settings = []  # reported once, by the lossless fixture
        metafunc.parametrize("lossless_setting", settings, ids=[s.key for s in settings])
    if "lossless_tail_setting" in metafunc.fixturenames:
        try:
            settings = [s for s in run_config_of(metafunc.config).lossless.settings if s.judges_tail_by_bounds]
        except SpecsuiteError:
            settings = []
        metafunc.parametrize("lossless_tail_setting", settings, ids=[s.key for s in settings])


@pytest.fixture(scope="session")
def lossless(specsuite: Any, pytestconfig: pytest.Config) -> Iterator[LosslessSession]:
    """The session's lossless workload; the embedded reference is stopped at the end."""
    problem = None
    try:
        run_config = specsuite.run_config
        family = family_of(pytestconfig, run_config)
        config = lossless_config(run_config, family)
        reference = open_reference(
            reference_url=run_config.lossless.reference_url, api_key=load_api_key(),
            test_model_path=specsuite.server.identity.model_path, log_dir=specsuite.run_dir.path,
            ready_timeout_s=run_config.server.ready_timeout_s,
        )
    except SpecsuiteError as exc:
        problem = str(exc)
    if problem is not None:
        pytest.fail(f"lossless setup: {problem}", pytrace=False)  # outside the except: one line, no chained traceback
    try:
        yield LosslessSession(specsuite, config, reference, family)
    finally:
        reference.close()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line per lossless result with its sample size and smallest detectable effect."""
    # Looked up at run time: importing specsuite.pytest_plugin.core here would defeat its assertion rewriting.
    core = config.pluginmanager.get_plugin("specsuite.pytest_plugin.core")
    written = core.specsuite_session(config).workloads.get("lossless") if core else None
    results = LosslessResults.from_dict(written or {})  # what the session wrote to results.json
    lines = []
    family = results.config.get("family")
    if family:
        lines.append(FamilyBudget(**family).describe())
    for key, pit in results.pit.items():
        test = pit.test
        lines.append(f"PIT {key}: n={test.n} p={test.p_value:.3g} MDE(TV, 80%) body {test.mde_tv_body:.4f} "
                     f"tail {test.mde_tv_tail:.5f}; outside nucleus {pit.outside_support}")
    for key, two_sample in results.two_sample.items():
        homogeneity, calibration = two_sample.homogeneity, two_sample.calibration
        lines.append(f"two-sample {key}: {two_sample.prompts}x{two_sample.samples_per_prompt} per server, chi-square p={homogeneity.p_value:.3g}; "
                     f"log-likelihood z={calibration.z:.2f} p={calibration.p_value:.3g} (MDE {calibration.mde_nats:.3f} nats)")
    directed = results.directed
    if directed is not None:
        rate, bet = directed.top_token_rate, directed.acceptance_betting
        lines.append(f"mode rate ({', '.join(directed.settings)}): n={rate.n} excess {rate.excess_rate or 0:+.4f} per position "
                     f"z={rate.z:.2f} p={rate.p_value:.3g} (MDE {rate.mde_excess_rate or 0:.4f}); acceptance betting: "
                     f"{bet.draft_positions} draft positions, max log e-value {bet.max_log_e_value:.2f}, p={bet.p_value:.3g}")
    greedy = results.greedy
    if greedy is not None:
        runs = ", ".join(f"c={run.concurrency}: {run.equal}/{run.prompts} equal, {run.numerics} numerics, {run.real} real"
                         for run in greedy.concurrencies)
        rule = greedy.near_tie
        lines.append(f"greedy: {runs}" + (f" ({rule.dtype or 'given'} tolerance {rule.tolerance:.3g} nats)" if rule else ""))
    if lines:
        terminalreporter.section("specsuite lossless")
        for line in lines:
            terminalreporter.write_line(line)
