"""The one local tokenizer loader: the server's tokenizer, read from a folder, never downloaded.

`load_tokenizer` gives the operations every workload needs (the serving benchmark's prompt
lengths, the integrity checks' re-encoding of stop strings and usage, the vocabulary probe's id
texts), with Hugging Face `PreTrainedTokenizer` semantics: `encode` adds the model's special
tokens (e.g. BOS) unless told not to, `decode` keeps them unless told to skip them, and
`vocab_size` excludes added tokens. A folder with `tokenizer.json` loads through the `tokenizers`
library (fast, no torch); any other folder through `transformers.AutoTokenizer`.
`load_hf_tokenizer` is that transformers path on its own, for the probe that needs the full object.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from textwrap import shorten
from typing import Any

from specsuite.errors import SpecsuiteError

_HINT = "pass --tokenizer <local folder with tokenizer files>"


@dataclass(frozen=True)
class LocalTokenizer:
    """Tokenizer operations with Hugging Face semantics, whichever library loaded them."""

    source: str
    vocab_size: int
    special_tokens_added: int
    special_ids: frozenset[int]  # the ids `skip_special_tokens=True` drops
    _encode: Callable[[str, bool], list[int]]
    _decode: Callable[[list[int], bool], str]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._encode(text, add_special_tokens)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._decode(list(ids), skip_special_tokens)

    def num_special_tokens_to_add(self) -> int:
        return self.special_tokens_added


def load_tokenizer(path: str | Path) -> LocalTokenizer:
    """Load a local tokenizer folder (or a tokenizer.json file); one-line error when unusable."""
    folder = Path(path)
    file = folder if folder.is_file() else folder / "tokenizer.json"
    if file.is_file():
        return _from_tokenizers_file(file)
    if folder.is_dir():
        return _from_transformers(folder)
    raise SpecsuiteError(f"tokenizer folder not found: {path} — {_HINT}")


def load_hf_tokenizer(folder: str | Path) -> Any:
    """transformers' AutoTokenizer for a local folder, quietly; one-line error when unusable."""
    if not Path(folder).is_dir():
        raise SpecsuiteError(f"tokenizer folder not found: {folder} — {_HINT}")
    # Imported here: transformers is slow to import. Its advice that PyTorch is missing, and its
    # warnings about a config.json of an unknown architecture, are noise for a tokenizer-only use.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # transformers raises many types (OSError, ValueError, KeyError, ...)
        raise SpecsuiteError(f"cannot load a tokenizer from {folder}: {shorten(str(exc), 120)} — {_HINT}") from None
    finally:
        hf_logging.set_verbosity(verbosity)


def _from_tokenizers_file(file: Path) -> LocalTokenizer:
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises a bare Exception on a malformed file
        raise SpecsuiteError(f"cannot read {file}: {shorten(str(exc), 120) or type(exc).__name__}") from None
    post = tok.post_processor
    special_added = int(post.num_special_tokens_to_add(False)) if post is not None else 0
    special_ids = frozenset(i for i, token in tok.get_added_tokens_decoder().items() if token.special)
    return LocalTokenizer(
        str(file), tok.get_vocab_size(with_added_tokens=False), special_added, special_ids,
        lambda text, add: tok.encode(text, add_special_tokens=add).ids,
        lambda ids, skip: tok.decode(ids, skip_special_tokens=skip),
    )


def _from_transformers(folder: Path) -> LocalTokenizer:
    tok = load_hf_tokenizer(folder)
    return LocalTokenizer(
        str(folder), int(tok.vocab_size), int(tok.num_special_tokens_to_add()), frozenset(tok.all_special_ids),
        lambda text, add: list(tok.encode(text, add_special_tokens=add)),
        lambda ids, skip: tok.decode(ids, skip_special_tokens=skip),
    )
