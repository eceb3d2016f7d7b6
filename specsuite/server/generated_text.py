"""The `text` SGLang 0.5.23 shows for generated ids: decoded in context, not on their own.

SGLang's detokenizer decodes the output after up to `SGLANG_TEXT_CONTEXT_IDS` prompt ids and keeps
only what those ids add (schedule_batch.py `init_incremental_detokenize`; detokenizer_manager.py
`new_text = read_texts[i][len(surr_texts[i]):]`). `/detokenize` is a plain decode, so the two differ
where a tokenizer decodes a sequence's first token differently, e.g. SentencePiece-style
tokenizers (Metaspace) drop the leading space of the first word. Byte-level BPE gives the same
text both ways.
"""

from __future__ import annotations

from typing import Callable

# schedule_batch.py: INIT_INCREMENTAL_DETOKENIZATION_OFFSET (prompt ids decoded as left context).
SGLANG_TEXT_CONTEXT_IDS = 5


def text_context(prompt_ids: list[int]) -> list[int]:
    """The prompt ids SGLang decodes in front of the output: its last few."""
    return list(prompt_ids[max(len(prompt_ids) - SGLANG_TEXT_CONTEXT_IDS, 0):])


def decode_in_context(decode: Callable[[list[int]], str], context_ids: list[int], ids: list[int]) -> str:
    """`ids` decoded after `context_ids`, minus the context's own text, cut by length as SGLang
    cuts it (not by prefix matching: a context whose text changes once ids follow is SGLang's
    behaviour too)."""
    if not context_ids:
        return decode(list(ids))
    return decode([*context_ids, *ids])[len(decode(list(context_ids))):]


def prefix_texts_in_context(decode: Callable[[list[int]], str], prompt_ids: list[int], ids: list[int]) -> list[str]:
    """The text SGLang shows for every prefix of `ids` (entry c: the first c ids)."""
    context = text_context(prompt_ids)
    shown = len(decode(context)) if context else 0
    return [decode([*context, *ids[:count]])[shown:] for count in range(len(ids) + 1)]
