"""Request sets with bench_serving's meaning: `random`, `random-ids` and `sharegpt`.

Lengths (`compute_random_lens`): each length is an integer drawn uniformly from
[max(floor(L * r), 1), L], as `np.random.randint(low, L + 1)`. So `--random-range-ratio 1.0`
gives the fixed length L, and r = 0.5 gives lengths in [L/2, L].

The r = 0 trap: bench_serving's *default* range ratio is 0.0, which does not mean "no spread"
(vLLM's reading of the flag) but lengths uniform on [1, L]: "random 1024/512" with the default
sends prompts of about 512 tokens on average and asks for about 256 output tokens. Pass
`--random-range-ratio 1.0` for fixed lengths; the runner prints a warning when r = 0.

`random`: token ids of real text (ShareGPT first human turns, shuffled, each encoded with
special tokens, then truncated or tiled to the drawn length). `random-ids`: consecutive ids
`(offset_i + i + j) % vocab_size`, no text source needed. Both send token ids with
`tokenize_prompt=True` (exact lengths); otherwise the target length is first reduced by the
tokenizer's special-token count and the ids are decoded to text, which the server re-tokenizes.
`sharegpt`: first human turn as prompt, the first reply's token count as output length (or a
fixed `sharegpt_output_len`); rows with fewer than 2 prompt or output tokens, or longer than
`sharegpt_context_len`, are skipped.

Randomness: one `np.random.RandomState(seed)` and one `random.Random(seed)`, drawn in
bench_serving's order (input lengths, output lengths, then the shuffle or the id offsets), so
the same seed yields the same requests as `bench_serving --seed`; the runner keeps drawing the
Poisson gaps from the same RandomState afterwards, as bench_serving does.

Text source: a ShareGPT JSON/JSONL file (`--dataset-path`), `hf` (the ShareGPT file on the
Hugging Face hub, fetched with `huggingface_hub`), or, when no path is given, the project's bundled
prompts (`specsuite/fixtures/data`) written as one-turn conversations, so everything runs offline.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.conversation_records import BundledPromptLine, ShareGptConversation
from specsuite.project_paths import DATA_DIR
from specsuite.server.tokenizer import LocalTokenizer

DATASETS = ("random", "random-ids", "sharegpt")
SHAREGPT_REPO_ID = "anon8231489123/ShareGPT_Vicuna_unfiltered"
SHAREGPT_FILENAME = "ShareGPT_V3_unfiltered_cleaned_split.json"
BUNDLED_SOURCE = "bundled"
_DATA_DIR = DATA_DIR
_BUNDLED_FILES = ("correctness_prompts.jsonl", "gsm8k_synth.jsonl")


@dataclass(frozen=True)
class DatasetRow:
    """One request: a text or token-id prompt, its planned length, and the output tokens to ask for."""

    prompt: str | list[int]
    prompt_len: int
    output_len: int


@dataclass
class BenchRandom:
    """The two generators bench_serving seeds globally, kept local so runs do not interfere."""

    numpy: np.random.RandomState
    python: random.Random

    @classmethod
    def from_seed(cls, seed: int) -> BenchRandom:
        return cls(np.random.RandomState(seed), random.Random(seed))


def compute_random_lens(rng: np.random.RandomState, full_len: int, range_ratio: float, num: int) -> list[int]:
    """`num` lengths uniform on [max(floor(full_len * range_ratio), 1), full_len]; zeros when full_len <= 0."""
    if not 0.0 <= range_ratio <= 1.0:
        raise SpecsuiteError(f"--random-range-ratio must be in [0, 1] (bench_serving's meaning), got {range_ratio}")
    if full_len <= 0:
        return [0] * num
    return [int(v) for v in rng.randint(max(int(full_len * range_ratio), 1), full_len + 1, size=num)]


def load_conversations(path: str | None) -> list[tuple[str, str]]:
    """(first human turn, first reply) pairs of conversations with at least two turns."""
    if not path or path == BUNDLED_SOURCE:
        return _bundled_conversations()
    if path == "hf":
        path = _download_sharegpt()
    file = Path(path)
    if not file.is_file():
        raise SpecsuiteError(f"dataset file {path!r} does not exist (ShareGPT JSON or JSONL, 'hf', or leave it out for the bundled prompts)")
    text = file.read_text(encoding="utf-8")
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        try:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise SpecsuiteError(f"dataset file {path} is neither JSON nor JSON Lines: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(records, list):
        raise SpecsuiteError(f"dataset file {path} must hold a list of conversations")
    found = (ShareGptConversation.from_dict(record).first_pair() for record in records if isinstance(record, dict))
    pairs = [pair for pair in found if pair is not None]
    if not pairs:
        raise SpecsuiteError(f"dataset file {path} has no conversation with two turns ({{'conversations': [{{'value': ...}}, ...]}})")
    return pairs


def _bundled_conversations() -> list[tuple[str, str]]:
    pairs = []
    for name in _BUNDLED_FILES:
        for line in (_DATA_DIR / name).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            pair = BundledPromptLine.from_dict(json.loads(line)).pair()
            if pair is not None:
                pairs.append(pair)
    return pairs


def _download_sharegpt() -> str:
    try:
        from huggingface_hub import hf_hub_download

        return hf_hub_download(repo_id=SHAREGPT_REPO_ID, filename=SHAREGPT_FILENAME, repo_type="dataset")
    except Exception as exc:  # offline, gated, or hub errors of many types
        raise SpecsuiteError(f"cannot fetch ShareGPT from the Hugging Face hub ({type(exc).__name__}); pass --dataset-path to a local copy") from None


def sample_random_requests(tokenizer: LocalTokenizer, rng: BenchRandom, *, num_prompts: int, input_len: int, output_len: int, range_ratio: float,
                           random_ids: bool, tokenize_prompt: bool, dataset_path: str | None = None) -> list[DatasetRow]:
    """bench_serving's `random` (ids of real text) or `random-ids` (consecutive ids) request set."""
    input_lens = compute_random_lens(rng.numpy, input_len, range_ratio, num_prompts)
    output_lens = compute_random_lens(rng.numpy, output_len, range_ratio, num_prompts)
    if not tokenize_prompt:
        # The server adds the special tokens again when it encodes the decoded text.
        special = tokenizer.num_special_tokens_to_add()
        input_lens = [max(1, n - special) for n in input_lens]
    if random_ids:
        offsets = rng.numpy.randint(0, tokenizer.vocab_size, size=num_prompts)
        id_lists = [[int((offsets[i] + i + j) % tokenizer.vocab_size) for j in range(input_lens[i])] for i in range(num_prompts)]
    else:
        id_lists = _ids_from_text(tokenizer, rng, load_conversations(dataset_path), input_lens)
    return [
        DatasetRow(ids if tokenize_prompt else tokenizer.decode(ids), input_lens[i], output_lens[i])
        for i, ids in enumerate(id_lists)
    ]


