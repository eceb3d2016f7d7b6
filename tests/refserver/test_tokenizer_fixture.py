"""The committed tokenizer folder: loads with transformers, has the agreed ids, flags and
vocab padding, round-trips the corpus, stays small, and is reproduced byte for byte."""

from __future__ import annotations

import json
import random

import pytest
from transformers import AutoTokenizer

from specsuite.refserver import train_tokenizer
from specsuite.refserver.corpus import EOS, build_documents
from specsuite.refserver.train_tokenizer import (
    ADDED_TOKENS,
    MARKUP_TOKENS,
    SPECIAL_TOKENS,
    padded_vocab_size,
)

MODEL_DIR = train_tokenizer.DEFAULT_OUT


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(MODEL_DIR))


@pytest.fixture(scope="module")
def config() -> dict:
    return json.loads((MODEL_DIR / "config.json").read_text())


def test_length_is_in_the_agreed_range(tokenizer, config) -> None:
    assert 8000 <= len(tokenizer) <= 8200
    assert config["tokenizer_length"] == len(tokenizer)


def test_id_zero_decodes_to_exclamation_mark(tokenizer) -> None:
    assert tokenizer.decode([0]) == "!"


def test_added_tokens_hold_the_highest_ids_in_order(tokenizer) -> None:
    ids = tokenizer.convert_tokens_to_ids(list(ADDED_TOKENS))
    assert ids == list(range(len(tokenizer) - len(ADDED_TOKENS), len(tokenizer)))


@pytest.mark.parametrize("token", ADDED_TOKENS)
def test_added_token_is_atomic(tokenizer, token: str) -> None:
    token_id = tokenizer.convert_tokens_to_ids(token)
    ids = tokenizer.encode(f"x{token}y {token}\n", add_special_tokens=False)
    assert ids.count(token_id) == 2
    assert tokenizer.decode([token_id]) == token


def test_markup_survives_skip_special_tokens_and_roles_do_not(tokenizer) -> None:
    text = (
        "<|system|>\nBe brief.\n<|user|>\nWeather?\n<|assistant|>\n<think>\nCall the tool.\n</think>\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>\n<|tool|>\n{}\n<|endoftext|>'
    )
    decoded = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False), skip_special_tokens=True)
    for token in MARKUP_TOKENS:
        assert decoded.count(token) == 1, token
    for token in SPECIAL_TOKENS:
        assert token not in decoded, token


def test_eos_and_pad_ids_agree_with_configs(tokenizer, config) -> None:
    generation = json.loads((MODEL_DIR / "generation_config.json").read_text())
    assert tokenizer.eos_token == EOS
    assert tokenizer.eos_token_id == config["eos_token_id"] == generation["eos_token_id"]
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    assert tokenizer.bos_token is None and config["bos_token_id"] is None


def test_config_vocab_is_padded_with_at_least_eight_rows(tokenizer, config) -> None:
    vocab_size = config["vocab_size"]
    assert vocab_size % 64 == 0
    assert 8 <= vocab_size - len(tokenizer) < 8 + 64
    assert vocab_size == padded_vocab_size(len(tokenizer))


@pytest.mark.parametrize(
    ("length", "padded"),
    [(154856, 154880), (8100, 8128), (8120, 8128), (8121, 8192), (8128, 8192), (64, 128)],
)
def test_padded_vocab_size_rule(length: int, padded: int) -> None:
    assert padded_vocab_size(length) == padded


def test_corpus_samples_round_trip(tokenizer) -> None:
    documents = random.Random(0).sample(build_documents(0), 80)
    for document in documents:
        ids = tokenizer.encode(document, add_special_tokens=False)
        assert tokenizer.decode(ids) == document
    joined = EOS.join(documents[:5])
    assert tokenizer.decode(tokenizer.encode(joined, add_special_tokens=False)) == joined


def test_chat_template_ends_with_assistant_prompt(tokenizer) -> None:
    pytest.importorskip("jinja2")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"


def test_folder_is_under_two_megabytes() -> None:
    assert sum(path.stat().st_size for path in MODEL_DIR.rglob("*") if path.is_file()) < 2_000_000


def test_retraining_reproduces_the_committed_folder_byte_for_byte(tmp_path) -> None:
    # Training takes about a second, so this runs by default.
    train_tokenizer.main(["--out", str(tmp_path)])
    committed = sorted(path.name for path in MODEL_DIR.iterdir() if path.is_file())
    assert sorted(path.name for path in tmp_path.iterdir()) == committed
    for name in committed:
        assert (tmp_path / name).read_bytes() == (MODEL_DIR / name).read_bytes(), name
