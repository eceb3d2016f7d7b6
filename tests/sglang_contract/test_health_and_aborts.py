"""The facts behind the reference server's /health and its aborted-request answers, read from
SGLang 0.5.23's source (specsuite/refserver/server.py emulates them; tests/refserver/test_refserver_api_surface.py
checks the emulation over HTTP)."""

from __future__ import annotations

import ast
import re

from specsuite.refserver import server


def _function_source(source: str, name: str) -> str:
    node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)
    return ast.get_source_segment(source, node) or ""


def test_health_generates_one_token_polled_once_a_second(sglang_source):
    """/health and /health_generate share `health_generate` (srt/entrypoints/http_server.py:721-723),
    which sends `input_ids=[0]` with max_new_tokens 1 at temperature 0 under a
    HEALTH_CHECK_<hex> rid (756-766), sleeps 1 s between looks (778-780), answers 200 on any
    answer and 503 after SGLANG_HEALTH_CHECK_TIMEOUT, default 20 (218, 785-799)."""
    source = sglang_source("srt/entrypoints/http_server.py")
    handler = _function_source(source, "health_generate")
    assert '@app.get("/health")' in source and '@app.get("/health_generate")' in source
    assert 'sampling_params = {"max_new_tokens": 1, "temperature": 0.0}' in handler
    assert "input_ids=[0]" in handler
    assert f"await asyncio.sleep({server.HEALTH_POLL_S:g})" in handler
    assert handler.count("Response(status_code=503)") >= 2 and "Response(status_code=200)" in handler
    timeout = re.search(r'HEALTH_CHECK_TIMEOUT = int\(os\.getenv\("SGLANG_HEALTH_CHECK_TIMEOUT", (\d+)\)\)', source)
    assert timeout and float(timeout.group(1)) == 20
    constants = sglang_source("srt/constants.py")
    assert f'HEALTH_CHECK_RID_PREFIX = "{server.HEALTH_CHECK_RID_PREFIX}"' in constants


def test_health_checks_are_left_out_of_the_request_metrics(sglang_source):
    """The health check's request carries log_metrics=False (srt/entrypoints/http_server.py:757-761; the field
    defaults to true, srt/managers/io_struct.py:258), and the tokenizer manager collects a request's metrics only
    when it is true (srt/managers/tokenizer_manager.py:2788); the reference server leaves such requests out of
    sglang:num_requests_total and the token counters, as tests/refserver/test_refserver_api_surface.py checks over HTTP."""
    handler = _function_source(sglang_source("srt/entrypoints/http_server.py"), "health_generate")
    assert "log_metrics=False" in handler
    assert re.search(r"class GenerateReqInput\b.*?\n    log_metrics: bool = True\n", sglang_source("srt/managers/io_struct.py"), re.S)
    manager = sglang_source("srt/managers/tokenizer_manager.py")
    assert re.search(r"if self\.enable_metrics and state\.obj\.log_metrics:\s+self\.collect_metrics\(", manager)
    finished = _function_source(sglang_source("srt/observability/metrics_collector.py"), "observe_one_finished_request")
    assert "self.num_requests_total.labels(" in finished and "self.generation_tokens_total.labels(" in finished


def test_non_stream_aborts_with_a_status_raise(sglang_source):
    """An abort with status_code in [400, 600) fails a non-stream request: ValueError for 400,
    HTTPException otherwise; without a status it is returned (srt/managers/tokenizer_manager.py:
    1891-1922). The ValueError becomes 400 {"error": {"message": ...}} (http_server.py:2246-2250)."""
    handler = _function_source(sglang_source("srt/managers/tokenizer_manager.py"), "_handle_abort_finish_reason")
    assert "not HTTPStatus.BAD_REQUEST <= status_code < 600" in handler
    assert 'raise ValueError(finish_reason["message"])' in handler
    assert "raise fastapi.HTTPException(" in handler
    errors = _function_source(sglang_source("srt/entrypoints/http_server.py"), "_create_error_response")
    assert '{"error": {"message": str(e)}}' in errors


def test_beam_search_is_refused_on_a_speculative_server(sglang_source):
    """A beam request (beam_width > 1) on a speculative server is aborted with status 400 and this
    message (srt/beam_search/coordinator.py:125-126; scheduler.py:3040-3046)."""
    coordinator = sglang_source("srt/beam_search/coordinator.py")
    assert f'return "{server.BEAM_WITH_SPECULATION}"' in coordinator
    scheduler = sglang_source("srt/managers/scheduler.py")
    assert "prepare_abort(req, error_msg, status_code=HTTPStatus.BAD_REQUEST)" in scheduler


def test_parallel_samples_are_prompt_major_under_fresh_rids(sglang_source):
    """n > 1: the tokenizer loops prompts, then samples, giving each a regenerated rid
    (srt/managers/tokenizer_manager.py:2164-2185); the reference server answers in this order."""
    handler = _function_source(sglang_source("srt/managers/tokenizer_manager.py"), "_handle_batch_request")
    loops = re.search(r"for i in range\(batch_size\):\n\s+for _ in range\(obj\.parallel_sample_num\):", handler)
    assert loops, "the expansion is no longer prompt-major"
    assert handler.count("tmp_obj.regenerate_rid()") >= 2
