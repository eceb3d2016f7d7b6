"""Streaming request functions with bench_serving's timing rules, for every backend a server kind offers.

Backends (bench_serving's names; specsuite/server/kinds/ says which kind offers each): `sglang` (native POST /generate, cumulative chunks),
`sglang-oai` (POST /v1/completions), `sglang-oai-chat` (POST /v1/chat/completions), and `vllm`
(POST /v1/completions as `vllm bench serve` sends it; see "The vllm backend" below).

Timing, per request, all from `time.perf_counter()`:
- `start_time` is taken just before the POST; a per-request connection (the default, as
  bench_serving opens one ClientSession per request) puts the TCP connect inside TTFT.
- Each SSE line is read on its own and stamped after its JSON is parsed, as bench_serving does
  (`_read_stream`); so every event has its own time, and events of one network read are not
  given one shared stamp (that made zero gaps).
- `ttft`: the first chunk whose text is non-empty (native `text`, completions `choices[0].text`,
  chat `delta.content` + `delta.reasoning_content`).
- `latency` (E2E): the last non-empty line, `data: [DONE]` included.
- `itl`: native backend: a later chunk carrying n = completion_tokens - previous > 0 new tokens
  adds n entries of gap / n (gap since the previous counted chunk); a chunk with n = 0 is skipped
  and its gap merges into the next. OpenAI backends: one entry per non-empty chunk (the
  per-token split for sglang-oai happens in `metrics`, as in bench_serving); vllm: the native
  rule with n = len(token_ids). Tokens of the first chunk produce no entry.
- `chunk_itl`: one gap per counted chunk after the first, never split; `chunk_tokens` holds the
  tokens each of those chunks carried (native and vllm).
- `output_len`: native `meta_info.completion_tokens`; OpenAI `usage.completion_tokens` from any
  chunk, else the requested length (bench_serving's fallback, exact only with ignore_eos).

Chunks: each backend's reader (specsuite/server/bench/streams.py, or the kind's `bench_stream.py`) is the one its server kind names
(`BenchBackend.read_chunk`, specsuite/server/kinds/); this module reads the SSE lines and stamps them.

Request bodies: this module builds no server JSON. Each request goes to the server side as a
typed `GenerationRequest` (`RequestSettings.bench_request`), and `specsuite.server.bench.wire.BenchWire`
turns it into the bytes bench_serving (or `vllm bench serve`) sends for the backend, with
bench_serving's sampling rule (temperature/top_p on the OpenAI backends only with `oai_sampling`,
ours, recorded in the run's `sampling_sent`).

The vllm backend. The body (`bench_wire`) follows `vllm bench serve`'s completions request function
(vllm 0.32 `benchmarks/lib/endpoint_request_func.py`), plus, ours, `return_token_ids: true` so every
chunk says which tokens it carries (an extra body can set it false). Sampling: `--temperature` is
always sent (default 0.0) and `--top-p` when below 1.
`vllm bench serve` sends no temperature unless given one, so the server's default applies (the
model's generation_config, temperature 1.0 for the project's models): pass it `--temperature 0`
to compare. SGLang's bench_serving also has a `vllm` backend, but it is its sglang-oai request
function under another name (no stream_options, so no usage chunk: output tokens fall back to the
requested length; temperature 0.0; chunk ITL never split, as its retokenized split is for
sglang-oai only). Ours reads what vLLM's own client reads:
- output tokens: `usage.completion_tokens` of the usage-only final chunk (`choices: []`);
- a chunk counts when its `token_ids` is non-empty (or, without token ids, its text is): vLLM's
  client counts every message with `choices`, empty text included; with ignore_eos and no stop
  strings vLLM sends no token-less choice chunks, so both count the same chunks;
- `ttft`: the first counted chunk (bench_serving: the first with text; vLLM: the first with choices);
- `itl` per token, bench_serving's native rule: a chunk of n = len(token_ids) tokens adds n entries
  of gap / n. vLLM's ITL is per chunk: one entry per chunk, a speculative step of several
  accepted tokens being one entry. That is our `chunk_itl` (with `chunk_tokens` = n), the number
  to hold against vLLM's ITL; our `itl` is about the accept length times smaller. Without token
  ids, `itl` is per chunk too;
- `latency` (E2E): bench_serving's, the last line, `data: [DONE]` included. vLLM stops the clock at
  the last chunk with choices; the usage chunk and [DONE] follow within a millisecond, so TPOT =
  (E2E - TTFT) / (output_len - 1) differs by that over output_len - 1 (under 0.1% at 128 tokens);
- per-request accept length: `metrics.speculative_decoding.mean_acceptance_length` of the usage
  chunk, when the server runs with `--per-request-spec-decode-metrics` (`spec_verify_ct` from its
  `num_spec_steps`).

Deliberate differences from bench_serving, all on failure paths: an in-stream error object fails
the request (bench_serving counts it a success with no text), a usage-only chunk with
`choices: []` is read instead of failing the completions request, and a stream that ends before
`data: [DONE]` fails the request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from specsuite.families.bench.datasets import DatasetRow
from specsuite.server import kinds
from specsuite.server.bench.streams import ChunkReading, RequestOutput
from specsuite.server.bench.wire import BenchWire, bench_sampling
from specsuite.server.protocol import GenerationRequest, Sampling
from specsuite.server.transport import error_message_of, shorten

READ_BUFSIZE = 10 * 1024**2  # cumulative native chunks grow long; bench_serving uses the same 10 MB
_DONE = b"[DONE]"


@dataclass(frozen=True)
class RequestSettings:
    """What every request of one run shares."""

    backend: str
    base_url: str
    model: str = "default"
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = True
    extra_request_body: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    oai_sampling: bool = False  # ours: apply temperature/top_p on the OpenAI backends too
    connect_timeout_s: float = 30.0
    read_timeout_s: float = 600.0  # the longest silence inside one stream
    total_timeout_s: float = 6 * 3600.0  # bench_serving's per-request limit

    def __post_init__(self) -> None:
        kinds.bench_backend(self.backend)  # an unknown name is refused here, in one line

    @property
    def wire(self) -> BenchWire:
        """The server side's body builder for this run's backend."""
        return BenchWire(backend=self.backend, model=self.model, oai_sampling=self.oai_sampling, extra_body=self.extra_request_body)

    @property
    def sampling(self) -> Sampling:
        """The run's sampling flags (no output length: that is per request)."""
        return bench_sampling(self.temperature, self.top_p, self.ignore_eos)

    def bench_request(self, row: DatasetRow) -> GenerationRequest:
        """One dataset row as a typed request, for `wire.encode`."""
        sampling = bench_sampling(self.temperature, self.top_p, self.ignore_eos, max_new_tokens=row.output_len)
        if isinstance(row.prompt, str):
            return GenerationRequest(prompt=row.prompt, sampling=sampling)
        return GenerationRequest(prompt_ids=tuple(row.prompt), sampling=sampling)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.wire.path

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.total_timeout_s, sock_connect=self.connect_timeout_s, sock_read=self.read_timeout_s)


