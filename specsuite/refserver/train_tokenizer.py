"""Train the reference server's byte-level BPE tokenizer and write its HF model folder.

Usage: ``python -m specsuite.refserver.train_tokenizer [--out DIR]`` (default
``specsuite/refserver/model``). Training reads ``corpus_text(0)`` and is reproducible:
re-running it writes byte-identical files.

The tokenizer is GPT-2 style: byte-level pre-tokenizer and decoder without a prefix
space, and the 256-byte alphabet sorted by code point so that id 0 is ``!``. Nine added
tokens follow the BPE vocabulary (so they hold the highest ids): the EOS and role tokens
are special; ``<think>``, ``</think>``, ``<tool_call>`` and ``</tool_call>`` are added but
not special (as in GLM), so they stay in text decoded with ``skip_special_tokens=True``.
``config.json`` declares a vocab padded past the tokenizer's length, leaving untrained
rows at the top of the id range, as real checkpoints do.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from specsuite.refserver.corpus import EOS, corpus_text

DEFAULT_OUT = Path(__file__).with_name("model")
BPE_VOCAB_SIZE = 8091  # plus 9 added tokens: len(tokenizer) == 8100
ROLE_TOKENS = ("<|user|>", "<|assistant|>", "<|system|>", "<|tool|>")
SPECIAL_TOKENS = (EOS, *ROLE_TOKENS)
MARKUP_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
ADDED_TOKENS = SPECIAL_TOKENS + MARKUP_TOKENS
MAX_LENGTH = 4096
PAD_MULTIPLE = 64
MIN_PADDED_ROWS = 8
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
    "{{ raise_exception('unsupported chat role: ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def padded_vocab_size(tokenizer_length: int) -> int:
    """Round up to a multiple of 64, adding 64 more if fewer than 8 padded rows remain."""
    padded = -(-tokenizer_length // PAD_MULTIPLE) * PAD_MULTIPLE
    if padded - tokenizer_length < MIN_PADDED_ROWS:
        padded += PAD_MULTIPLE
    return padded


def _training_pieces(text: str) -> list[str]:
    # Added tokens are matched before BPE at encode time, so BPE never sees them: cut
    # them out of the training text rather than spend merges on their pieces.
    pattern = "|".join(re.escape(token) for token in ADDED_TOKENS)
    return [piece for piece in re.split(pattern, text) if piece]


def train(text: str) -> Tokenizer:
    """Train the BPE on ``text`` and append the added tokens after its vocabulary."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        # The grammar's few thousand words are all merged whole by about 7,600 tokens;
        # the rest of the vocabulary comes from pairs seen once (mostly long numbers).
        min_frequency=1,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(_training_pieces(text), trainer=trainer)
    if tokenizer.get_vocab_size() != BPE_VOCAB_SIZE:
        raise RuntimeError(f"BPE stopped at {tokenizer.get_vocab_size()} tokens, wanted {BPE_VOCAB_SIZE}")
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return tokenizer


def _dump(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_folder(tokenizer: Tokenizer, out: Path) -> None:
    """Write tokenizer.json and the HF config files for ``tokenizer`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"), pretty=True)
    length = tokenizer.get_vocab_size(with_added_tokens=True)
    eos_id = tokenizer.token_to_id(EOS)
    added_tokens_decoder = {
        str(tokenizer.token_to_id(token)): {
            "content": token, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": token in SPECIAL_TOKENS,
        }
        for token in ADDED_TOKENS
    }
    _dump(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added_tokens_decoder,
        "bos_token": None,
        "eos_token": EOS,
        "pad_token": EOS,
        "additional_special_tokens": list(ROLE_TOKENS),
        "model_max_length": MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    })
    _dump(out / "special_tokens_map.json", {
        "eos_token": EOS, "pad_token": EOS, "additional_special_tokens": list(ROLE_TOKENS),
    })
    _dump(out / "config.json", {
        "architectures": ["SpecsuiteNgramForCausalLM"],
        "model_type": "specsuite_ngram",
        "vocab_size": padded_vocab_size(length),
        "tokenizer_length": length,
        "max_position_embeddings": MAX_LENGTH,
        "eos_token_id": eos_id,
        "bos_token_id": None,
        "torch_dtype": "float32",
    })
    _dump(out / "generation_config.json", {
        "eos_token_id": eos_id, "do_sample": True, "temperature": 1.0, "top_p": 1.0,
    })


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    args = parser.parse_args(argv)
    tokenizer = train(corpus_text(0))
    write_folder(tokenizer, args.out)
    print(f"wrote tokenizer with {tokenizer.get_vocab_size(with_added_tokens=True)} tokens to {args.out}")


if __name__ == "__main__":
    main()
