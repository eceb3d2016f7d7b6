"""The bench's `vllm` backend without vLLM: the payload `vllm bench serve` sends, stream parsing of
vLLM-shaped SSE chunks (multi-token chunks from `token_ids`, the usage-only final chunk with
per-request speculation stats), and a whole run against a fake vLLM server (tokenizer from
/v1/models `root`, accept length from /metrics deltas)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.client import RequestOutput, RequestSettings, _StreamState
from specsuite.families.bench.datasets import DatasetRow
from specsuite.families.bench.metrics import calculate_metrics
from specsuite.families.bench.runner import BenchConfig, run_benchmark
from specsuite.server import kinds
from specsuite.server.launcher import find_free_port

ROOT = Path(__file__).resolve().parents[3]
TOKENIZER = ROOT / "specsuite" / "fixtures" / "vllm_models" / "target"
ROW = DatasetRow("Henry was", 2, 8)
SPEC = {"mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.5, "acceptance_histogram": [1, 1, 1, 1],
        "num_spec_steps": 3, "num_accepted_draft_tokens": 5, "num_draft_tokens": 9, "num_spec_tokens": 3}


def chunk(text: str, ids: list[int] | None, finish: str | None = None) -> dict:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    if ids is not None:
        choice["token_ids"] = ids
    return {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [choice]}


def usage_chunk(completion_tokens: int, spec: dict | None = SPEC) -> dict:
    data = {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [],
            "usage": {"prompt_tokens": 2, "total_tokens": 2 + completion_tokens, "completion_tokens": completion_tokens}}
    if spec is not None:
        data["metrics"] = {"speculative_decoding": spec}
    return data


# Recorded shape (vLLM 0.32, EAGLE, k=3): a 1-token prefill chunk, then steps of 1 to 4 tokens, then usage.
STREAM = [(0.010, chunk("\n", [198])), (0.030, chunk("<think>\nThe", [8096, 198, 416])), (0.040, chunk(" set", [1551])),
          (0.060, chunk(" user wants a", [592, 559, 258], "length")), (0.061, usage_chunk(8))]


def feed(stream, start: float = 0.0) -> RequestOutput:
    out = RequestOutput(prompt_len=ROW.prompt_len, start_time=start)
    state = _StreamState("vllm", out, ROW.output_len)
    for stamp, data in stream:
        state.feed(data, stamp)
    state.finish()
    return out


def test_payload_is_vllm_bench_serves_plus_token_ids():
    settings = RequestSettings(backend="vllm", base_url="http://h:1/", model="served")
    assert settings.url == "http://h:1/v1/completions"
    assert bench_body(settings, ROW) == {
        "model": "served", "prompt": "Henry was", "repetition_penalty": 1.0, "max_tokens": 8, "temperature": 0.0, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True}


def test_payload_sampling_flags_and_extra_body():
    settings = RequestSettings(backend="vllm", base_url="http://h:1", temperature=0.7, top_p=0.9, ignore_eos=False,
                               extra_request_body={"return_token_ids": False, "seed": 3})
    body = bench_body(settings, DatasetRow([5, 6, 7], 3, 4))
    assert body["prompt"] == [5, 6, 7] and body["temperature"] == 0.7 and body["top_p"] == 0.9
    assert "ignore_eos" not in body  # vLLM's client sends the flag only when set
    assert body["return_token_ids"] is False and body["seed"] == 3
    assert settings.wire.ignored_sampling_flags(settings.sampling) == []  # the vllm backend sends them, like `vllm bench serve --temperature`


def test_stream_splits_multi_token_chunks_and_reads_the_usage_chunk():
    out = feed(STREAM)
    assert out.ttft == pytest.approx(0.010)
    assert out.chunk_tokens == [3, 1, 3]
    assert out.chunk_itl == pytest.approx([0.020, 0.010, 0.020])  # vLLM's ITL: one gap per chunk
    assert out.itl == pytest.approx([0.020 / 3] * 3 + [0.010] + [0.020 / 3] * 3)  # ours: per token
    assert out.output_len == 8 and out.server_prompt_len == 2  # usage.completion_tokens, not the requested length
    assert out.generated_text == "\n<think>\nThe set user wants a"
    assert out.spec_accept_length == 2.5 and out.spec_verify_ct == 3


def test_token_less_chunk_merges_its_gap_and_text_only_chunks_count_once():
    stream = [(0.01, chunk("a", [1])), (0.02, chunk("", [])), (0.03, chunk("b", [2, 3])), (0.031, usage_chunk(3, spec=None))]
    out = feed(stream)
    assert out.chunk_itl == pytest.approx([0.02]) and out.chunk_tokens == [2]
    assert out.spec_accept_length is None
    # A server without return_token_ids: chunks counted by text, ITL per chunk (no token counts).
    plain = [(0.01, chunk("a", None)), (0.02, chunk("", None)), (0.04, chunk("bc", None)), (0.05, usage_chunk(3, spec=None))]
    out = feed(plain)
    assert out.itl == pytest.approx([0.03]) and out.chunk_itl == pytest.approx([0.03]) and out.chunk_tokens == []
    assert out.output_len == 3


def test_metrics_keep_per_token_itl_and_per_chunk_itl_apart():
    out = feed(STREAM)
    out.success, out.latency = True, 0.062  # [DONE] just after the usage chunk
    metrics = calculate_metrics([out], duration_s=0.1, backend="vllm", accept_length=None)
    assert metrics["median_chunk_itl_ms"] == pytest.approx(20.0)
    assert metrics["median_itl_ms"] == pytest.approx(20.0 / 3)
    assert metrics["median_tpot_ms"] == pytest.approx((0.062 - 0.010) / 7 * 1000)
    assert metrics["output_throughput"] == pytest.approx(80.0)
    assert metrics["mean_request_accept_length"] == 2.5


def test_accept_length_from_metrics_deltas():
    accept_length = kinds.get("vllm").bench_accept_counters.accept_length
    before = {"vllm:spec_decode_num_drafts_total": 10.0, "vllm:spec_decode_num_accepted_tokens_total": 5.0}
    after = {"vllm:spec_decode_num_drafts_total": 30.0, "vllm:spec_decode_num_accepted_tokens_total": 35.0}
    assert accept_length(before, after) == pytest.approx(2.5)
    assert accept_length(before, before) is None  # no drafts in between
    assert accept_length(None, after) is None and accept_length(before, {}) is None


# ------------------------------------------------------------------------- a fake vLLM server


@pytest.fixture
def fake_vllm() -> Iterator[tuple[str, dict]]:
    """/v1/models (root = the project's tokenizer folder), streamed /v1/completions and /metrics, in a thread."""
    seen: dict = {"bodies": [], "scrapes": 0}
    port = find_free_port()
    ready = threading.Event()
    loop = asyncio.new_event_loop()

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "tiny", "object": "model", "root": str(TOKENIZER)}]})

    async def metrics(_: web.Request) -> web.Response:
        seen["scrapes"] += 1
        drafts = 3 * len(seen["bodies"])
        return web.Response(text=f"# HELP x\nvllm:spec_decode_num_drafts_total{{engine=\"0\"}} {drafts}.0\n"
                                 f"vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {5 * len(seen['bodies'])}.0\n")

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen["bodies"].append(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sizes = [1, 3, 1, 3][: body["max_tokens"]]
        sent = 0
        for size in sizes:
            await asyncio.sleep(0.005)
            ids = list(range(sent + 10, sent + 10 + size))
            sent += size
            await response.write(b"data: " + orjson.dumps(chunk("x" * size, ids)) + b"\n\n")
        await response.write(b"data: " + orjson.dumps(usage_chunk(sent)) + b"\n\ndata: [DONE]\n\n")
        return response

    async def serve() -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_get("/metrics", metrics)
        app.router.add_post("/v1/completions", completions)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return runner

    def main() -> None:
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(serve())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(10.0)
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10.0)


