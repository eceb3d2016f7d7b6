"""`VocabInfo`: what the detectors need to know about a model's vocabulary, and the probe that builds it.

Two sizes matter and they differ on most checkpoints: `tokenizer_length` (len(tokenizer), added tokens
included: the detokenizer's range) and `vocab_size` (the embedding / lm_head rows from config.json:
the sampler's range). Ids in [tokenizer_length, vocab_size) are padded rows: legal for the sampler,
untrained, and never produced by a healthy server. SGLang reports neither size over HTTP, so both
come from local files; every fact records its source.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server.tokenizer import load_hf_tokenizer
from specsuite.server.transport import shorten

# Folders whose tokenizer_config names one of these (or no class) are probed with the `tokenizers` library alone:
# transformers' generic fast class adds nothing over tokenizer.json, and importing transformers pulls in torch
# when it is installed (seconds per session). Model-specific classes go through transformers, which may adjust them.
_PLAIN_FAST_CLASSES = {None, "PreTrainedTokenizerFast", "TokenizersBackend"}

DEFAULT_FRAGMENTS = ("<think>", "</think>", "<tool_call>", "</tool_call>")


@dataclass(frozen=True)
class VocabInfo:
    """Vocabulary facts for one model. `fragment_ids` maps a fragment to its id when the fragment is
    a single token; `source` says where each fact came from."""

    tokenizer_length: int
    vocab_size: int
    eos_ids: frozenset[int]
    special_ids: frozenset[int]
    empty_decoding_ids: frozenset[int]
    token0_text: str
    fragment_ids: dict[str, int] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)

    @property
    def padded_row_count(self) -> int:
        """Number of ids in [tokenizer_length, vocab_size)."""
        return max(0, self.vocab_size - self.tokenizer_length)

    @property
    def fallback_id(self) -> int:
        """vocab_size − 1: the id a sampling kernel commits when its CDF walk fails."""
        return self.vocab_size - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokenizer_length": self.tokenizer_length,
            "vocab_size": self.vocab_size,
            "padded_row_count": self.padded_row_count,
            "eos_ids": sorted(self.eos_ids),
            "special_ids": sorted(self.special_ids),
            "empty_decoding_ids": sorted(self.empty_decoding_ids),
            "token0_text": self.token0_text,
            "fragment_ids": dict(self.fragment_ids),
            "source": dict(self.source),
        }


def load_vocab_info(
    tokenizer_path: str,
    vocab_size_override: int | None = None,
    config_path: str | None = None,
    fragments: Iterable[str] = DEFAULT_FRAGMENTS,
) -> VocabInfo:
    """Probe a local tokenizer folder (never downloads) and the model's config.json.

    `config_path` is a config.json file or the folder holding it; by default the tokenizer folder's
    config.json, when present. `vocab_size_override` (--vocab-size) wins over config.json; with
    neither, vocab_size falls back to the tokenizer length (no padded rows can then be detected).
    """
    tokenizer = _plain_fast_tokenizer(Path(tokenizer_path)) or load_hf_tokenizer(tokenizer_path)
    tokenizer_length = len(tokenizer)
    source = {"tokenizer_length": f"len(tokenizer) of {tokenizer_path}"}

    config, config_file = _read_config(tokenizer_path, config_path)
    vocab_size = _vocab_size_of(config) if config is not None else None
    if vocab_size_override is not None:
        if vocab_size_override <= 0:
            raise SpecsuiteError(f"--vocab-size must be a positive integer, got {vocab_size_override}")
        vocab_size, source["vocab_size"] = vocab_size_override, "--vocab-size override"
    elif vocab_size is not None:
        source["vocab_size"] = f"config.json ({config_file})"
    else:
        vocab_size = tokenizer_length
        source["vocab_size"] = "tokenizer length (no vocab_size in a readable config.json)"

    eos_ids, source["eos_ids"] = _eos_ids(tokenizer, config, Path(tokenizer_path))
    special_ids = frozenset(tokenizer.all_special_ids) | frozenset(tokenizer.added_tokens_decoder)
    texts = decode_each_id(tokenizer, tokenizer_length)
    empty = frozenset(i for i, text in enumerate(texts) if text == "" and i not in special_ids)
    source["empty_decoding_ids"] = "each id decoded on its own, specials not skipped"
    return VocabInfo(
        tokenizer_length=tokenizer_length,
        vocab_size=vocab_size,
        eos_ids=eos_ids,
        special_ids=special_ids,
        empty_decoding_ids=empty,
        token0_text=texts[0] if texts else "",
        fragment_ids=_fragment_ids(tokenizer, fragments),
        source=source,
    )


def decode_each_id(tokenizer: Any, count: int) -> list[str]:
    """The text of every id in [0, count) decoded on its own, special tokens kept.

    The Rust backend decodes ~150k single ids in about 0.1 s; transformers' batch_decode takes
    ten times longer, so it is only the fallback for tokenizers without a fast backend.
    """
    sequences = [[i] for i in range(count)]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.decode_batch(sequences, skip_special_tokens=False)
    return tokenizer.batch_decode(sequences, skip_special_tokens=False)


def _read_config(tokenizer_path: str, config_path: str | None) -> tuple[dict[str, Any] | None, Path | None]:
    """The parsed config.json, or (None, None) when the default location has none."""
    explicit = config_path is not None
    path = Path(config_path if explicit else tokenizer_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        if explicit:
            raise SpecsuiteError(f"model config not found: {path}")
        return None, None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecsuiteError(f"cannot read model config {path}: {shorten(str(exc), 120)}") from None
    if not isinstance(config, dict):
        raise SpecsuiteError(f"model config {path} is not a JSON object")
    return config, path


def _vocab_size_of(config: dict[str, Any]) -> int | None:
    """vocab_size at the top level, or in text_config for multimodal checkpoints."""
    for holder in (config, config.get("text_config")):
        if isinstance(holder, dict) and isinstance(holder.get("vocab_size"), int):
            return holder["vocab_size"]
    return None


def _as_ids(value: Any) -> set[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


def _eos_ids(tokenizer: Any, config: dict[str, Any] | None, folder: Path) -> tuple[frozenset[int], str]:
    """EOS ids from the tokenizer, config.json and generation_config.json (the server stops on any)."""
    found: set[int] = set()
    origins = []
    if tokenizer.eos_token_id is not None:
        found |= _as_ids(tokenizer.eos_token_id)
        origins.append("tokenizer")
    if config is not None and _as_ids(config.get("eos_token_id")):
        found |= _as_ids(config.get("eos_token_id"))
        origins.append("config.json")
    generation_config = folder / "generation_config.json"
    if generation_config.is_file():
        try:
            ids = _as_ids(json.loads(generation_config.read_text(encoding="utf-8")).get("eos_token_id"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            ids = set()
        if ids:
            found |= ids
            origins.append("generation_config.json")
    return frozenset(found), ", ".join(origins) or "none found"


def _fragment_ids(tokenizer: Any, fragments: Iterable[str]) -> dict[str, int]:
    """Fragments that are one token on their own, mapped to that token's id."""
    result = {}
    for fragment in fragments:
        ids = tokenizer.encode(fragment, add_special_tokens=False)
        if len(ids) == 1:
            result[fragment] = ids[0]
    return result


