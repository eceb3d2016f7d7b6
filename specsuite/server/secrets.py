"""API-key loading and redaction of secrets from results, server-log tails and error messages.

Two keys, each only from the environment or from a file the environment names:

* the API key (``SPECSUITE_API_KEY`` or ``SPECSUITE_API_KEY_FILE``), SGLang's ``--api-key``,
  sent on every request;
* the admin key (``SPECSUITE_ADMIN_API_KEY`` or ``SPECSUITE_ADMIN_API_KEY_FILE``), SGLang's
  ``--admin-api-key``, sent only to admin endpoints (``/flush_cache``): with it set, SGLang
  accepts nothing else there (``srt/utils/auth.py:133-141``).

There is deliberately no command-line flag for either: anything in argv is visible to every
user through ``ps`` and ends up in CI logs and shell history. ``load_secrets`` gives both, for
everything that redacts.

Redaction works on three levels:

* every occurrence of a known secret (at least ``MIN_SECRET_LEN`` characters) in any string;
* the value of any mapping key whose name looks secret (``api_key``, ``admin_api_key``,
  ``apikey``, ``authorization``, ``password``, ``hf_token``...), see ``is_secret_key_name``;
* ``--api-key X``, ``--api-key=X``, ``--admin-api-key X`` and ``Bearer X`` inside strings,
  because SGLang's ``/server_info`` echoes the key in ``launch_command`` and in plain fields.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from specsuite.errors import SpecsuiteError

API_KEY_ENV = "SPECSUITE_API_KEY"
API_KEY_FILE_ENV = "SPECSUITE_API_KEY_FILE"
ADMIN_API_KEY_ENV = "SPECSUITE_ADMIN_API_KEY"
ADMIN_API_KEY_FILE_ENV = "SPECSUITE_ADMIN_API_KEY_FILE"
REDACTED = "***"
# Shorter strings would also match innocent text ("abc" in every other word).
MIN_SECRET_LEN = 4

# Whole snake-case words that make a key name secret wherever they appear.
_SECRET_WORDS = frozenset({"key", "apikey", "secret", "password", "passwd", "authorization"})
# "token" is secret only as the whole name or after one of these words: names such as
# ``stop_token_ids``, ``pad_token`` or ``speculative_token_map`` hold model data, not credentials.
_TOKEN_QUALIFIERS = frozenset({"access", "auth", "bearer", "hf", "api", "refresh", "session", "secret"})

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_FLAG = re.compile(r"(--(?:admin[-_])?api[-_]key)(=|\s+)(?:\"[^\"]*\"|'[^']*'|\S+)")
_BEARER = re.compile(r"(\bBearer\s+)[^\s\"',]+", re.IGNORECASE)
_KEY_FLAGS_ARGV = frozenset({"--api-key", "--admin-api-key", "--api_key", "--admin_api_key"})


def _load_key(env: Mapping[str, str], direct_name: str, file_env_name: str, what: str) -> str | None:
    """The key from ``direct_name`` or the file named by ``file_env_name``; None when neither is set.

    Setting both is rejected, so a stale variable cannot silently win. Errors name the file,
    never its content.
    """
    direct = env.get(direct_name, "").strip()
    file_name = env.get(file_env_name, "").strip()
    if direct and file_name:
        raise SpecsuiteError(f"set only one of {direct_name} and {file_env_name}, not both")
    if direct:
        return direct
    if not file_name:
        return None
    try:
        with open(file_name, encoding="utf-8") as handle:
            key = handle.read().strip()
    except OSError as exc:
        raise SpecsuiteError(
            f"cannot read {what} file {file_name} ({file_env_name}): {exc.strerror or type(exc).__name__}"
        ) from None
    except UnicodeDecodeError:
        raise SpecsuiteError(f"{what} file {file_name} ({file_env_name}) is not UTF-8 text") from None
    if not key:
        raise SpecsuiteError(f"{what} file {file_name} ({file_env_name}) is empty")
    return key


def load_api_key(env: Mapping[str, str] = os.environ) -> str | None:
    """Return the API key from ``SPECSUITE_API_KEY`` or the file in ``SPECSUITE_API_KEY_FILE``."""
    return _load_key(env, API_KEY_ENV, API_KEY_FILE_ENV, "API key")


def load_admin_api_key(env: Mapping[str, str] = os.environ) -> str | None:
    """Return the admin key from ``SPECSUITE_ADMIN_API_KEY`` or the file in ``SPECSUITE_ADMIN_API_KEY_FILE``."""
    return _load_key(env, ADMIN_API_KEY_ENV, ADMIN_API_KEY_FILE_ENV, "admin API key")


def load_secrets(env: Mapping[str, str] = os.environ) -> list[str]:
    """Every key specsuite holds (API key, admin key), for redaction; unset ones are left out."""
    return [key for key in (load_api_key(env), load_admin_api_key(env)) if key]


def is_secret_key_name(name: str) -> bool:
    """True when a mapping key such as ``admin_api_key`` or ``Authorization`` names a secret.

    Words are split on ``_``, ``-``, spaces and camelCase; ``tokenizer_path``,
    ``max_total_num_tokens`` and ``completion_tokens`` are not secret.
    """
    words = re.split(r"[_\-\s.]+", _CAMEL_BOUNDARY.sub("_", name).lower())
    words = [word for word in words if word]
    if any(word in _SECRET_WORDS for word in words):
        return True
    if words and words[-1] == "token":
        return len(words) == 1 or words[-2] in _TOKEN_QUALIFIERS
    return False


def _usable_secrets(secrets: Iterable[str | None]) -> list[str]:
    # Longest first, so a secret that contains another one is replaced whole.
    unique = {s for s in secrets if s and len(s) >= MIN_SECRET_LEN}
    return sorted(unique, key=len, reverse=True)


def _redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _KEY_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Return ``text`` with the given secrets, key flags and bearer tokens replaced by ``***``."""
    return _redact_text(text, _usable_secrets(secrets))


def _redact_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return _redact_text(value, secrets)
    if isinstance(value, Mapping):
        return {
            key: _mask(item, secrets) if isinstance(key, str) and is_secret_key_name(key) else _redact_value(item, secrets)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        items = [_redact_value(item, secrets) for item in value]
        # argv-style lists: ["--api-key", "X"] keeps the flag, hides the value.
        for index in range(len(items) - 1):
            if isinstance(items[index], str) and items[index] in _KEY_FLAGS_ARGV and isinstance(items[index + 1], str):
                items[index + 1] = REDACTED
        return tuple(items) if isinstance(value, tuple) else items
    return value


def _mask(value: Any, secrets: list[str]) -> Any:
    # None, "" and booleans reveal nothing, and keeping them shows whether a key was set.
    if value is None or value == "" or isinstance(value, bool):
        return value
    return REDACTED


def redact(obj: Any, secrets: Iterable[str | None] = ()) -> Any:
    """Return a redacted deep copy of ``obj`` (dicts, lists, tuples and strings are copied).

    Secrets shorter than ``MIN_SECRET_LEN`` and None are ignored. Other values (numbers,
    arrays, objects) are returned as they are.
    """
    return _redact_value(obj, _usable_secrets(secrets))
