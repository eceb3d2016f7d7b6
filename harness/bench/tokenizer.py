"""The tokenizer the benchmark needs: encode, decode, vocab_size, num_special_tokens_to_add.

A folder with `tokenizer.json` loads through the `tokenizers` library (fast, no torch); any other
folder falls back to `transformers.AutoTokenizer`. Both behave like the Hugging Face tokenizer
bench_serving loads: `encode` adds the model's special tokens (e.g. BOS), `decode` keeps them,
and `vocab_size` excludes added tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import SpecsuiteError


@dataclass(frozen=True)
class BenchTokenizer:
    """Tokenizer operations with Hugging Face `PreTrainedTokenizer` semantics."""

    source: str
    vocab_size: int
    special_tokens_added: int
    _encode: Callable[[str, bool], list[int]]
    _decode: Callable[[list[int]], str]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._encode(text, add_special_tokens)

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids)

    def num_special_tokens_to_add(self) -> int:
        return self.special_tokens_added


def load_tokenizer(path: str | Path) -> BenchTokenizer:
    """Load a local tokenizer folder (or a tokenizer.json file); one-line error when unusable."""
    folder = Path(path)
    file = folder if folder.is_file() else folder / "tokenizer.json"
    if file.is_file():
        return _from_tokenizers_file(file)
    if folder.is_dir():
        return _from_transformers(folder)
    raise SpecsuiteError(f"tokenizer {str(path)!r} is not a local folder or tokenizer.json file: pass --tokenizer <folder>")


def _from_tokenizers_file(file: Path) -> BenchTokenizer:
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises a bare Exception on a malformed file
        raise SpecsuiteError(f"cannot load tokenizer {file}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    post = tok.post_processor
    special = int(post.num_special_tokens_to_add(False)) if post is not None else 0

    def encode(text: str, add_special_tokens: bool) -> list[int]:
        return tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(ids: list[int]) -> str:
        return tok.decode(ids, skip_special_tokens=False)

    return BenchTokenizer(str(file), tok.get_vocab_size(with_added_tokens=False), special, encode, decode)


def _from_transformers(folder: Path) -> BenchTokenizer:
    try:
        from transformers import AutoTokenizer

        tok: Any = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    except Exception as exc:  # transformers raises many types for a folder it cannot read
        raise SpecsuiteError(f"cannot load a tokenizer from {folder}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}") from None

    def encode(text: str, add_special_tokens: bool) -> list[int]:
        return list(tok.encode(text, add_special_tokens=add_special_tokens))

    def decode(ids: list[int]) -> str:
        return tok.decode(ids)

    return BenchTokenizer(str(folder), int(tok.vocab_size), int(tok.num_special_tokens_to_add()), encode, decode)
