"""Tests for specsuite.server.identity: the fields it keeps, and the secrets it must never keep."""

from __future__ import annotations

import json

import pytest

from specsuite.server.identity import ServerIdentity, collect_secrets, cuda_graph_state, redact_command
from specsuite.server.vocab import VocabInfo

API_KEY = "sk-planted-4f9a-SECRET"
ADMIN_KEY = "adm-planted-77c1"
HF_TOKEN = "hf_plantedTOKENvalue"

MODEL_INFO = {
    "model_path": "/models/tiny-eagle",
    "tokenizer_path": "/models/tiny-eagle",
    "served_model_name": "tiny",
    "is_generation": True,
}


def server_info() -> dict:
    args = {
        "model_path": "/models/tiny-eagle",
        "tokenizer_path": "/models/tiny-eagle",
        "served_model_name": "tiny",
        "api_key": API_KEY,
        "admin_api_key": ADMIN_KEY,
        "hf_token": HF_TOKEN,
        "random_seed": 42,
        "max_running_requests": 48,
        "max_total_num_tokens": 123456,
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 5,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 6,
        "speculative_use_rejection_sampling": True,
        "speculative_token_map": None,
        "disable_cuda_graph": False,
        "cuda_graph_max_bs": 32,
    }
    return {
        **args,
        "launch_command": (
            f"python -m sglang.launch_server --model-path /models/tiny-eagle --api-key {API_KEY} "
            f"--admin-api-key={ADMIN_KEY} --speculative-num-steps 5"
        ),
        "version": "0.5.23",
        "internal_states": [{**args, "avg_spec_accept_length": 3.1}],
    }


VOCAB = VocabInfo(
    tokenizer_length=8117,
    vocab_size=8192,
    eos_ids=frozenset({2}),
    special_ids=frozenset({0, 1, 2}),
    empty_decoding_ids=frozenset(),
    token0_text="!",
    source={"vocab_size": "config.json (/models/tiny-eagle/config.json)"},
)


@pytest.fixture
def identity() -> ServerIdentity:
    return ServerIdentity.from_server(
        "http://127.0.0.1:30000/", MODEL_INFO, server_info(), VOCAB, extra={"arm": "candidate"}
    )


def test_no_secret_anywhere(identity):
    dumped = json.dumps(identity.to_dict()) + "\n".join(identity.header_lines())
    for secret in (API_KEY, ADMIN_KEY, HF_TOKEN):
        assert secret not in dumped
    assert "api_key" not in dumped
    assert "--api-key ***" in identity.server_args["launch_command"]
    assert "--admin-api-key=***" in identity.server_args["launch_command"]


def test_fields_from_model_and_server_info(identity):
    assert identity.base_url == "http://127.0.0.1:30000"
    assert identity.model_path == "/models/tiny-eagle"
    assert identity.served_model_name == "tiny"
    assert identity.version == "0.5.23"
    assert identity.random_seed == 42
    assert identity.max_running_requests == 48
    assert (identity.tokenizer_length, identity.vocab_size) == (8117, 8192)
    assert identity.speculative["speculative_num_draft_tokens"] == 6
    assert identity.speculative["speculative_use_rejection_sampling"] is True
    assert identity.cuda_graph == "on"
    assert identity.cuda_graph_settings == {"disable_cuda_graph": False, "cuda_graph_max_bs": 32}
    assert identity.extra == {"arm": "candidate"}
    # Count fields and tokenizer_* contain "token" but are not credentials.
    assert identity.server_args["max_total_num_tokens"] == 123456
    assert identity.server_args["tokenizer_path"] == "/models/tiny-eagle"
    assert "speculative_token_map" in identity.server_args
    assert "internal_states" not in identity.server_args


def test_header_lines(identity):
    lines = identity.header_lines()
    assert lines[0] == "specsuite server: http://127.0.0.1:30000 model=/models/tiny-eagle version=0.5.23"
    assert lines[1] == (
        "vocab: tokenizer 8117, model vocab_size 8192 (config.json (/models/tiny-eagle/config.json)), padded rows 75"
    )
    assert lines[2] == "spec: EAGLE steps=5 topk=1 draft=6 rejection_sampling=True cuda_graph=on"
    assert lines[3] == "labels: arm=candidate"


def test_identity_without_spec_or_vocab():
    info = {"model_path": "/m", "version": "0.5.23", "disable_cuda_graph": True}
    ident = ServerIdentity.from_server("http://user:pw@host:1234", {"model_path": "/m"}, info)
    assert ident.base_url == "http://host:1234"
    assert ident.tokenizer_length is None
    assert ident.header_lines() == [
        "specsuite server: http://host:1234 model=/m version=0.5.23",
        "spec: off cuda_graph=off",
    ]


def test_collect_secrets_at_any_depth():
    found = collect_secrets(server_info())
    assert found == {API_KEY, ADMIN_KEY, HF_TOKEN}


def test_redact_command_keeps_other_flags():
    command = "serve --api-key K1 --tp 2 --hf-token=K2 --port 30000"
    assert redact_command(command) == "serve --api-key *** --tp 2 --hf-token=*** --port 30000"


def test_secret_value_is_scrubbed_from_unrelated_strings():
    info = {"api_key": API_KEY, "note": f"started with {API_KEY}", "version": "0.5.23"}
    ident = ServerIdentity.from_server("http://h:1", {"model_path": "/m"}, info)
    assert ident.server_args["note"] == "started with ***"


@pytest.mark.parametrize(
    ("info", "state"),
    [
        ({"disable_cuda_graph": False}, "on"),
        ({"disable_cuda_graph": False, "disable_decode_cuda_graph": True}, "off"),
        ({"cuda_graph_backend_decode": "disabled"}, "off"),
        ({}, "unknown"),
        # A live SGLang CPU server (tests/data/sglang_live) reports disable_cuda_graph False but runs no CUDA graph.
        ({"device": "cpu", "disable_cuda_graph": False}, "none (cpu)"),
    ],
)
def test_cuda_graph_state(info, state):
    assert cuda_graph_state(info) == state
