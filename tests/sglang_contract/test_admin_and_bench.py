"""SGLang 0.5.23's admin-key rule and bench_serving's sampling fields, read from SGLang's own source.

Two behaviours that the harness and the reference server copy:

* which routes want `--admin-api-key`, and how a key is checked (`srt/utils/auth.py`,
  `srt/entrypoints/http_server.py`): the reference server must decide every request as SGLang
  does, and the harness must send the admin key to `/flush_cache`;
* what `sglang.bench_serving` puts in each backend's request (`benchmark/serving.py`, which
  `bench_serving.py` re-exports): `specsuite bench` sends the same sampling fields by default.
"""

from __future__ import annotations

import ast
import itertools
import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

from specsuite.families.bench.client import RequestSettings
from specsuite.families.bench.datasets import DatasetRow
from specsuite.refserver.app import build_app
from specsuite.refserver.server import ADMIN_ROUTES, _bearer_matches, required_key

HTTP_SERVER = "srt/entrypoints/http_server.py"
AUTH = "srt/utils/auth.py"
BENCH = "benchmark/serving.py"
ROUTE_DECORATORS = ("api_route", "get", "post", "put", "delete")


def _decorator_routes(function: ast.AST) -> tuple[list[str], str | None]:
    """The literal paths of a handler's `@app.<method>("/path")` decorators and its auth level name."""
    paths, level = [], None
    for decorator in getattr(function, "decorator_list", []):
        if not isinstance(decorator, ast.Call):
            continue
        name = decorator.func
        if isinstance(name, ast.Attribute) and name.attr in ROUTE_DECORATORS and decorator.args:
            first = decorator.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                paths.append(first.value)
        if isinstance(name, ast.Name) and name.id == "auth_level" and decorator.args:
            argument = decorator.args[0]
            if isinstance(argument, ast.Attribute):
                level = argument.attr
    return paths, level


def _routes_by_level(source: str) -> dict[str, set[str]]:
    levels: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            paths, level = _decorator_routes(node)
            levels.setdefault(level or "NORMAL", set()).update(paths)
    return levels


def _refserver_paths() -> set[str]:
    # The route table needs no model: the handlers read the state only when called.
    app = build_app(SimpleNamespace())
    return {route.resource.canonical for route in app.router.routes() if route.resource is not None}


def test_refserver_guards_exactly_the_admin_routes_sglang_has(sglang_source) -> None:
    """`@auth_level(AuthLevel.ADMIN_OPTIONAL)` marks SGLang's admin routes, among them `/flush_cache`
    (srt/entrypoints/http_server.py:1025-1026) and `/abort_request` (:1721-1722). Of the routes the
    reference server serves, it treats as admin exactly those SGLang marks."""
    levels = _routes_by_level(sglang_source(HTTP_SERVER))
    admin = levels.get("ADMIN_OPTIONAL", set())
    assert {"/flush_cache", "/abort_request"} <= admin
    assert "/generate" not in admin and "/server_info" not in admin
    served = _refserver_paths()
    assert "/flush_cache" in served and "/generate" in served
    assert ADMIN_ROUTES == admin & served


def _sglang_auth(source: str) -> dict[str, Any]:
    """auth.py's decision function, run from the wheel's text (it needs only the standard library).
    The module is registered while it runs: its dataclass resolves annotations through sys.modules."""
    module = types.ModuleType("sglang_auth_under_contract")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, AUTH, "exec"), module.__dict__)  # noqa: S102 - SGLang's own code, read, not copied
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


KEYS = {"none": None, "api": "api-key-0123", "admin": "admin-key-4567"}
HEADERS = (None, "Bearer api-key-0123", "Bearer admin-key-4567", "bearer admin-key-4567", "Bearer wrong-key-89",
           "Basic admin-key-4567", "Bearer", "Bearer  admin-key-4567")
PATHS = ("/generate", "/server_info", "/v1/completions", "/flush_cache", "/abort_request", "/health", "/health_generate",
         "/ready", "/metrics", "/no_such_route")


def test_refserver_decides_every_request_as_sglang(sglang_source) -> None:
    """`decide_request_auth` (srt/utils/auth.py:74-151): OPTIONS and /health*, /ready*, /metrics* are
    open; ADMIN_OPTIONAL routes want the admin key when one is set and then refuse the API key
    (:133-141); other routes want the API key when set and are open with only an admin key
    (:148-151); the key is `Authorization: Bearer <key>`, scheme case-insensitive, compared with
    `secrets.compare_digest` (:108-117). The reference server's guard agrees on every combination."""
    sglang = _sglang_auth(sglang_source(AUTH))
    level_of = {path: sglang["AuthLevel"].ADMIN_OPTIONAL if path in ("/flush_cache", "/abort_request") else sglang["AuthLevel"].NORMAL
                for path in PATHS}
    checked = 0
    for api_key, admin_key, method, path, header in itertools.product(
            (None, KEYS["api"]), (None, KEYS["admin"]), ("GET", "POST", "OPTIONS"), PATHS, HEADERS):
        theirs = sglang["decide_request_auth"](method=method, path=path, authorization_header=header, api_key=api_key,
                                               admin_api_key=admin_key, auth_level=level_of[path]).allowed
        state = SimpleNamespace(api_key=api_key, admin_api_key=admin_key)
        needed = required_key(state, method, path)
        ours = needed is None or _bearer_matches(header, needed)
        assert ours == theirs, f"api_key={api_key} admin={admin_key} {method} {path} header={header!r}: ours {ours}, SGLang {theirs}"
        checked += 1
    assert checked == 2 * 2 * 3 * len(PATHS) * len(HEADERS)


