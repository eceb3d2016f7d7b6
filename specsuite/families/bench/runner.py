"""Run one benchmark: build the requests, warm up, optionally flush, send at the chosen arrival
rate under the concurrency cap, read the server's accept length, compute the metrics.

Order of events, as in bench_serving: `warmup_requests` copies of request 0 (output capped at 32
tokens) under the same concurrency cap; POST /flush_cache if asked (this resets the server's
accept-length counters, so `accept_length` then covers the measured requests only; without it
the value includes the warmup and all earlier traffic; the admin key goes with it, and a flush
the server refuses is a warning in the record's `warnings`, with `cache_flushed: false` and no
`accept_length`, not an error); a 1 s pause; the clock starts; request i
is dispatched at offset sum(gap_0..gap_{i-1}) with gaps ~ Exponential(1 / request_rate) drawn
from the seeded RandomState (all at t = 0 when the rate is inf); after the last request, GET
/server_info for `internal_states[0].avg_spec_accept_length`; the clock stops.

The vllm backend (vLLM has no /server_info, /model_info or /flush_cache): the tokenizer defaults
to the `root` of /v1/models (the served model's path); no flush (a requested one is skipped with
a warning); the server-wide accept length is `vllm bench serve`'s, 1 + accepted / drafts from the
`vllm:spec_decode_*` counters of /metrics read just before the clock starts and just after it
stops, so it covers the measured requests only.

Ctrl-C: the requests still running are cancelled, the metrics of those that finished are
computed over the time until the interrupt, and the line is written with status "interrupted"
before KeyboardInterrupt propagates.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

import aiohttp
import numpy as np
import requests
from tqdm import tqdm

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.bench_line import BenchLine
from specsuite.families.bench.client import (
    READ_BUFSIZE,
    RequestOutput,
    RequestSettings,
    send_request,
)
from specsuite.families.bench.context_fit import ContextLimit, fit_lengths, sglang_context_limit, vllm_context_limit
from specsuite.families.bench.datasets import BenchRandom, DatasetRow, build_requests
from specsuite.families.bench.metrics import calculate_metrics
from specsuite.families.bench.record import build_record, detail_arrays
from specsuite.results.store import RecordWriter
from specsuite.server import kinds
from specsuite.server.bench_answers import ModelCard, reported_accept_length, tokenizer_path_of
from specsuite.server.cache_flush import FlushOutcome, flush_before_measurement
from specsuite.server.counters import parse_prometheus
from specsuite.server.idle_connections import MAX_IDLE_S
from specsuite.server.openai_client import OpenAICompletionsClient
from specsuite.server.protocol import ServerClient
from specsuite.server.secrets import redact
from specsuite.server.session import is_reference_emulation
from specsuite.server.tokenizer import LocalTokenizer, load_tokenizer
from specsuite.server.transport import display_url

WARMUP_OUTPUT_CAP = 32
FLUSH_RETRY_S = 10.0
SERVER_ACCEPT_UNMEASURED = "server-wide accept length after flush not measured (accept_length left out)"


@dataclass
class BenchConfig:
    """One run's settings; names and defaults follow bench_serving's flags, except the dataset
    (random, since ShareGPT needs a download) and the connection option."""

    base_url: str
    backend: str = field(default_factory=lambda: kinds.fallback().default_bench_backend)
    model: str | None = None
    tokenizer: str | None = None
    dataset_name: str = "random"
    dataset_path: str | None = None
    num_prompts: int = 1000
    random_input_len: int = 1024
    random_output_len: int = 1024
    random_range_ratio: float = 0.0
    tokenize_prompt: bool = False
    sharegpt_output_len: int | None = None
    sharegpt_context_len: int | None = None
    request_rate: float = math.inf
    max_concurrency: int | None = None
    warmup_requests: int = 1
    flush_cache: bool = False
    seed: int = 42
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = True
    extra_request_body: dict[str, Any] = field(default_factory=dict)
    oai_sampling: bool = False  # ours: send temperature/top_p on the OpenAI backends (bench_serving does not)
    keep_alive: bool = False
    api_key: str | None = None
    admin_api_key: str | None = None  # sent only with /flush_cache
    tag: str | None = None
    output_details: bool = False
    post_warmup_sleep_s: float = 1.0
    read_timeout_s: float = 600.0
    # False: the lengths are a profile's defaults, scaled down to fit the server's context length; True: the
    # user chose them, and a set that does not fit is refused (specsuite/families/bench/context_fit.py).
    lengths_chosen: bool = True

    def check(self) -> None:
        if self.request_rate <= 0 or math.isnan(self.request_rate):
            raise SpecsuiteError(f"--request-rate must be positive (inf sends everything at once), got {self.request_rate}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise SpecsuiteError(f"--max-concurrency must be at least 1, got {self.max_concurrency}")
        if self.warmup_requests < 0:
            raise SpecsuiteError(f"--warmup-requests must be 0 or more, got {self.warmup_requests}")
        if self.random_input_len < 1 and self.dataset_name.startswith("random"):
            raise SpecsuiteError(f"--random-input-len must be at least 1, got {self.random_input_len}")


@dataclass
class _RunState:
    """What a Ctrl-C must still be able to save."""

    outputs: list[RequestOutput | None] = field(default_factory=list)
    start: float | None = None
    duration: float | None = None  # set once the run, /server_info included, is complete
    cache_flushed: bool | None = None  # None: no flush asked for
    warnings: list[str] = field(default_factory=list)
    server_under_test: dict[str, Any] = field(default_factory=dict)


def arrival_offsets(count: int, request_rate: float, rng: np.random.RandomState) -> list[float]:
    """Dispatch offsets from the first request: 0, then cumulative Exponential(1/rate) gaps
    (one scalar draw per request, bench_serving's order); all zero for an infinite rate."""
    if math.isinf(request_rate):
        return [0.0] * count
    offsets, now = [], 0.0
    for _ in range(count):
        offsets.append(now)
        now += float(rng.exponential(1.0 / request_rate))
    return offsets


def warn_range_ratio(config: BenchConfig, echo: Callable[[str], None]) -> None:
    if config.dataset_name.startswith("random") and config.random_range_ratio == 0.0:
        echo("warning: --random-range-ratio 0 (bench_serving's default) draws lengths uniformly from [1, L], "
             "about L/2 on average; pass --random-range-ratio 1.0 for fixed lengths")


def _kind_client(config: BenchConfig, timeout_s: float, admin_api_key: str | None = None) -> ServerClient:
    """The client of the kind whose bench backend this run speaks."""
    return kinds.kind_of_backend(config.backend).client_class(config.base_url, api_key=config.api_key, timeout_s=timeout_s,
                                                              admin_api_key=admin_api_key)


def server_context_limit(config: BenchConfig) -> ContextLimit | None:
    """The server's context limit: SGLang's /server_info where the kind serves one, else (vLLM, an OpenAI-only server)
    /v1/models' max_model_len; None when neither names one."""
    if kinds.kind_of_backend(config.backend).serves_server_info:
        try:
            with _kind_client(config, timeout_s=30.0) as client:
                limit = sglang_context_limit(client.server_info())
            if limit is not None:
                return limit
        except SpecsuiteError:
            pass  # no /server_info: an OpenAI-only server
    try:
        with OpenAICompletionsClient(config.base_url, api_key=config.api_key, timeout_s=30.0) as oai:
            return vllm_context_limit(oai.models())
    except SpecsuiteError:
        return None


def fit_to_server(config: BenchConfig) -> list[str]:
    """Fit the request lengths to the server's context length, in place; the notes to record (a one-line refusal,
    as SpecsuiteError, when lengths the user chose do not fit)."""
    limit = server_context_limit(config)
    if limit is None:
        return ["the server names no context length (/server_info, /v1/models): request lengths not checked against it"]
    if config.dataset_name == "sharegpt":
        given = config.sharegpt_context_len
        config.sharegpt_context_len = min(given, limit.max_total) if given else limit.max_total
        return []
    fitted = fit_lengths(config.random_input_len, config.random_output_len, limit, chosen=config.lengths_chosen)
    config.random_input_len, config.random_output_len = fitted.input_len, fitted.output_len
    return [fitted.note] if fitted.note else []


def prepare(config: BenchConfig) -> tuple[LocalTokenizer, list[DatasetRow], BenchRandom, str]:
    """Tokenizer, request set, the generator state after sampling, and the model name (the lengths already fitted
    to the server: `fit_to_server`)."""
    config.check()
    tokenizer_path = config.tokenizer
    if tokenizer_path is None and not kinds.kind_of_backend(config.backend).serves_model_info:
        tokenizer_path = _model_card_root(config)
    if tokenizer_path is None:  # an OpenAI-only server has no /model_info: then --tokenizer is needed
        with _kind_client(config, timeout_s=30.0) as client:
            info = client.model_info()
        tokenizer_path = tokenizer_path_of(info)
    tokenizer = load_tokenizer(tokenizer_path)
    model = config.model
    if model is None and kinds.bench_backend(config.backend).sends_model:
        with OpenAICompletionsClient(config.base_url, api_key=config.api_key, timeout_s=30.0) as oai:
            cards = oai.models()
        card = ModelCard.first_of(cards)
        model = str(card.id) if card is not None else "default"
    rng = BenchRandom.from_seed(config.seed)
    rows = build_requests(config.dataset_name, tokenizer, rng, num_prompts=config.num_prompts,
                          input_len=config.random_input_len, output_len=config.random_output_len,
                          range_ratio=config.random_range_ratio, tokenize_prompt=config.tokenize_prompt,
                          dataset_path=config.dataset_path, sharegpt_output_len=config.sharegpt_output_len,
                          sharegpt_context_len=config.sharegpt_context_len)
    return tokenizer, rows, rng, model or "default"


def _model_card_root(config: BenchConfig) -> str:
    """The served model's path from /v1/models (`root`, as vLLM names it), the tokenizer it loaded."""
    with OpenAICompletionsClient(config.base_url, api_key=config.api_key, timeout_s=30.0) as oai:
        cards = oai.models()
    card = ModelCard.first_of(cards)
    root = card.root if card is not None else None
    if not isinstance(root, str) or not root:
        raise SpecsuiteError(f"{display_url(config.base_url)}/v1/models names no model path (root): pass --tokenizer")
    return root


def run_benchmark(
    config: BenchConfig,
    *,
    progress: bool = False,
    output_file: str | None = None,
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    server_under_test: dict[str, Any] | None = None,
    start_gate: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return its record (also appended to `output_file` when given).

    `start_gate`, when given, is called in a worker thread after the warmup, just before the measured
    requests, and they start when it returns: a calibration script uses it to start two clients at one moment.

    `server_under_test` (how the caller chose the server, see specsuite.server.session) is stored in
    the record with the URL and whether /server_info came from the reference emulation.

    On Ctrl-C the partial record is written (status "interrupted") and KeyboardInterrupt is re-raised.
    """
    fitted = fit_to_server(config)
    for line in fitted:
        echo(line)
    tokenizer, rows, rng, model = prepare(config)
    warn_range_ratio(config, echo)
    settings = RequestSettings(backend=config.backend, base_url=config.base_url, model=model, temperature=config.temperature,
                               top_p=config.top_p, ignore_eos=config.ignore_eos, extra_request_body=config.extra_request_body,
                               api_key=config.api_key, oai_sampling=config.oai_sampling, read_timeout_s=config.read_timeout_s)
    ignored = settings.wire.ignored_sampling_flags(settings.sampling)
    if ignored:
        echo(f"note: on {config.backend}, bench_serving sends temperature 0.0 and no top_p whatever its flags say; so does this run, "
             f"ignoring {' and '.join(ignored)} (pass --oai-sampling to send them, or put them in --extra-request-body)")
    offsets = arrival_offsets(len(rows), config.request_rate, rng.numpy)
    state = _RunState(outputs=[None] * len(rows), warnings=list(fitted))
    run = _run_parameters(config, model, tokenizer)
    run["sampling_sent"] = settings.wire.sampling_sent(settings.sampling)  # what the requests carried, before --extra-request-body
    state.server_under_test = dict(server_under_test or {"embedded_reference": False, "source": "server-url"})
    try:
        accept_length, server_info = asyncio.run(_benchmark(config, settings, rows, offsets, state, progress, echo, start_gate))
        status = "complete"
    except KeyboardInterrupt:
        if state.start is not None:
            record = _finish(config, run, state, tokenizer, None, None, "interrupted")
            _write(record, output_file, config)
            echo(f"interrupted: {BenchLine.from_line(record).completed} finished requests saved" + (f" to {output_file}" if output_file else ""))
        raise
    record = _finish(config, run, state, tokenizer, accept_length, server_info, status)
    _write(record, output_file, config)
    return record


def _run_parameters(config: BenchConfig, model: str, tokenizer: LocalTokenizer) -> dict[str, Any]:
    params = asdict(config)
    for private in ("api_key", "admin_api_key", "post_warmup_sleep_s"):
        params.pop(private)
    params.update(base_url=display_url(config.base_url), model=model, tokenizer=tokenizer.source,
                  connection="keep-alive" if config.keep_alive else "per-request",
                  started_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return params


def _finish(config: BenchConfig, run: dict[str, Any], state: _RunState, tokenizer: LocalTokenizer,
            accept_length: float | None, server_info: dict[str, Any] | None, status: str) -> dict[str, Any]:
    assert state.start is not None
    duration = state.duration if state.duration is not None else time.perf_counter() - state.start
    finished = [o for o in state.outputs if o is not None]
    metrics = calculate_metrics(finished, duration, config.backend, accept_length,
                                encode=lambda text: tokenizer.encode(text, add_special_tokens=False))
    details = detail_arrays(finished, state.start, config.output_details)
    record = build_record(run, redact(server_info, _secrets(config)) if server_info else None, metrics, details, status)
    under_test = {**state.server_under_test, "url": display_url(config.base_url),
                  "reference_emulation": is_reference_emulation(server_info) if server_info else None}
    record.update(cache_flushed=state.cache_flushed, warnings=list(state.warnings), server_under_test=under_test)
    return record


def _secrets(config: BenchConfig) -> list[str | None]:
    return [config.api_key, config.admin_api_key]


def _write(record: dict[str, Any], output_file: str | None, config: BenchConfig) -> None:
    if output_file:
        with RecordWriter(output_file, secrets=_secrets(config)) as writer:
            writer.write(record)


def _new_session(config: BenchConfig, shared: bool) -> aiohttp.ClientSession:
    # A shared connection idle near the server's keep-alive timeout is not reused (specsuite/server/idle_connections.py).
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=MAX_IDLE_S) if shared else None
    return aiohttp.ClientSession(connector=connector, read_bufsize=READ_BUFSIZE, trust_env=False)


async def _benchmark(config: BenchConfig, settings: RequestSettings, rows: list[DatasetRow], offsets: list[float],
                     state: _RunState, progress: bool, echo: Callable[[str], None],
                     start_gate: Callable[[], None] | None = None) -> tuple[float | None, dict[str, Any] | None]:
    semaphore = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
    shared = _new_session(config, shared=True) if config.keep_alive else None
    kind = kinds.kind_of_backend(config.backend)
    accept_counters = kind.bench_accept_counters  # set: the accept length is a /metrics delta over the measured requests

    async def one(row: DatasetRow) -> RequestOutput:
        if semaphore is not None:
            async with semaphore:
                return await _send(row)
        return await _send(row)

    async def _send(row: DatasetRow) -> RequestOutput:
        if shared is not None:
            return await send_request(shared, settings, row)
        async with _new_session(config, shared=False) as session:
            return await send_request(session, settings, row)

    try:
        if config.warmup_requests:
            first = rows[0]
            warm_row = DatasetRow(first.prompt, first.prompt_len, min(first.output_len, WARMUP_OUTPUT_CAP))
            warm = await asyncio.gather(*(one(warm_row) for _ in range(config.warmup_requests)))
            if not any(o.success for o in warm):
                raise SpecsuiteError(f"warmup failed on {display_url(config.base_url)}: {warm[0].error}")
        if config.flush_cache and not kind.flushes_cache:
            state.warnings.append(f"--flush-cache skipped: {kind.display_name} has no /flush_cache (the accept length is a /metrics delta instead)")
            echo(state.warnings[-1])
        elif config.flush_cache:
            outcome = await asyncio.to_thread(_flush, config)
            state.cache_flushed = outcome.flushed
            if not outcome.flushed:
                state.warnings.append(outcome.warning(SERVER_ACCEPT_UNMEASURED))
                echo(state.warnings[-1])
        await asyncio.sleep(config.post_warmup_sleep_s)
        bar = tqdm(total=len(rows), disable=not progress, file=sys.stderr, unit="req", dynamic_ncols=True)

        async def scheduled(index: int, row: DatasetRow) -> None:
            delay = state.start + offsets[index] - time.perf_counter()  # type: ignore[operator]
            if delay > 0:
                await asyncio.sleep(delay)
            state.outputs[index] = await one(row)
            bar.update(1)

        counters_before = await asyncio.to_thread(_metrics_counters, config) if accept_counters is not None else None
        if start_gate is not None:
            await asyncio.to_thread(start_gate)
        state.start = time.perf_counter()
        try:
            await asyncio.gather(*(scheduled(i, row) for i, row in enumerate(rows)))
        finally:
            bar.close()
        server_info = await asyncio.to_thread(_server_info, config) if kind.serves_server_info else None
        state.duration = time.perf_counter() - state.start
        counted_accept = (accept_counters.accept_length(counters_before, await asyncio.to_thread(_metrics_counters, config))
                          if accept_counters is not None else None)
    finally:
        if shared is not None:
            await shared.close()
    accept = reported_accept_length(server_info)
    if state.cache_flushed is False:
        accept = None  # it would mix in the warmup and earlier traffic, under the name of this run's
    if accept_counters is not None:
        accept = counted_accept
    failed = [o for o in state.outputs if o is not None and not o.success]
    if failed:
        echo(f"{len(failed)} of {len(rows)} requests failed; first error: {failed[0].error}")
    return (float(accept) if accept is not None else None), server_info


def _metrics_counters(config: BenchConfig) -> dict[str, float] | None:
    """The server's /metrics, parsed; None when it cannot be read (the accept length is then left out)."""
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    try:
        with requests.Session() as session:
            session.trust_env = False  # like the benchmark's own session: no proxy between us and the server
            response = session.get(config.base_url.rstrip("/") + "/metrics", headers=headers, timeout=(5.0, 30.0))
    except requests.RequestException:
        return None
    return parse_prometheus(response.text) if response.status_code == 200 else None


def _flush(config: BenchConfig) -> FlushOutcome:
    """POST /flush_cache with the admin key, retried for a while: SGLang refuses while requests are still finishing."""
    with _kind_client(config, timeout_s=60.0, admin_api_key=config.admin_api_key) as client:
        return flush_before_measurement(client, retry_s=FLUSH_RETRY_S)


def _server_info(config: BenchConfig) -> dict[str, Any] | None:
    """GET /server_info (None when the server does not offer it, as bench_serving tolerates)."""
    with _kind_client(config, timeout_s=30.0) as client:
        try:
            return client.server_info()
        except SpecsuiteError:
            return None