class _StreamState(ChunkReading):
    """Per-request parser state; `feed` hands one JSON chunk, stamped with its arrival time, to the reader of the
    run's backend (`specsuite.server.bench.streams`, named by the server kind that offers the backend)."""

    def __init__(self, backend: str, output: RequestOutput, requested_len: int) -> None:
        super().__init__(output, requested_len)
        self.backend = backend
        self.format = kinds.bench_backend(backend)

    def feed(self, data: dict[str, Any], stamp: float) -> None:
        message = error_message_of(data)
        if message is not None:
            raise _StreamError(f"server error in stream: {shorten(message)}")
        self.format.read_chunk(self, data, stamp)

    def finish(self) -> None:
        if not self.format.cumulative_text:
            self.out.generated_text = "".join(self.texts)


class _StreamError(Exception):
    """A stream that cannot be measured: becomes the request's error text."""


async def send_request(session: aiohttp.ClientSession, settings: RequestSettings, row: DatasetRow) -> RequestOutput:
    """Send one streaming request and measure it; failures are recorded in the output, not raised."""
    body = settings.wire.encode(settings.bench_request(row))
    output = RequestOutput(prompt_len=row.prompt_len)
    state = _StreamState(settings.backend, output, row.output_len)
    output.start_time = time.perf_counter()
    try:
        async with session.post(settings.url, data=body, headers=settings.headers(), timeout=settings.timeout()) as response:
            if response.status != 200:
                output.error = f"HTTP {response.status} {response.reason or ''}: {shorten(await response.text())}"
                return output
            done = await _read_stream(response, state)
        if not done:
            raise _StreamError("stream ended without data: [DONE]")
        state.finish()
        output.success = True
    except _StreamError as exc:
        output.error = str(exc)
    except (aiohttp.ClientError, TimeoutError) as exc:
        output.error = f"{type(exc).__name__}: {shorten(str(exc)) or 'timed out'}"
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        output.error = f"unparseable chunk: {type(exc).__name__}: {shorten(str(exc))}"
    return output


async def _read_stream(response: aiohttp.ClientResponse, state: _StreamState) -> bool:
    """Feed every `data:` line to `state`; True when `[DONE]` arrived. Sets the E2E latency.

    Line by line, as bench_serving reads (`async for chunk_bytes in response.content`, i.e.
    aiohttp's readline; sglang/benchmark/serving.py:744 in 0.5.23): the E2E clock reads when the
    line is taken, and the event's own stamp after its JSON is parsed (ibid. 755 and 780). Two events
    that arrived in one network read therefore get two stamps, not one: one shared stamp per read
    made zero gaps (a zero ITL for every event after the first of a read)."""
    done = False
    start = state.out.start_time
    async for raw in response.content:
        line = raw.strip()
        if not line:
            continue
        state.out.latency = time.perf_counter() - start
        payload = line[6:] if line.startswith(b"data: ") else line[5:] if line.startswith(b"data:") else None
        if payload is None:
            continue  # SSE comment or another field
        payload = payload.strip()
        if payload == _DONE:
            done = True
            continue
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise _StreamError(f"chunk is not a JSON object: {shorten(payload.decode(errors='replace'), 80)}")
        state.feed(data, time.perf_counter())
    return done
