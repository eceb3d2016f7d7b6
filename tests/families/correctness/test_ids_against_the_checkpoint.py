"""Ids judged against the checkpoint: `vocab_size - 1` is the sampler's fallback (zero tolerance) only where it is a
padded row, tokenizer length < vocab_size; on a checkpoint without padded rows (Llama-2 at 32,000, Mistral at 32,768)
it is an ordinary token. Padded rows other than the fallback are judged against the model's own mass in every family
(GSM8K included, `padded_rows.judge_answers`), and ids >= vocab_size stay zero-tolerance. Checkpoints are built here:
a word-level tokenizer of 16 ids and a config.json with vocab_size 16 (no padded rows) or 20 (four)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from specsuite.families.correctness.detectors import scan_generation
from specsuite.families.correctness.padded_rows import judge_answers
from specsuite.server.generation import Generation, prompt_hash
from specsuite.server.vocab import load_vocab_info
from tests.helpers.native_fake import NativeFake

TOKENIZER_LENGTH = 16


def checkpoint(folder: Path, vocab_size: int) -> Path:
    words = {f"w{i}": i for i in range(TOKENIZER_LENGTH - 1)} | {"[UNK]": TOKENIZER_LENGTH - 1}
    folder.mkdir(parents=True)
    Tokenizer(models.WordLevel(words, unk_token="[UNK]")).save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    (folder / "config.json").write_text(json.dumps({"vocab_size": vocab_size}))
    return folder


def answer(ids: list[int]) -> Generation:
    return Generation(prompt="w1 w2", prompt_ids=[1, 2], prompt_hash=prompt_hash("w1 w2", None), params={"temperature": 1.0},
                      output_ids=ids, text="", finish_reason={"type": "length"}, completion_tokens=len(ids), meta_info={})


@pytest.mark.parametrize(("vocab_size", "fallbacks"), [(16, 0), (20, 1)])
def test_vocab_size_minus_one_is_the_fallback_only_where_it_is_a_padded_row(tmp_path, vocab_size, fallbacks):
    vocab = load_vocab_info(str(checkpoint(tmp_path / "model", vocab_size)))
    assert (vocab.tokenizer_length, vocab.vocab_size) == (TOKENIZER_LENGTH, vocab_size)
    hits = scan_generation(answer([3, vocab_size - 1, 4]), vocab).results
    print(f"tokenizer length {vocab.tokenizer_length}, vocab_size {vocab_size}: {hits['fallback_id'].count} fallback id(s)")
    assert hits["fallback_id"].count == fallbacks
    assert hits["out_of_vocab_id"].count == 0
    assert scan_generation(answer([vocab_size]), vocab).results["out_of_vocab_id"].count == 1  # zero tolerance everywhere


class PaddedScorer(NativeFake):
    """An SGLang-like server answering padded-row scoring: every judged padded id at `padded_logprob`, the rest of the
    mass on id 3."""

    server_kind = "sglang"

    def __init__(self, padded_logprob: float) -> None:
        self.padded_logprob = padded_logprob
        self.base_url = "stand-in"

    def generate(self, payload: dict) -> dict:
        positions = len(payload["input_ids"]) - payload["logprob_start_len"]
        padded = [[self.padded_logprob, t, None] for t in payload["token_ids_logprob"]]
        return {"output_ids": [], "meta_info": {"input_top_logprobs": [[[-0.01, 3, None]]] * positions,
                                                "input_token_ids_logprobs": [padded] * positions}}


@pytest.mark.parametrize(("padded_logprob", "failed"), [(-3.0, False), (-25.0, True)])
def test_gsm8k_padded_rows_are_judged_against_the_model_mass(tmp_path, monkeypatch, padded_logprob, failed):
    """One padded id in 200 tokens: within the mass of rows at logprob -3, far above rows at -25 (zero tolerance
    before: any padded id failed GSM8K)."""
    from specsuite.server import kinds

    vocab = load_vocab_info(str(checkpoint(tmp_path / "model", 20)))
    monkeypatch.setattr(kinds, "kind_of_client", lambda client: kinds.named_or_fallback("sglang"))
    answers = [answer([3] * 99 + [17]), answer([3] * 100)]
    judged = judge_answers(PaddedScorer(padded_logprob), vocab, answers, temperature=1.0, top_p=1.0, alpha=0.001)
    print(judged.describe())
    assert judged.method == "model mass" and judged.observed == 1 and judged.failed is failed
    clean = judge_answers(PaddedScorer(padded_logprob), vocab, [answer([3] * 100)], temperature=1.0, top_p=1.0, alpha=0.001)
    assert not clean.failed and clean.reason == "none drawn"
