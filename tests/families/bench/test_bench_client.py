"""The benchmark client on the wire: stream timing against a scripted SSE server, failure paths,
the three backends against the reference server's native and /v1 routes, and Ctrl-C saving
the finished requests."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.client import RequestSettings, send_request
from specsuite.families.bench.datasets import DatasetRow
from specsuite.families.bench.runner import BenchConfig, run_benchmark
from specsuite.server.launcher import find_free_port, launch_reference_server
from tests.helpers.interrupt import after_finished, interrupt_mid_run

ROOT = Path(__file__).resolve().parents[3]
ROW = DatasetRow([1, 2, 3], 3, 4)


def sse(data) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else orjson.dumps(data)) + b"\n\n"


async def scripted(request: web.Request) -> web.StreamResponse:
    """Native-shaped chunks with scripted pauses; the script is chosen by the test via a header."""
    script = request.headers.get("X-Script", "timed")
    if script == "http500":
        return web.Response(status=500, text="internal failure")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    if script == "error":
        await response.write(sse({"error": {"message": "bad request"}}) + sse(b"[DONE]"))
        return response
    if script == "one-read":  # every event in one network write, as a busy server's flush delivers them
        events = [sse({"text": "a" * n, "meta_info": {"completion_tokens": n, "prompt_tokens": 3}}) for n in range(1, 9)]
        await response.write(b"".join(events) + sse(b"[DONE]"))
        return response
    steps = [(0.0, "a", 1), (0.05, "abc", 3), (0.03, "abc", 3), (0.03, "abcd", 4)]
    for pause, text, tokens in steps:
        await asyncio.sleep(pause)
        await response.write(sse({"text": text, "meta_info": {"completion_tokens": tokens, "prompt_tokens": 3}}))
    if script != "truncated":
        await response.write(sse(b"[DONE]"))
    return response


def run_scripted(script: str):
    async def main():
        app = web.Application()
        app.router.add_post("/generate", scripted)
        server = TestServer(app, port=find_free_port())
        await server.start_server()
        try:
            settings = RequestSettings(backend="sglang", base_url=str(server.make_url("")), read_timeout_s=10.0)
            async with aiohttp.ClientSession() as session:
                original = settings.headers
                object.__setattr__(settings, "headers", lambda: {**original(), "X-Script": script})
                return await send_request(session, settings, ROW)
        finally:
            await server.close()

    return asyncio.run(main())


def test_stream_timing_splits_multi_token_chunks():
    out = run_scripted("timed")
    assert out.success, out.error
    assert out.output_len == 4 and out.generated_text == "abcd"
    assert len(out.itl) == 3 and out.itl[0] == out.itl[1]  # a 2-token chunk gives two equal entries
    assert out.chunk_tokens == [2, 1] and len(out.chunk_itl) == 2
    assert out.itl[0] == pytest.approx(out.chunk_itl[0] / 2)
    assert 0.045 <= out.chunk_itl[0] <= 0.5  # 50 ms scripted (upper bound loose: shared CPUs)
    assert 0.058 <= out.chunk_itl[1] <= 0.5  # 30 + 30 ms: the zero-token chunk's gap merged into the next
    assert out.latency >= out.ttft + sum(out.chunk_itl) - 1e-9


def test_events_of_one_network_read_get_their_own_stamps():
    """bench_serving reads line by line and stamps each event after parsing it; one stamp per network read
    would give every later event of the read a zero gap."""
    out = run_scripted("one-read")
    assert out.success, out.error
    assert len(out.itl) == 7 and all(gap > 0 for gap in out.itl), out.itl


@pytest.mark.parametrize("script, message", [("http500", "HTTP 500"), ("error", "server error in stream"),
                                             ("truncated", "without data: [DONE]")])
def test_failed_streams_are_recorded_not_raised(script, message):
    out = run_scripted(script)
    assert not out.success and message in out.error


def test_nothing_listening_is_one_line_error(tmp_path):
    config = BenchConfig(base_url=f"http://127.0.0.1:{find_free_port()}", num_prompts=1)
    with pytest.raises(SpecsuiteError, match="cannot connect"):
        run_benchmark(config)


# ------------------------------------------------------------------------- reference server


@pytest.fixture(scope="module")
def refserver(tmp_path_factory):
    server = launch_reference_server("fix", log_dir=tmp_path_factory.mktemp("refserver"), ready_timeout_s=120.0)
    yield server
    server.stop()


def small_config(url: str, backend: str, **overrides) -> BenchConfig:
    settings: dict = {"base_url": url, "backend": backend, "dataset_name": "random-ids", "num_prompts": 3, "random_input_len": 48,
                      "random_output_len": 24, "random_range_ratio": 1.0, "tokenize_prompt": backend != "sglang-oai-chat",
                      "max_concurrency": 2, "flush_cache": True, "post_warmup_sleep_s": 0.0, "seed": 1}
    settings.update(overrides)
    return BenchConfig(**settings)


def test_native_backend_counts_tokens_and_accept_length(refserver, tmp_path):
    out_file = tmp_path / "bench.jsonl"
    # Enough decode steps (> 40) that the server folds its accept-length counters, as SGLang does.
    config = small_config(refserver.base_url, "sglang", random_output_len=96, max_concurrency=1)
    record = run_benchmark(config, output_file=str(out_file))
    assert record["status"] == "complete" and record["completed"] == 3 and record["failed"] == 0
    assert record["output_lens"] == [96, 96, 96] and record["total_input_tokens"] == 3 * 48
    for itl, tokens in zip(record["itls"], record["chunk_tokens"], strict=False):
        assert len(itl) == sum(tokens) <= 95
    assert record["accept_length"] is not None and record["accept_length"] >= 1.0
    assert all(a >= 1.0 for a in record["request_accept_lengths"])
    line = json.loads(out_file.read_text().splitlines()[-1])
    assert line["median_itl_ms"] == pytest.approx(record["median_itl_ms"]) and line["request_rate"] == "inf"
    assert "api_key" in line["server_info"]


@pytest.mark.parametrize("backend", ["sglang-oai", "sglang-oai-chat"])
def test_openai_backends_against_v1_routes(refserver, backend):
    record = run_benchmark(small_config(refserver.base_url, backend, keep_alive=True))
    assert record["completed"] == 3 and record["failed"] == 0, record["errors"]
    assert record["output_lens"] == [24, 24, 24]  # no usage chunk: bench_serving's fallback to max_tokens
    assert record["total_output_tokens_retokenized"] > 0
    assert all(len(itl) == len(chunks) for itl, chunks in zip(record["itls"], record["chunk_itls"], strict=False))
    assert record["mean_ttft_ms"] > 0 and record["run"]["model"]


def test_openai_backend_ignores_the_sampling_flags_as_bench_serving_and_says_so(refserver):
    """bench_serving sends temperature 0.0 and no top_p on the OpenAI backends whatever --temperature
    and --top-p say (tests/sglang_contract/test_admin_and_bench.py reads that from its source);
    before, specsuite bench sent them, so the same flags measured another workload."""
    notes: list[str] = []
    record = run_benchmark(small_config(refserver.base_url, "sglang-oai", temperature=0.8, top_p=0.9), echo=notes.append)
    assert record["failed"] == 0
    assert record["run"]["sampling_sent"] == {"temperature": 0.0}
    assert any("ignoring --temperature 0.8 and --top-p 0.9" in note and "--oai-sampling" in note for note in notes), notes
    assert record["server_under_test"]["reference_emulation"] is True and record["server_under_test"]["embedded_reference"] is False


def test_oai_sampling_sends_the_flags_on_the_openai_backends(refserver):
    notes: list[str] = []
    record = run_benchmark(small_config(refserver.base_url, "sglang-oai-chat", tokenize_prompt=False, temperature=0.8, top_p=0.9,
                                        oai_sampling=True), echo=notes.append)
    assert record["failed"] == 0 and record["run"]["sampling_sent"] == {"temperature": 0.8, "top_p": 0.9}
    assert record["run"]["oai_sampling"] is True and not any("ignoring" in note for note in notes)
    payload = bench_body(RequestSettings(backend="sglang-oai", base_url="http://h:1", temperature=0.8, top_p=0.9, oai_sampling=True),
                         DatasetRow("hi", 1, 4))
    assert (payload["temperature"], payload["top_p"]) == (0.8, 0.9)


def test_the_cli_flag_reaches_the_config():
    import argparse

    from specsuite.cli.bench import add_bench_arguments
    from specsuite.session.bench import BENCH_SERVING, build_bench_config, chosen_from_cli

    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)

    def config_for(argv: list[str]):
        """The BenchConfig `specsuite bench` builds from these flags (specsuite/cli/bench.py: the one builder)."""
        args = parser.parse_args(argv)
        return build_bench_config(chosen_from_cli(lambda name: getattr(args, name, None)), BENCH_SERVING, base_url="http://h:1")

    config = config_for(["--backend", "sglang-oai", "--oai-sampling", "--temperature", "0.6"])
    assert config.oai_sampling is True and config.temperature == 0.6
    assert config_for([]).oai_sampling is False


def test_chat_backend_refuses_token_id_prompts(refserver):
    with pytest.raises(SpecsuiteError, match="text prompts"):
        run_benchmark(small_config(refserver.base_url, "sglang-oai-chat", tokenize_prompt=True))


def test_ctrl_c_saves_finished_requests(refserver, tmp_path):
    out_file = tmp_path / "partial.jsonl"
    code = (
        "from specsuite.families.bench.runner import BenchConfig, run_benchmark\n"
        f"config = BenchConfig(base_url={refserver.base_url!r}, dataset_name='random-ids', num_prompts=400, random_input_len=32, "
        "random_output_len=960, random_range_ratio=1.0, tokenize_prompt=True, max_concurrency=1, post_warmup_sleep_s=0.0)\n"
        f"run_benchmark(config, output_file={str(out_file)!r})\n"
    )
    # The signal goes once the server has finished the warmup and two measured requests; 400 requests of 960 tokens
    # take minutes, so it lands mid-run.
    code_returned, stderr = interrupt_mid_run(["-c", code], cwd=ROOT, ready=after_finished(lambda: refserver.base_url, 3))
    assert code_returned != 0 and "KeyboardInterrupt" in stderr
    line = json.loads(out_file.read_text().splitlines()[-1])
    assert line["status"] == "interrupted"
    assert 1 <= line["completed"] < 400 and line["duration"] > 0
    assert len(line["itls"]) == line["completed"] + line["failed"] and line["output_throughput"] > 0


def test_start_gate_holds_the_measured_requests(refserver):
    """The gate (vs_vllm_bench_serve.py --together) is called once, after the warmup, and the clock of the
    measured run starts when it returns: its wait is in no figure."""
    calls = []

    def gate() -> None:
        calls.append(time.perf_counter())
        time.sleep(0.5)

    began = time.perf_counter()
    record = run_benchmark(small_config(refserver.base_url, "sglang", warmup_requests=1), echo=lambda line: None, start_gate=gate)
    elapsed = time.perf_counter() - began
    assert len(calls) == 1 and record["completed"] == 3 and record["failed"] == 0
    assert record["duration"] < elapsed - 0.5
    assert min(record["start_times"]) >= 0.0  # measured from the gate's return, not before it


def bench_body(settings: RequestSettings, row: DatasetRow) -> dict:
    """The body the bench sends for one row: its typed request through the server side's `BenchWire`."""
    return settings.wire.body(settings.bench_request(row))
