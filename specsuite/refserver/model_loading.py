"""Load the reference model: the committed tokenizer folder, config.json, and n-gram tables
trained at startup on the project's generated corpus."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from specsuite.refserver.corpus import corpus_text
from specsuite.refserver.models import DegeneratingModel
from specsuite.refserver.ngram import NgramModel

MODEL_DIR = Path(__file__).resolve().parent / "model"
TARGET_ORDERS = (2, 3, 4, 5, 6, 12, 24)
# The draft sits between orders 3 and 4; the weight puts the greedy accept length near the
# 3.0 of the recycled-draft_probs bug report's GSM8K run (steps 5, topk 1, draft tokens 6).
DRAFT_MAX_ORDER = 4
DRAFT_LOWER_MIX = (3, 0.95)
GARBAGE_FRAGMENTS = {"!": 0.5, "</think>": 0.25, "<tool_call>": 0.25}


@dataclass
class ReferenceModel:
    """Everything the engine and HTTP layer need to know about the model."""

    model_dir: Path
    tokenizer: Tokenizer
    config: dict
    tokenizer_length: int
    vocab_size: int
    context_length: int
    eos_ids: tuple[int, ...]
    special_ids: frozenset[int]
    target: DegeneratingModel
    draft: DegeneratingModel

    def decode_text(self, ids: list[int], skip_special_tokens: bool = True, clamp: bool = True) -> str:
        """SGLang's detokenizer for `text`: ids outside [0, tokenizer_length) become id 0.
        clamp=False: the scheduler's own `tokenizer.decode` (stop-string search), where a fast
        tokenizer decodes such ids as ""."""
        if not clamp:
            return self.decode_unclamped(ids, skip_special_tokens)
        clamped = [i if 0 <= i < self.tokenizer_length else 0 for i in ids]
        return self.tokenizer.decode(clamped, skip_special_tokens=skip_special_tokens)

    def stop_str_max_len(self, stops: list[str]) -> int:
        """The longest stop string's id count, encoded without special tokens (SGLang's
        `SamplingParams.normalize`): sizes the tail the stop check decodes."""
        return max((len(self.tokenizer.encode(stop, add_special_tokens=False).ids) for stop in stops), default=0)

    def decode_unclamped(self, ids: list[int], skip_special_tokens: bool) -> str:
        """HF fast-tokenizer decode (as /detokenize and logprob text): unknown ids give ""."""
        return self.tokenizer.decode([i for i in ids if 0 <= i < self.tokenizer_length], skip_special_tokens=skip_special_tokens)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=True).ids


def load_reference_model(model_dir: Path = MODEL_DIR, target_orders: tuple[int, ...] = TARGET_ORDERS, draft_max_order: int = DRAFT_MAX_ORDER,
                         draft_lower_mix: tuple[int, float] | None = DRAFT_LOWER_MIX) -> ReferenceModel:
    """Read the tokenizer folder and train the target and draft models on the corpus."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    config = json.loads((model_dir / "config.json").read_text())
    tokenizer_length = tokenizer.get_vocab_size(with_added_tokens=True)
    vocab_size = int(config["vocab_size"])
    eos_id = int(config["eos_token_id"])
    text = corpus_text(0, eos=tokenizer.id_to_token(eos_id))
    documents = text.split(tokenizer.id_to_token(eos_id))
    encodings = tokenizer.encode_batch([d for d in documents if d])
    pieces = []
    for encoding in encodings:
        pieces.append(np.asarray(encoding.ids, dtype=np.int64))
        pieces.append(np.array([eos_id], dtype=np.int64))
    corpus = np.concatenate(pieces)
    ngram = NgramModel(corpus, tokenizer_length, vocab_size, orders=target_orders)
    garbage = {tokenizer.token_to_id(fragment): weight for fragment, weight in GARBAGE_FRAGMENTS.items()}
    special_ids = frozenset(tokenizer.get_added_tokens_decoder())
    return ReferenceModel(
        model_dir=model_dir,
        tokenizer=tokenizer,
        config=config,
        tokenizer_length=tokenizer_length,
        vocab_size=vocab_size,
        context_length=int(config.get("max_position_embeddings", 4096)),
        eos_ids=(eos_id,),
        special_ids=special_ids,
        target=DegeneratingModel(ngram, max(target_orders), garbage),
        draft=DegeneratingModel(ngram, draft_max_order, garbage, draft_lower_mix),
    )