def _ids_from_text(tokenizer: LocalTokenizer, rng: BenchRandom, pairs: list[tuple[str, str]], input_lens: list[int]) -> list[list[int]]:
    pairs = list(pairs)
    rng.python.shuffle(pairs)
    id_lists: list[list[int]] = []
    for prompt, _ in pairs:
        if len(id_lists) == len(input_lens):
            break
        ids = tokenizer.encode(prompt)
        if not ids:
            continue
        want = input_lens[len(id_lists)]
        id_lists.append(ids[:want] if len(ids) > want else (ids * (-(-want // len(ids))))[:want])
    if len(id_lists) < len(input_lens):
        raise SpecsuiteError(f"the text source has {len(id_lists)} usable prompts, fewer than --num-prompts {len(input_lens)}")
    return id_lists


def sample_sharegpt_requests(tokenizer: LocalTokenizer, rng: BenchRandom, *, num_prompts: int, dataset_path: str | None, fixed_output_len: int | None = None,
                             context_len: int | None = None) -> list[DatasetRow]:
    """bench_serving's `sharegpt` request set: real prompts, reply-length outputs."""
    if fixed_output_len is not None and fixed_output_len < 4:
        raise SpecsuiteError(f"--sharegpt-output-len must be at least 4, got {fixed_output_len}")
    pairs = load_conversations(dataset_path)
    rng.python.shuffle(pairs)
    rows: list[DatasetRow] = []
    for prompt, reply in pairs:
        if len(rows) == num_prompts:
            break
        prompt_len = len(tokenizer.encode(prompt))
        out_len = len(tokenizer.encode(reply)) if fixed_output_len is None else fixed_output_len
        if prompt_len < 2 or out_len < 2:
            continue
        if context_len and prompt_len + out_len > context_len:
            continue
        rows.append(DatasetRow(prompt, prompt_len, out_len))
    if len(rows) < num_prompts:
        raise SpecsuiteError(f"the ShareGPT source has {len(rows)} usable conversations, fewer than --num-prompts {num_prompts}")
    return rows


def build_requests(
    name: str,
    tokenizer: LocalTokenizer,
    rng: BenchRandom,
    *,
    num_prompts: int,
    input_len: int,
    output_len: int,
    range_ratio: float,
    tokenize_prompt: bool,
    dataset_path: str | None,
    sharegpt_output_len: int | None = None,
    sharegpt_context_len: int | None = None,
) -> list[DatasetRow]:
    """The request set for `--dataset-name`."""
    if num_prompts < 1:
        raise SpecsuiteError(f"--num-prompts must be at least 1, got {num_prompts}")
    if name in ("random", "random-ids"):
        return sample_random_requests(tokenizer, rng, num_prompts=num_prompts, input_len=input_len, output_len=output_len,
                                      range_ratio=range_ratio, random_ids=name == "random-ids", tokenize_prompt=tokenize_prompt,
                                      dataset_path=dataset_path)
    if name == "sharegpt":
        if tokenize_prompt:
            raise SpecsuiteError("--tokenize-prompt works with the random datasets only (sharegpt sends text)")
        return sample_sharegpt_requests(tokenizer, rng, num_prompts=num_prompts, dataset_path=dataset_path,
                                        fixed_output_len=sharegpt_output_len, context_len=sharegpt_context_len)
    raise SpecsuiteError(f"unknown dataset {name!r}: choose one of {', '.join(DATASETS)}")
