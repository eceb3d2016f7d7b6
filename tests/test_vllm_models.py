"""The committed vLLM fixture models: files match MANIFEST.json, and the vocabulary is padded like the reference server's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_models"
MANIFEST = MODELS / "MANIFEST.json"


def _manifest() -> dict:
    if not MANIFEST.is_file():
        pytest.skip(f"no {MANIFEST.relative_to(MODELS.parents[1])}: the vLLM fixture models are not committed in this checkout")
    return json.loads(MANIFEST.read_text())


def test_manifest_sha256_match_committed_files() -> None:
    files = _manifest()["files"]
    missing = [name for name in files if not (MODELS / name).is_file()]
    if missing:
        pytest.skip(f"weights absent (Git LFS or a partial checkout?): {', '.join(missing)}")
    for name, entry in files.items():
        data = (MODELS / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert len(data) == entry["bytes"], name


def test_total_size_within_budget() -> None:
    assert sum(e["bytes"] for e in _manifest()["files"].values()) <= 25 * 1024 * 1024


@pytest.mark.parametrize("model", ["target", "draft", "eagle"])
def test_vocab_padded_to_8128_over_tokenizer_of_8100(model: str) -> None:
    _manifest()
    cfg_path = MODELS / model / "config.json"
    if not cfg_path.is_file():
        pytest.skip(f"{cfg_path.name} absent for {model}")
    cfg = json.loads(cfg_path.read_text())
    assert cfg["vocab_size"] == 8128
    assert cfg["eos_token_id"] == 8091
    tok_path = MODELS / "target" / "tokenizer.json"
    tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers package is not installed")
    assert tokenizers.Tokenizer.from_file(str(tok_path)).get_vocab_size() == 8100


def test_padded_rows_never_win_on_heldout_text() -> None:
    """train_log.json records how far the 28 padded ids sit below the best real id; they must never be argmax."""
    log_path = MODELS / "train_log.json"
    _manifest()
    if not log_path.is_file():
        pytest.skip("train_log.json absent")
    log = json.loads(log_path.read_text())
    for model in ("target", "draft"):
        assert log[model]["min_margin_real_minus_padded_logit"] > 0, model


def test_weights_load_with_padded_embedding() -> None:
    """The stored embedding (tied lm_head) has 8128 rows; needs torch and safetensors, else skipped."""
    _manifest()
    pytest.importorskip("torch", reason="torch is not installed")
    st = pytest.importorskip("safetensors.torch", reason="safetensors is not installed")
    path = MODELS / "target" / "model.safetensors"
    if not path.is_file():
        pytest.skip("target weights absent")
    emb = st.load_file(str(path))["model.embed_tokens.weight"]
    assert emb.shape[0] == 8128