class _PlainFastTokenizer:
    """The part of transformers' `PreTrainedTokenizerFast` the probe reads, over tokenizer.json and the special
    tokens named in tokenizer_config.json / special_tokens_map.json (transformers reads the same files).
    tests/server/test_vocab.py holds it equal to transformers' answers on every tokenizer folder of the project."""

    def __init__(self, backend: Any, named_specials: dict[str, Any]) -> None:
        self.backend_tokenizer = backend
        self.added_tokens_decoder = backend.get_added_tokens_decoder()
        named = [_token_text(value) for key, value in named_specials.items() if key.endswith("_token")]
        for key in ("additional_special_tokens", "extra_special_tokens"):
            extra = named_specials.get(key)
            named += [_token_text(value) for value in extra] if isinstance(extra, list) else []
        ids = (backend.token_to_id(text) for text in named if text)
        self.all_special_ids = [i for i in ids if i is not None]
        eos = _token_text(named_specials.get("eos_token"))
        self.eos_token_id = backend.token_to_id(eos) if eos else None

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken dict with its content."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _plain_fast_tokenizer(folder: Path) -> _PlainFastTokenizer | None:
    """The probe's view of a folder with tokenizer.json and the generic fast class, or None (transformers then loads it)."""
    named: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the config's entries win, as in transformers
        path = folder / name
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        if not isinstance(data, dict):
            return None
        named.update(data)
    if not (folder / "tokenizer.json").is_file() or named.get("tokenizer_class") not in _PLAIN_FAST_CLASSES:
        return None
    from tokenizers import Tokenizer

    try:
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception:  # a malformed file: transformers then gives its own one-line error
        return None
    return _PlainFastTokenizer(backend, {key: value for key, value in named.items() if key != "added_tokens_decoder"})
