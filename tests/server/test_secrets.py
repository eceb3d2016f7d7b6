"""Tests for specsuite.server.secrets: API-key loading, redaction of data and of text."""

from __future__ import annotations

import copy

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server.secrets import (
    ADMIN_API_KEY_ENV,
    ADMIN_API_KEY_FILE_ENV,
    API_KEY_ENV,
    API_KEY_FILE_ENV,
    REDACTED,
    is_secret_key_name,
    load_admin_api_key,
    load_api_key,
    load_secrets,
    redact,
    redact_text,
)

KEY = "sk-live-0123456789abcdef"


def test_key_from_environment_is_stripped():
    assert load_api_key({API_KEY_ENV: f"  {KEY}\n"}) == KEY


def test_no_key_configured_gives_none():
    assert load_api_key({}) is None
    assert load_api_key({API_KEY_ENV: "   "}) is None


def test_key_from_file_is_stripped(tmp_path):
    key_file = tmp_path / "key.txt"
    key_file.write_text(f"\n{KEY}  \n")
    assert load_api_key({API_KEY_FILE_ENV: str(key_file)}) == KEY


def test_missing_key_file_names_the_file(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(SpecsuiteError) as info:
        load_api_key({API_KEY_FILE_ENV: str(missing)})
    message = str(info.value)
    assert str(missing) in message and "\n" not in message


def test_undecodable_key_file_never_shows_its_content(tmp_path):
    key_file = tmp_path / "key.bin"
    key_file.write_bytes(b"hunter2-secret\xff\xfe")
    with pytest.raises(SpecsuiteError) as info:
        load_api_key({API_KEY_FILE_ENV: str(key_file)})
    assert str(key_file) in str(info.value)
    assert "hunter2" not in str(info.value)


def test_empty_key_file_is_an_error(tmp_path):
    key_file = tmp_path / "key.txt"
    key_file.write_text("  \n")
    with pytest.raises(SpecsuiteError, match="empty"):
        load_api_key({API_KEY_FILE_ENV: str(key_file)})


def test_both_sources_set_is_an_error(tmp_path):
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY)
    with pytest.raises(SpecsuiteError, match="only one"):
        load_api_key({API_KEY_ENV: KEY, API_KEY_FILE_ENV: str(key_file)})


ADMIN_KEY = "sk-admin-9876543210fedcba"


def test_admin_key_from_environment_or_file(tmp_path):
    assert (ADMIN_API_KEY_ENV, ADMIN_API_KEY_FILE_ENV) == ("SPECSUITE_ADMIN_API_KEY", "SPECSUITE_ADMIN_API_KEY_FILE")
    assert load_admin_api_key({ADMIN_API_KEY_ENV: f" {ADMIN_KEY}\n"}) == ADMIN_KEY
    key_file = tmp_path / "admin.txt"
    key_file.write_text(f"{ADMIN_KEY}\n")
    assert load_admin_api_key({ADMIN_API_KEY_FILE_ENV: str(key_file)}) == ADMIN_KEY
    assert load_admin_api_key({API_KEY_ENV: KEY}) is None  # the API key is not the admin key
    assert load_api_key({ADMIN_API_KEY_ENV: ADMIN_KEY}) is None


def test_admin_key_errors_name_its_variable_never_its_content(tmp_path):
    key_file = tmp_path / "admin.txt"
    key_file.write_text(ADMIN_KEY)
    with pytest.raises(SpecsuiteError, match="only one of SPECSUITE_ADMIN_API_KEY and SPECSUITE_ADMIN_API_KEY_FILE"):
        load_admin_api_key({ADMIN_API_KEY_ENV: ADMIN_KEY, ADMIN_API_KEY_FILE_ENV: str(key_file)})
    with pytest.raises(SpecsuiteError) as info:
        load_admin_api_key({ADMIN_API_KEY_FILE_ENV: str(tmp_path / "missing.txt")})
    assert "admin API key file" in str(info.value) and ADMIN_API_KEY_FILE_ENV in str(info.value)


def test_load_secrets_holds_both_keys_for_redaction():
    secrets = load_secrets({API_KEY_ENV: KEY, ADMIN_API_KEY_ENV: ADMIN_KEY})
    assert secrets == [KEY, ADMIN_KEY]
    assert load_secrets({}) == []
    assert redact({"note": f"flush with {ADMIN_KEY}", "admin_api_key": ADMIN_KEY}, secrets) == {"note": f"flush with {REDACTED}", "admin_api_key": REDACTED}


@pytest.mark.parametrize(
    "name",
    ["api_key", "admin_api_key", "apikey", "apiKey", "API_KEY", "Authorization", "password", "secret",
     "token", "hf_token", "access_token", "x-api-key", "client_secret", "db_password"],
)
def test_secret_key_names(name):
    assert is_secret_key_name(name)


@pytest.mark.parametrize(
    "name",
    ["tokenizer_path", "max_total_num_tokens", "completion_tokens", "prompt_tokens", "stop_token_ids",
     "speculative_token_map", "pad_token", "bos_token_id", "keys", "monkey", "secretary_count", "model_path"],
)
def test_non_secret_key_names(name):
    assert not is_secret_key_name(name)


def test_redact_nested_structure_is_a_deep_copy():
    original = {
        "api_key": KEY,
        "admin_api_key": None,
        "tokenizer_path": "/models/tok",
        "completion_tokens": 17,
        "enable_api_key": True,
        "launch_command": f"python -m sglang.launch_server --api-key {KEY} --admin-api-key=adminpass --port 30000",
        "internal_states": [{"api_key": "other", "note": f"used {KEY} here"}],
        "argv": ("--api-key", "plainvalue", "--port", "1"),
        "headers": "Authorization: Bearer abc.def-ghi",
    }
    before = copy.deepcopy(original)
    redacted = redact(original, [KEY])
    assert original == before
    assert redacted["api_key"] == REDACTED
    assert redacted["admin_api_key"] is None
    assert redacted["enable_api_key"] is True
    assert redacted["tokenizer_path"] == "/models/tok"
    assert redacted["completion_tokens"] == 17
    assert redacted["launch_command"] == (
        "python -m sglang.launch_server --api-key *** --admin-api-key=*** --port 30000"
    )
    assert redacted["internal_states"] == [{"api_key": REDACTED, "note": "used *** here"}]
    assert redacted["argv"] == ("--api-key", REDACTED, "--port", "1")
    assert redacted["headers"] == "Authorization: Bearer ***"


def test_short_and_empty_secrets_are_ignored():
    assert redact("the cat sat", ["cat", "", None]) == "the cat sat"


def test_longer_secret_wins_over_its_substring():
    assert redact_text("token abcd1234wxyz", ["abcd", "abcd1234wxyz"]) == "token ***"
