"""HTTP plumbing shared by the server clients: timeouts, auth, one-line errors and SSE parsing.

Every request goes through `HttpTransport.request`, which always applies a (connect, read) timeout
and turns every transport failure or unexpected status into a one-line `RequestFault` (a
`SpecsuiteError` that carries its `specsuite.server.faults.ErrorClass`, the HTTP status and Retry-After).
The API key travels only in the `Authorization: Bearer` header and is scrubbed from every message.
The admin key, when there is one, replaces it on admin requests only (`request(..., admin=True)`):
SGLang's admin endpoints accept only the admin key once the server has one (`srt/utils/auth.py:133-141`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import orjson
import requests

from specsuite.errors import SpecsuiteError
from specsuite.server.faults import ErrorClass, RequestFault, parse_retry_after, status_class
from specsuite.server.idle_connections import idle_expiring_session
from specsuite.server.secrets import REDACTED, redact_text

ERROR_TEXT_LIMIT = 200


def display_url(url: str) -> str:
    """The URL without user:password@ credentials and without a trailing slash."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


def shorten(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """Collapse whitespace so the text fits on one line, and cut it to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def server_error_text(response: requests.Response) -> str:
    """The server's own error message from any of SGLang's error shapes, else the raw body."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return response.text
    return error_message_of(body) or response.text


def error_message_of(body: Any) -> str | None:
    """The message of an error body, or None when the body is not an error.

    Shapes seen from SGLang: {"error": "text"} (schema gate), {"error": {"message": ...}} (runtime
    errors, in-stream errors), {"object": "error", "message": ...} (OpenAI routes, HTTPException),
    and FastAPI's {"detail": ...}.
    """
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if body.get("object") == "error":
        return str(body.get("message") or body)
    if "detail" in body and len(body) == 1:
        return str(body["detail"])
    return None


def encode_json(payload: Any) -> bytes:
    """Strict JSON encoding: NaN/Infinity would be rejected by the server, so reject them here."""
    try:
        return json.dumps(payload, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise SpecsuiteError(f"request payload is not valid JSON: {shorten(str(exc))}") from None


def is_refused(exc: BaseException) -> bool:
    """True when a connection error was a refused connection (nothing listening on the port)."""
    text = repr(exc).lower()
    return "refused" in text or "errno 111" in text or "winerror 10061" in text


class HttpTransport:
    """A requests.Session bound to one server, with timeouts, bearer auth and one-line errors."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0, connect_timeout_s: float = 5.0,
                 admin_api_key: str | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SpecsuiteError(
                f"server URL must look like http://host:port, got {shorten(display_url(base_url))!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.display_url = display_url(base_url)
        self.timeout = (connect_timeout_s, timeout_s)
        self._api_key = api_key or None
        self._admin_api_key = admin_api_key or None
        # Connections idle near the server's keep-alive timeout are not reused (specsuite/server/idle_connections.py).
        self._session = idle_expiring_session()
        # Proxies from the environment would route a local server through a remote hop.
        self._session.trust_env = False
        if self._api_key:
            self._session.headers["Authorization"] = f"Bearer {self._api_key}"

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None

    def close(self) -> None:
        self._session.close()

    def scrub(self, text: str) -> str:
        """Remove the API key, bearer headers and URL credentials from text bound for a message."""
        for key in (self._api_key, self._admin_api_key):
            if key:
                # Directly as well: redact_text skips secrets too short to replace safely in general.
                text = text.replace(key, REDACTED)
        return redact_text(text.replace(self.base_url, self.display_url))

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        stream: bool = False,
        admin: bool = False,
    ) -> requests.Response:
        """Send one request; transport failures become a one-line SpecsuiteError. Any status returns.

        `admin=True` marks an admin endpoint: the admin key, when set, goes in place of the API key.
        """
        url = self.base_url + path
        headers = {}
        if admin and self._admin_api_key:
            headers["Authorization"] = f"Bearer {self._admin_api_key}"
        data = None
        if json_body is not None:
            data = encode_json(json_body)
            headers["Content-Type"] = "application/json"
        if stream:
            headers["Accept"] = "text/event-stream"
        try:
            return self._session.request(
                method, url, data=data, params=params, headers=headers, stream=stream, timeout=self.timeout
            )
        except requests.exceptions.ConnectTimeout:
            raise RequestFault(
                ErrorClass.CONNECT_TIMEOUT,
                f"cannot connect to {self.display_url}: no answer within {self.timeout[0]:g} s — "
                "is the host reachable?"
            ) from None
        except requests.exceptions.ReadTimeout:
            raise RequestFault(
                ErrorClass.TIMEOUT,
                f"{method} {path} on {self.display_url} timed out: no response within {self.timeout[1]:g} s"
            ) from None
        except requests.exceptions.ConnectionError as exc:
            if is_refused(exc):
                raise RequestFault(
                    ErrorClass.CONNECTION_REFUSED,
                    f"cannot connect to {self.display_url}: connection refused — is the server running?"
                ) from None
            if "NameResolutionError" in repr(exc):
                raise RequestFault(
                    ErrorClass.CONNECTION_REFUSED,
                    f"cannot connect to {self.display_url}: host name {urlsplit(url).hostname!r} not found"
                ) from None
            # Anything else on an established connection: the server dropped or reset it.
            raise RequestFault(
                ErrorClass.CONNECTION_RESET,
                f"connection to {self.display_url} broke during {method} {path}: {self.scrub(shorten(str(exc)))}",
            ) from None
        except requests.exceptions.ChunkedEncodingError as exc:
            raise RequestFault(
                ErrorClass.CONNECTION_RESET,
                f"{method} {path} on {self.display_url} broke off mid-body: {self.scrub(shorten(str(exc)))}",
            ) from None
        except requests.exceptions.RequestException as exc:
            raise RequestFault(
                ErrorClass.OTHER, f"{method} {path} on {self.display_url} failed: {self.scrub(shorten(str(exc)))}"
            ) from None

    def auth_error(self, response: requests.Response, admin: bool = False) -> RequestFault | None:
        """The one-line error for a 401/403 answer, or None for any other status. `admin`: the
        request went to an admin endpoint, where SGLang wants the admin key once it has one."""
        if response.status_code not in (401, 403):
            return None
        path = urlsplit(response.url).path
        if admin and not self._admin_api_key:
            return RequestFault(
                ErrorClass.HTTP_AUTH,
                f"server {self.display_url} refused {path} (HTTP {response.status_code}): it needs the admin key "
                "when it runs with --admin-api-key; set SPECSUITE_ADMIN_API_KEY (or SPECSUITE_ADMIN_API_KEY_FILE)",
                status=response.status_code,
            )
        if admin:
            return RequestFault(ErrorClass.HTTP_AUTH, f"admin API key rejected by {self.display_url} (HTTP {response.status_code} on {path})",
                                status=response.status_code)
        if not self.has_api_key:
            return RequestFault(
                ErrorClass.HTTP_AUTH,
                f"server {self.display_url} requires an API key: set SPECSUITE_API_KEY "
                f"(HTTP {response.status_code})",
                status=response.status_code,
            )
        return RequestFault(
            ErrorClass.HTTP_AUTH,
            f"API key rejected by {self.display_url} (HTTP {response.status_code} on "
            f"{urlsplit(response.url).path})",
            status=response.status_code,
        )

    def status_error(self, method: str, path: str, response: requests.Response, admin: bool = False) -> RequestFault:
        """A one-line error for a non-2xx answer, carrying the server's (shortened) error text,
        the status and any Retry-After."""
        auth = self.auth_error(response, admin)
        if auth is not None:
            return auth
        try:
            detail = self.scrub(shorten(server_error_text(response)))
        except requests.exceptions.RequestException:
            detail = "(the error body broke off)"
        return RequestFault(status_class(response.status_code), f"{method} {path} on {self.display_url} failed with HTTP {response.status_code}: {detail}",
                            status=response.status_code, retry_after_s=parse_retry_after(response.headers.get("Retry-After")))

    def json_or_raise(self, method: str, path: str, response: requests.Response) -> Any:
        """The decoded JSON body of a 2xx answer; anything else becomes a one-line SpecsuiteError."""
        if not response.ok:
            raise self.status_error(method, path, response)
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            kind = response.headers.get("Content-Type", "unknown content type")
            raise RequestFault(
                ErrorClass.RESPONSE_NOT_JSON,
                f"{method} {path} on {self.display_url} returned non-JSON ({kind}): "
                f"{self.scrub(shorten(response.text, 80))}"
            ) from None

    def iter_sse(self, path: str, response: requests.Response) -> Iterator[dict[str, Any]]:
        """Yield the JSON objects of an SSE stream until `data: [DONE]`.

        Raises a one-line SpecsuiteError for an in-stream error object, a line that is neither an SSE
        field nor JSON data, a stall longer than the read timeout, or a stream that ends without
        [DONE]. The response is always closed.
        """
        where = f"stream from POST {path} on {self.display_url}"
        with response:
            if not response.ok:
                raise self.status_error("POST", path, response)
            try:
                for raw in response.iter_lines():
                    line = raw.decode("utf-8", errors="replace")
                    if not line or line.startswith(":"):
                        continue  # event separator or SSE comment
                    field, _, value = line.partition(":")
                    if field in ("event", "id", "retry"):
                        continue
                    if field != "data":
                        raise RequestFault(
                            ErrorClass.STREAM_NON_JSON, f"{where} sent a line that is not SSE: {self.scrub(shorten(line, 80))!r}"
                        )
                    data = value[1:] if value.startswith(" ") else value
                    if data.strip() == "[DONE]":
                        return
                    try:
                        item = orjson.loads(data)
                    except orjson.JSONDecodeError:
                        raise RequestFault(
                            ErrorClass.STREAM_NON_JSON,
                            f"{where} sent a non-JSON data line: {self.scrub(shorten(data, 80))!r}"
                        ) from None
                    message = error_message_of(item)
                    if message is not None:
                        raise RequestFault(ErrorClass.STREAM_ERROR_OBJECT, f"{where} reported an error: {self.scrub(shorten(message))}")
                    if not isinstance(item, dict):
                        raise RequestFault(
                            ErrorClass.STREAM_NON_JSON, f"{where} sent JSON that is not an object: {self.scrub(shorten(data, 80))!r}"
                        )
                    yield item
            except requests.exceptions.ConnectionError as exc:
                # requests reports a read timeout inside a body stream as a ConnectionError.
                if "timed out" in str(exc).lower():
                    raise RequestFault(ErrorClass.TIMEOUT, f"{where} stalled: no data for {self.timeout[1]:g} s") from None
                raise RequestFault(ErrorClass.STREAM_TRUNCATED, f"{where} broke off: {self.scrub(shorten(str(exc)))}") from None
            except requests.exceptions.RequestException as exc:
                raise RequestFault(ErrorClass.STREAM_TRUNCATED, f"{where} broke off: {self.scrub(shorten(str(exc)))}") from None
        raise RequestFault(ErrorClass.STREAM_TRUNCATED, f"{where} ended without data: [DONE] (truncated stream)")



def int_list(value: Any, what: str) -> list[int]:
    """Validate that a server field is a list of ints (bools excluded), else a one-line error."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise SpecsuiteError(f"{what} is not a list of token ids: {shorten(repr(value), 80)}")
    return value


class HttpServerClient:
    """Base of the server clients: one `HttpTransport`, the URL it may show, `close` and `with`."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0, connect_timeout_s: float = 5.0,
                 admin_api_key: str | None = None) -> None:
        self._http = HttpTransport(base_url, api_key, timeout_s, connect_timeout_s, admin_api_key=admin_api_key)

    @property
    def base_url(self) -> str:
        """The server URL as it may be shown or stored: no credentials."""
        return self._http.display_url

    def close(self) -> None:
        self._http.close()

    def _probe(self, path: str) -> bool:
        """GET `path`: True on 200. A readiness poll runs while the server may still be starting,
        so unreachable means "not yet" (False), as does any other status."""
        try:
            response = self._http.request("GET", path)
        except SpecsuiteError:
            return False
        with response:
            return response.status_code == 200

    def metrics_text(self) -> str | None:
        """GET /metrics as Prometheus text, or None when the server exports none (404)."""
        response = self._http.request("GET", "/metrics")
        with response:
            if response.status_code == 404:
                return None
            if not response.ok:
                raise self._http.status_error("GET", "/metrics", response)
            return response.text

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