def _function(source: str, name: str) -> ast.AsyncFunctionDef:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"{BENCH} has no function {name}")


def _request_functions(source: str) -> dict[str, str]:
    """ASYNC_REQUEST_FUNCS: backend name -> request function name."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ASYNC_REQUEST_FUNCS" for t in node.targets):
            return {key.value: value.id for key, value in zip(node.value.keys, node.value.values, strict=False)}
    raise AssertionError("ASYNC_REQUEST_FUNCS not found")


def _oai_sampling_defaults(function: ast.AsyncFunctionDef) -> dict[str, Any]:
    """The constant sampling fields an OpenAI request function sets (`payload["x"] = constant`), and
    every string key it mentions (to see whether top_p is ever sent)."""
    constants: dict[str, Any] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            if isinstance(target.value, ast.Name) and target.value.id == "payload" and isinstance(target.slice, ast.Constant) \
                    and isinstance(node.value, ast.Constant):
                constants[target.slice.value] = node.value.value
    return constants


def _mentioned_strings(function: ast.AST) -> set[str]:
    return {node.value for node in ast.walk(function) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


ROW = DatasetRow("Tell me about the sea.", 6, 16)


@pytest.mark.parametrize("backend", ["sglang-oai", "sglang-oai-chat"])
def test_openai_backends_send_bench_servings_temperature_and_no_top_p(sglang_source, backend) -> None:
    """bench_serving's OpenAI request functions (`benchmark/serving.py:290-323` completions,
    `:408-482` chat; ASYNC_REQUEST_FUNCS at :976-990 maps sglang-oai, sglang-oai-chat, vllm and
    lmdeploy to them) set `payload["temperature"] = 0.0` unless the extra body has a temperature
    (:311-313, :471-473) and never send top_p: its --temperature and --top-p flags do not reach
    these backends. specsuite bench with the same flags sends the same fields."""
    source = sglang_source(BENCH)
    function = _function(source, _request_functions(source)[backend])
    theirs = _oai_sampling_defaults(function)
    assert "temperature" in theirs and "top_p" not in _mentioned_strings(function)
    settings = RequestSettings(backend=backend, base_url="http://127.0.0.1:1", temperature=0.7, top_p=0.9)
    payload = bench_body(settings, ROW)
    assert payload["temperature"] == theirs["temperature"]
    assert "top_p" not in payload
    # The extra body still wins, as in bench_serving (its payload.update(extra_request_body) comes last).
    extra = bench_body(RequestSettings(backend=backend, base_url="http://127.0.0.1:1", extra_request_body={"temperature": 0.5, "top_p": 0.8}), ROW)
    assert (extra["temperature"], extra["top_p"]) == (0.5, 0.8)


def test_native_backend_sends_the_flags_as_bench_serving(sglang_source) -> None:
    """bench_serving's native request function (`benchmark/serving.py:692-706`) builds
    sampling_params from `args.temperature`, max_new_tokens and ignore_eos, and adds
    `top_p` only when `args.top_p < 1.0`. specsuite bench's native payload has the same keys."""
    source = sglang_source(BENCH)
    function = _function(source, _request_functions(source)["sglang"])
    literal = next(node.value for node in ast.walk(function) if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "sampling_params" for t in node.targets))
    assert {key.value for key in literal.keys} == {"temperature", "max_new_tokens", "ignore_eos"}
    guard = next(node for node in ast.walk(function) if isinstance(node, ast.If) and "top_p" in ast.unparse(node.test))
    assert ast.unparse(guard.test) == "args.top_p < 1.0"
    base = {"backend": "sglang", "base_url": "http://127.0.0.1:1", "temperature": 0.7}
    assert set(bench_body(RequestSettings(**base), ROW)["sampling_params"]) == {"temperature", "max_new_tokens", "ignore_eos"}
    with_top_p = bench_body(RequestSettings(**base, top_p=0.9), ROW)["sampling_params"]
    assert (with_top_p["temperature"], with_top_p["top_p"]) == (0.7, 0.9)


def bench_body(settings: RequestSettings, row: DatasetRow) -> dict:
    """The body the bench sends for one row: its typed request through the server side's `BenchWire`."""
    return settings.wire.body(settings.bench_request(row))
