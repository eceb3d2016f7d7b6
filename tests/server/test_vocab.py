"""Tests for specsuite.server.vocab on tokenizers built here with the `tokenizers` library (no downloads)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from specsuite.errors import SpecsuiteError
from specsuite.server.vocab import load_vocab_info

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Speculative decoding drafts tokens and the target verifies them!",
    "Hello world, hello tokenizer; numbers 12345 and symbols #$%.",
]
SPECIALS = ["<|endoftext|>", "<think>", "</think>"]
ROOT = Path(__file__).resolve().parents[2]
REFSERVER_MODEL = ROOT / "specsuite" / "refserver" / "model"


def write_folder(
    folder: Path, tokenizer: Tokenizer, config: dict | None, generation_config: dict | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"})
    )
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if generation_config is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation_config))
    return folder


def byte_level_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(SENTENCES * 5, trainer)
    # Added but not special, as tool-call markers are in several chat models.
    tokenizer.add_tokens([AddedToken("<tool_call>", normalized=False), AddedToken("</tool_call>", normalized=False)])
    return tokenizer


@pytest.fixture(scope="module")
def byte_level_dir(tmp_path_factory) -> Path:
    tokenizer = byte_level_tokenizer()
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    return write_folder(
        tmp_path_factory.mktemp("bytelevel"),
        tokenizer,
        {"vocab_size": size + 40, "eos_token_id": 0},
        {"eos_token_id": [0, 2]},
    )


@pytest.fixture(scope="module")
def byte_level(byte_level_dir):
    return load_vocab_info(str(byte_level_dir))


def reference(folder: Path) -> Tokenizer:
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def test_sizes_and_sources(byte_level_dir, byte_level):
    expected_length = reference(byte_level_dir).get_vocab_size(with_added_tokens=True)
    assert byte_level.tokenizer_length == expected_length
    assert byte_level.vocab_size == expected_length + 40
    assert byte_level.padded_row_count == 40
    assert byte_level.fallback_id == expected_length + 39
    assert byte_level.source["vocab_size"].startswith("config.json")


def test_specials_eos_fragments_and_token0(byte_level_dir, byte_level):
    ref = reference(byte_level_dir)
    ids = {name: ref.token_to_id(name) for name in SPECIALS + ["<tool_call>", "</tool_call>"]}
    assert set(ids.values()) <= byte_level.special_ids
    assert byte_level.eos_ids == {0, 2}
    assert "generation_config.json" in byte_level.source["eos_ids"]
    fragments = ("<think>", "</think>", "<tool_call>", "</tool_call>")
    assert byte_level.fragment_ids == {name: ids[name] for name in fragments}
    assert byte_level.token0_text == ref.decode([0], skip_special_tokens=False)


def test_byte_level_has_no_empty_decoding_ids(byte_level):
    # Every byte-level token decodes to at least one byte (or U+FFFD for a partial UTF-8 sequence).
    assert byte_level.empty_decoding_ids == frozenset()


def test_empty_decoding_ids_found_on_metaspace_tokenizer(tmp_path):
    # SentencePiece-style: the lone word-boundary piece "▁" decodes to "" at the start of a text.
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(SENTENCES * 5, trainers.BpeTrainer(vocab_size=200, special_tokens=SPECIALS))
    folder = write_folder(tmp_path / "metaspace", tokenizer, None)
    info = load_vocab_info(str(folder))
    ref = reference(folder)
    expected = {i for i in range(ref.get_vocab_size()) if ref.decode([i], skip_special_tokens=False) == ""}
    boundary = ref.token_to_id("\u2581")
    assert boundary in info.empty_decoding_ids
    assert info.empty_decoding_ids == expected - info.special_ids
    assert not info.empty_decoding_ids & info.special_ids


def test_override_wins_and_missing_config_falls_back(byte_level_dir, tmp_path):
    assert load_vocab_info(str(byte_level_dir), vocab_size_override=9999).vocab_size == 9999
    bare = write_folder(tmp_path / "bare", byte_level_tokenizer(), None)
    info = load_vocab_info(str(bare))
    assert info.vocab_size == info.tokenizer_length
    assert info.padded_row_count == 0
    assert "no vocab_size" in info.source["vocab_size"]


def test_explicit_config_path(byte_level_dir, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 1024}}))
    assert load_vocab_info(str(byte_level_dir), config_path=str(tmp_path)).vocab_size == 1024
    with pytest.raises(SpecsuiteError, match="model config not found"):
        load_vocab_info(str(byte_level_dir), config_path=str(tmp_path / "absent.json"))


@pytest.mark.parametrize("make_folder", ["missing", "empty"])
def test_unloadable_tokenizer_is_one_line(tmp_path, make_folder):
    path = tmp_path / "tok"
    if make_folder == "empty":
        path.mkdir()
    with pytest.raises(SpecsuiteError) as info:
        load_vocab_info(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert "--tokenizer" in message


def test_bad_vocab_size_override(byte_level_dir):
    with pytest.raises(SpecsuiteError, match="--vocab-size"):
        load_vocab_info(str(byte_level_dir), vocab_size_override=0)


def test_to_dict_is_json(byte_level):
    data = json.loads(json.dumps(byte_level.to_dict()))
    assert data["padded_row_count"] == 40


def test_probe_is_fast_on_a_glm_sized_vocabulary(tmp_path):
    # 155k ids, as on GLM; merges are not needed to decode single ids.
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab.update({f"w{i}": len(alphabet) + i for i in range(155_000 - len(alphabet))})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<|endoftext|>"])
    folder = write_folder(tmp_path / "big", tokenizer, {"vocab_size": 155_008})
    start = time.monotonic()
    info = load_vocab_info(str(folder))
    assert time.monotonic() - start < 15
    assert (info.tokenizer_length, info.padded_row_count) == (155_001, 7)


def test_reference_server_model_folder():
    config_file = REFSERVER_MODEL / "config.json"
    if not (REFSERVER_MODEL / "tokenizer.json").is_file() or not config_file.is_file():
        pytest.skip(f"reference model not built yet: no tokenizer.json/config.json in {REFSERVER_MODEL}")
    config = json.loads(config_file.read_text())
    info = load_vocab_info(str(REFSERVER_MODEL))
    assert info.vocab_size == config["vocab_size"]
    if "tokenizer_length" in config:
        assert info.tokenizer_length == config["tokenizer_length"]
    assert info.padded_row_count == config["vocab_size"] - info.tokenizer_length


def _probe_through_transformers(folder: Path, monkeypatch) -> dict:
    from specsuite.server import vocab

    with monkeypatch.context() as patch:
        patch.setattr(vocab, "_plain_fast_tokenizer", lambda path: None)
        return vocab.load_vocab_info(str(folder)).to_dict()


PROJECT_TOKENIZERS = [REFSERVER_MODEL, *(ROOT / "specsuite" / "fixtures" / "vllm_models" / name for name in ("target", "draft"))]


@pytest.mark.parametrize("folder", PROJECT_TOKENIZERS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_tokenizers_probe_equals_transformers_on_the_project_folders(folder: Path, monkeypatch) -> None:
    """Folders of the generic fast class are probed without transformers (which imports torch when it is there);
    every fact must be what transformers' tokenizer says."""
    from specsuite.server import vocab

    if not (folder / "tokenizer.json").is_file():
        pytest.skip(f"no tokenizer.json in {folder}")
    assert vocab._plain_fast_tokenizer(folder) is not None
    assert load_vocab_info(str(folder)).to_dict() == _probe_through_transformers(folder, monkeypatch)


