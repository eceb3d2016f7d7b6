"""A tiny SentencePiece-style tokenizer (BPE with a Metaspace pre-tokenizer and decoder), trained
on the project's own corpus in memory: deterministic, no download.

Metaspace marks each word's leading space as "▁" and the decoder drops the "▁" of a sequence's
first token, so decoding ids on their own loses the space that the same ids show after a prompt:
the case where SGLang's in-context `text` and a plain `/detokenize` differ.
"""

from __future__ import annotations

from functools import lru_cache

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from specsuite.refserver.corpus import corpus_text

TRAINING_CHARS = 60_000
VOCAB_SIZE = 600
EOS = "</s>"


@lru_cache(maxsize=1)
def sentencepiece_style_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<unk>", EOS], show_progress=False)
    text = corpus_text(0)[:TRAINING_CHARS]
    tokenizer.train_from_iterator(text.splitlines(), trainer=trainer)
    return tokenizer
