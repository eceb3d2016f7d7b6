"""pytest plugin of the integrity suite: its options (declared in specsuite/session/option_table.py), the
checked client every suite uses, and the probe that the tests in suites/test_integrity.py drive.

At session start (after the main plugin resolved the server) the session's client is replaced by its kind's
checking client (`ServerKind.checking_client`: on SGLang a `CheckingClient`, so every /generate answer any suite
receives runs through `specsuite.server.kinds.sglang.integrity_rules`; on vLLM the vLLM rules). The probe asks
every kind the same typed native calls (`ServerClient.generate_native`, `stream_native`);
violations are recorded with the id of the test that caused them, stored in results.json under
`workloads.integrity_checks`, and asserted to be zero by the suite's session audit, which this
plugin moves to the end of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.integrity.comparisons import compare_answers
from specsuite.families.integrity.native_answer import ids_if_any, output_ids_of, text_of
from specsuite.families.integrity.near_ties import describe, numerics_flip
from specsuite.families.integrity.recorder import CheckingOpenAIClient, IntegrityRecorder
from specsuite.families.integrity.records import IntegrityResults, IntegrityTestOutcome
from specsuite.families.integrity.wiring import checking_client, checking_openai_client
from specsuite.families.lossless.greedy import TOP_CANDIDATES, NearTie, near_tie_of
from specsuite.server import kinds, refserver_contract
from specsuite.server.bench_answers import model_type_of
from specsuite.server.generated_text import text_context
from specsuite.server.native_answers import stop_seen_at, stream_finals
from specsuite.server.protocol import GenerationRequest, NativeGenerationRequest, Sampling, native_payload
from specsuite.session.option_table import add_pytest_options

if TYPE_CHECKING:
    from specsuite.pytest_plugin.core import SpecsuiteSession

RECORDER_KEY = pytest.StashKey[IntegrityRecorder]()
AUDIT_TEST = "test_every_answer_in_the_session_passed_integrity"
REFERENCE_MODEL_TYPE = refserver_contract.MODEL_TYPE  # the reference server always honours sampling_seed
REFERENCE_LENGTH = 64
WORKERS = 8
MAX_DIVERGENCES_KEPT = 20

# T=0 prompts that invite long, repetitive continuations (long accepted blocks under speculation).
REPETITIVE_PROMPTS = (
    "Repeat the following line ten times, one per line:\nThe user wants train times from Lowwood to Willowcliff.\n",
    "Count from one to forty in words: one, two, three, four, five, six,",
    "Question: A mug normally costs $28, but during a sale the price is cut by 50%. During the sale, how much do 7 mugs cost Brenda Baxter?\nAnswer:",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup, "integrity")  # --assume-deterministic and the --integrity-* sizes (specsuite/session/option_table.py)


def specsuite_session(config: pytest.Config) -> SpecsuiteSession:
    # Imported late: loaded with -p, this plugin comes in before specsuite.pytest_plugin.core is registered
    # for assertion rewriting, and an early import would make pytest warn about it.
    from specsuite.pytest_plugin.core import specsuite_session as session_of

    return session_of(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Wrap the session's client once the main plugin has resolved the server (after collection)."""
    state = specsuite_session(session.config)
    if state.server is None:
        return
    recorder = IntegrityRecorder()
    try:  # --integrity-stop-offsets and --integrity-batch-size were range-checked at session start (their Option.bounds)
        state.server.client = checking_client(state.server, recorder, state.run_config.server.tokenizer)
    except SpecsuiteError as exc:
        raise pytest.UsageError(f"specsuite: {exc}") from None
    session.config.stash[RECORDER_KEY] = recorder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The session audit runs last, after every suite has made its requests."""
    items.sort(key=lambda item: getattr(item, "originalname", item.name) == AUDIT_TEST)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Label violations with the test whose fixtures or body made the request."""
    recorder = item.config.stash.get(RECORDER_KEY, None)
    if recorder is not None:
        recorder.source = item.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Put the tally into results.json (the main plugin writes the file after this hook)."""
    recorder = session.config.stash.get(RECORDER_KEY, None)
    if recorder is not None:
        specsuite_session(session.config).workloads["integrity_checks"] = recorder.totals().to_dict()


@pytest.fixture(scope="session")
def integrity_recorder(specsuite: SpecsuiteSession) -> IntegrityRecorder:
    recorder = specsuite.config.stash.get(RECORDER_KEY, None)
    if recorder is None:
        pytest.skip("integrity checks are not wired: load specsuite.pytest_plugin.integrity (-p specsuite.pytest_plugin.integrity)")
    return recorder


@pytest.fixture(scope="session")
def integrity_probe(specsuite: SpecsuiteSession, integrity_recorder: IntegrityRecorder) -> IntegrityProbe:
    client = specsuite.server.client
    assert isinstance(client, kinds.kind_of_client(client).checking_client)
    return IntegrityProbe(specsuite, client, integrity_recorder)


@pytest.fixture(scope="session")
def integrity_openai(integrity_probe: IntegrityProbe) -> CheckingOpenAIClient:
    """The server's OpenAI routes through the same recorder and check context."""
    return checking_openai_client(integrity_probe.specsuite.server, integrity_probe.recorder, context=integrity_probe.client.context)