def test_the_tokenizers_probe_equals_transformers_on_built_folders(byte_level_dir: Path, tmp_path: Path, monkeypatch) -> None:
    tokenizer = byte_level_tokenizer()
    tokenizer.add_special_tokens(["<|user|>"])
    folder = write_folder(tmp_path / "named", tokenizer, None)
    (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": {"content": "<|endoftext|>"},
                                                                "additional_special_tokens": ["<|user|>"]}))
    for path in (byte_level_dir, folder):
        assert load_vocab_info(str(path)).to_dict() == _probe_through_transformers(path, monkeypatch)


def test_a_model_specific_tokenizer_class_goes_through_transformers(byte_level_dir: Path, tmp_path: Path) -> None:
    from specsuite.server import vocab

    folder = write_folder(tmp_path / "gpt2", byte_level_tokenizer(), None)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2TokenizerFast", "eos_token": "<|endoftext|>"}))
    assert vocab._plain_fast_tokenizer(folder) is None and vocab._plain_fast_tokenizer(byte_level_dir) is not None


def test_the_reference_probe_imports_neither_transformers_nor_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; from specsuite.server.vocab import load_vocab_info; load_vocab_info(sys.argv[1]); "
            "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(REFSERVER_MODEL)], capture_output=True, text=True, timeout=60,
                          check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"
