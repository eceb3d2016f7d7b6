"""The reference server's aiohttp application: every route in one place.

The native SGLang routes and the API-key middleware live in specsuite.refserver.server, the OpenAI-compatible
ones in specsuite.refserver.openai_routes (which builds on specsuite.refserver.server's helpers); this module joins
them, so neither of the two imports the other's importer and there is no import cycle.
"""

from __future__ import annotations

from aiohttp import web

from specsuite.refserver.openai_routes import add_openai_routes
from specsuite.refserver.server import (
    STATE_KEY,
    ServerState,
    abort_request,
    api_key_middleware,
    detokenize,
    flush_cache,
    generate,
    health,
    metrics,
    model_info,
    ready,
    server_info,
    tokenize,
)


def build_app(state: ServerState) -> web.Application:
    """The application with every route: the native ones of specsuite.refserver.server, then the OpenAI ones."""
    app = web.Application(middlewares=[api_key_middleware], client_max_size=64 * 1024 * 1024)
    app[STATE_KEY] = state
    app.router.add_route("POST", "/generate", generate)
    app.router.add_route("PUT", "/generate", generate)
    for path, handler in (("/model_info", model_info), ("/get_model_info", model_info), ("/server_info", server_info),
                          ("/get_server_info", server_info), ("/health", health), ("/health_generate", health), ("/ready", ready),
                          ("/metrics", metrics)):
        app.router.add_get(path, handler)
    for method in ("GET", "POST"):
        app.router.add_route(method, "/flush_cache", flush_cache)
    for path, handler in (("/tokenize", tokenize), ("/v1/tokenize", tokenize), ("/detokenize", detokenize),
                          ("/v1/detokenize", detokenize), ("/abort_request", abort_request)):
        app.router.add_post(path, handler)
    add_openai_routes(app)
    return app