@dataclass
class Reference:
    """A prompt's T=0 answer and the text of every prefix of its ids (prefix_texts[i]: ids[:i]),
    decoded as SGLang decodes `text`: after the prompt's last few ids (specsuite.server.generated_text)."""

    prompt: str
    answer: dict[str, Any]
    prefix_texts: list[str]

    @property
    def ids(self) -> list[int]:
        return output_ids_of(self.answer)

    @property
    def text(self) -> str:
        return text_of(self.answer)

    def tokens_to_contain(self, fragment: str) -> int | None:
        """The fewest ids whose text contains `fragment` (None: not within the reference)."""
        return next((count for count, text in enumerate(self.prefix_texts) if fragment in text), None)


@dataclass
class IntegrityProbe:
    """Sends the suite's requests through the checked client and keeps per-test results."""

    specsuite: SpecsuiteSession
    client: Any  # the server kind's checking client (ServerKind.checking_client)
    recorder: IntegrityRecorder
    references: dict[str, Reference] = field(default_factory=dict)
    _model_type: str | None = None
    results: IntegrityResults | None = None  # the tests' outcomes, from the first one recorded (workloads.integrity)
    numerics: list[str] = field(default_factory=list)  # near-tie flips of the running test (appended from worker threads)

    @property
    def near_tie(self) -> NearTie:
        """The lossless suite's rule for this server's dtype (--lossless-numerics-gap overrides it)."""
        served = self.specsuite.server.identity.served_dtype
        return near_tie_of([served] if served else [], self.specsuite.run_config.lossless.numerics_gap)

    def numerics_flip(self, label: str, reference: dict[str, Any], answer: dict[str, Any], reference_label: str) -> bool:
        """Whether `answer` leaves the greedy `reference` answer at a near-tie of its top logprobs
        (noted for the running test's record: numerics, not a failure)."""
        flip = numerics_flip(reference, ids_if_any(answer), self.near_tie)
        if flip is not None:
            self.numerics.append(f"{label}: {describe(flip, reference_label)}")
        return flip is not None

    def stream_problems(self, label: str, plain: dict[str, Any], streamed: dict[str, Any] | None, greedy: bool) -> list[str]:
        """`stream_problems`, except that a greedy stream leaving the non-streamed answer at a near-tie is numerics."""
        if greedy and streamed is not None and self.numerics_flip(label, plain, streamed, "the non-streamed answer"):
            return []
        return stream_problems(plain, streamed)

    def take_numerics(self) -> list[str]:
        taken, self.numerics[:] = list(self.numerics), []
        return taken

    @property
    def num_draft_tokens(self) -> int:
        """k: speculative_num_draft_tokens, or 0 when the server does not speculate."""
        identity = self.specsuite.server.identity
        k = identity.speculative_num_draft_tokens if identity.speculative_algorithm else None
        return k if isinstance(k, int) and k > 0 else 0

    @property
    def max_new_tokens_sweep(self) -> list[int]:
        return list(range(1, 2 * self.num_draft_tokens + 4))

    @property
    def kind(self) -> kinds.ServerKind:
        """The server under test's kind: where its documented behaviour differs, its flags say what the tests expect
        (specsuite/server/kinds/ cites each one's source)."""
        return kinds.kind_of_client(self.client)

    def seeds_honoured(self) -> tuple[bool, str]:
        """Whether sampling_seed makes sampling repeatable here, and why we think so."""
        if self.specsuite.run_config.integrity.assume_deterministic:
            return True, "--assume-deterministic"
        if self.kind.seeds_each_request:
            return True, f"{self.kind.display_name} seeds each request's own generator"
        if self.specsuite.server.identity.deterministic_inference:
            return True, "the server reports enable_deterministic_inference"
        if self._model_type is None:
            self._model_type = str(model_type_of(self.client.model_info()))
        if self._model_type == REFERENCE_MODEL_TYPE:
            return True, "the reference server always honours sampling_seed"
        return False, ("SGLang ignores sampling_seed without --enable-deterministic-inference and /server_info reports it "
                       "off; pass --assume-deterministic if this server honours seeds anyway")

    def batch_invariance(self) -> tuple[bool, str]:
        """Whether a seeded answer may be compared byte for byte with the same request run in another batch (alone,
        streamed, in a native batch, among concurrent requests), and why. That holds only where the seed is honoured
        and the server promises batch-invariant numerics: on a GPU a correct server's logits move with the batch
        (sigma 0.005 to 0.03), so a seeded 64-token answer differs in 12% to 45% of such comparisons without it."""
        honoured, reason = self.seeds_honoured()
        if not honoured or reason in ("--assume-deterministic", "the reference server always honours sampling_seed"):
            return honoured, reason
        kind = self.kind
        promised = kind.batch_invariance(self.specsuite.server.identity.server_args) if kind.batch_invariance else None
        if promised:
            return True, f"{kind.display_name} reports batch-invariant numerics"
        seen = "reports it off" if promised is False else "does not say"
        return False, (f"{kind.display_name} does not promise batch-invariant numerics ({seen}: SGLang "
                       f"--enable-deterministic-inference, vLLM VLLM_BATCH_INVARIANT=1 seen on VLLM_SERVER_DEV_MODE's "
                       f"/server_info): a seeded answer may change with its batch on a correct server; pass "
                       f"--assume-deterministic where it holds")

    def reference(self, prompt: str) -> Reference:
        """The prompt's T=0 answer (REFERENCE_LENGTH ids at most) and its prefix texts, cached."""
        if prompt not in self.references:
            answer = self.generate(greedy_request(prompt, REFERENCE_LENGTH))
            ids = output_ids_of(answer)
            # SGLang's text is decoded in context; /detokenize of the ids alone can differ (a
            # SentencePiece tokenizer drops the first word's space), so decode with the context.
            context = text_context(self.client.tokenize(prompt))
            shown = len(self.client.detokenize(context, skip_special_tokens=True)) if context else 0
            texts = self.map(lambda count: self.client.detokenize([*context, *ids[:count]], skip_special_tokens=True)[shown:],
                             range(len(ids) + 1))
            self.references[prompt] = Reference(prompt, answer, texts)
        return self.references[prompt]

    def stop_ends_at(self, reference: Reference, stop: str) -> int | None:
        """The id count at which a request with this stop string ends: the fewest reference ids
        whose text holds it, when SGLang's stop check can see it there (its tail holds about as
        many ids as the string encodes to, so a string the model spelled in more ids is never
        seen, specsuite.server.native_answers.stop_seen_at); None when it cannot, and a case placed there would
        only test our guess."""
        count = reference.tokens_to_contain(stop)
        if count is None or self.kind.sees_stop_strings_anywhere or self.client.context.decode is None or self.client.context.encode is None:
            # e.g. vLLM searches the new text plus len(stop) - 1 characters before it, so it sees every
            # string wherever it was spelled (v1/engine/detokenizer.py:321-370).
            return count
        return count if stop_seen_at(stop, reference.ids, self.client.context) == count else None

    def generate(self, request: GenerationRequest) -> Any:
        """The server's native answer to one typed request (`ServerClient.generate_native`)."""
        return self.client.generate_native(NativeGenerationRequest.one(request)).raw

    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[dict[str, Any]]:
        """The answers to one native batch of these members, each with its own sampling (`NativeGenerationRequest.batch_of`)."""
        return self.client.generate_native(NativeGenerationRequest.batch_of(requests)).results

    def both_ways(self, probe: GenerationRequest | Sequence[GenerationRequest]) -> tuple[Any, list[dict[str, Any] | None]]:
        """The non-streamed answer and what the streamed answer adds up to, per result, for one
        request or one native batch of them."""
        native = NativeGenerationRequest.one(probe) if isinstance(probe, GenerationRequest) else NativeGenerationRequest.batch_of(probe)
        plain = self.client.generate_native(native).raw
        chunks = list(self.client.stream_native(native))
        return plain, stream_finals(native.payload(), chunks, self.client.context.incremental_streaming)

    def map(self, function: Callable[[Any], Any], values: Any) -> list[Any]:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            return list(pool.map(function, values))

    def record(self, name: str, cases: int, failures: list[str], divergences: list[str] | None = None,
               numerics: list[str] | None = None) -> None:
        """Store a test's outcome under workloads.integrity.tests and rewrite results.json.
        `divergences`: answers that follow SGLang's rule where a non-speculative run would answer
        otherwise (a finding, not a failure); also listed under workloads.integrity.divergences.
        `numerics`: greedy answers that left the expected one at a near-tie (the rule under
        workloads.integrity.near_tie), not checked further."""
        if self.results is None:
            self.results = IntegrityResults.written(num_draft_tokens=self.num_draft_tokens, tests={})
        self.results.put("near_tie", self.near_tie.record())
        outcome = IntegrityTestOutcome.written(cases=cases, failures=len(failures), examples=failures[:5])
        if numerics:
            outcome.update(numerics=len(numerics), numerics_examples=numerics[:5])
        if divergences:
            outcome.put("divergences", len(divergences))
            self.results.divergences[name] = divergences[:MAX_DIVERGENCES_KEPT]
            self.results.put("divergences", self.results.divergences)
        self.results.tests[name] = outcome
        self.specsuite.workloads["integrity"] = self.results.to_dict()
        self.specsuite.workloads["integrity_checks"] = self.recorder.totals().to_dict()
        self.specsuite.write_results("running")


def greedy_request(prompt: str, max_new_tokens: int, **sampling: Any) -> GenerationRequest:
    """T=0 with the sampled ids' logprobs and the top few per position (a near-tie is judged on them);
    `sampling`: more `Sampling` fields (stop, stop_token_ids, ...)."""
    return GenerationRequest(prompt=prompt, sampling=Sampling(temperature=0, max_new_tokens=max_new_tokens, **sampling), logprobs=True,
                             top_logprobs=TOP_CANDIDATES)


def greedy_payload(prompt: str, max_new_tokens: int, **params: Any) -> dict[str, Any]:
    """`greedy_request`'s /generate body, for callers that name the params as SGLang does (the tests)."""
    sampling = Sampling.from_params({"temperature": 0, "max_new_tokens": max_new_tokens, **params})
    return native_payload(GenerationRequest(prompt=prompt, sampling=sampling, logprobs=True))


def stream_problems(plain: dict[str, Any], streamed: dict[str, Any] | None) -> list[str]:
    """How the streamed answer differs from the non-streamed one (empty when byte-identical)."""
    if streamed is None:
        return ["the stream carried no chunk for this request"]
    return [f"stream vs non-stream: {difference}" for difference in compare_answers(plain, streamed)]