def test_whole_run_against_a_fake_vllm(fake_vllm, tmp_path):
    url, seen = fake_vllm
    config = BenchConfig(base_url=url, backend="vllm", dataset_name="random-ids", num_prompts=3, random_input_len=16,
                         random_output_len=8, random_range_ratio=1.0, tokenize_prompt=True, max_concurrency=1, flush_cache=True,
                         post_warmup_sleep_s=0.0)
    record = run_benchmark(config, output_file=str(tmp_path / "out.jsonl"), echo=lambda line: None)
    assert record["completed"] == 3 and record["failed"] == 0
    assert record["run"]["model"] == "tiny" and record["run"]["tokenizer"]
    assert all(body["model"] == "tiny" and body["stream_options"] == {"include_usage": True} for body in seen["bodies"])
    assert len(seen["bodies"]) == 4  # one warmup, three measured
    assert record["output_lens"] == [8, 8, 8] and record["chunk_tokens"] == [[3, 1, 3]] * 3
    assert record["accept_length"] == pytest.approx(1 + 15 / 9)  # three requests' /metrics delta, warmup excluded
    assert record["mean_request_accept_length"] == 2.5
    assert record["server_info"] is None and any("--flush-cache skipped" in w for w in record["warnings"])


def test_a_server_without_a_model_path_asks_for_the_tokenizer(monkeypatch):
    from specsuite.families.bench import runner

    class Cards:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        def models(self) -> list[dict]:
            return [{"id": "tiny"}]

    monkeypatch.setattr(runner, "OpenAICompletionsClient", Cards)
    with pytest.raises(SpecsuiteError, match="pass --tokenizer"):
        runner.prepare(BenchConfig(base_url="http://127.0.0.1:9", backend="vllm", num_prompts=1))


def bench_body(settings: RequestSettings, row: DatasetRow) -> dict:
    """The body the bench sends for one row: its typed request through the server side's `BenchWire`."""
    return settings.wire.body(settings.bench_request(row))
