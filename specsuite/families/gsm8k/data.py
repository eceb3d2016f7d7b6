"""Load GSM8K items from the Hugging Face Hub, a local JSONL/Parquet file, or the bundled synthetic set.

Every source yields rows with a ``question`` and a full worked ``answer`` whose last line is
``#### N`` (the openai/gsm8k format). The integer label is parsed from that line with commas
removed. Anything that cannot be loaded or parsed becomes one `SpecsuiteError` line that names
the source and the problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.project_paths import DATA_DIR

__all__ = ["GSM8KItem", "HF_DATASET", "SYNTHETIC_SOURCE", "load_gsm8k", "one_line", "parse_label", "synthetic_path"]

HF_DATASET = ("openai/gsm8k", "main")
SYNTHETIC_SOURCE = "synthetic"
_HF_SOURCES = (None, "hf")
_LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
# `datasets` (and pyarrow under it) is an optional install, the `hf` extra: only the Hub and Parquet need it.
_NEEDS_DATASETS = "needs the datasets package (pip install -e '.[hf]')"
_REQUIRED_COLUMNS = ("question", "answer")
_ANSWER_MARK = "####"


@dataclass(frozen=True)
class GSM8KItem:
    """One GSM8K problem: the question, the full worked answer, and its integer label."""

    question: str
    answer: str
    label: int


def parse_label(answer: str) -> int:
    """Return the integer after the last ``####`` of a worked answer, commas removed.

    Raises ValueError (the loader turns it into a SpecsuiteError naming the row).
    """
    _, mark, tail = answer.rpartition(_ANSWER_MARK)
    if not mark:
        raise ValueError("answer has no '#### N' line")
    number = tail.strip().replace(",", "")
    try:
        return int(number)
    except ValueError:
        raise ValueError(f"'#### {tail.strip()}' is not an integer") from None


def synthetic_path() -> Path:
    """Path of the project's synthetic GSM8K-format set (specsuite/fixtures/data/gsm8k_synth.jsonl)."""
    return DATA_DIR / "gsm8k_synth.jsonl"


def load_gsm8k(source: str | None, split: str = "test") -> list[GSM8KItem]:
    """Load GSM8K items.

    :param source: ``None`` or ``"hf"`` for ``openai/gsm8k`` (config ``main``) from the Hub;
        ``"synthetic"`` for the bundled synthetic set; otherwise a path to a ``.jsonl``,
        ``.json`` or ``.parquet`` file with ``question`` and ``answer`` columns.
    :param split: the Hub split; a local file is a single split and ignores it.
    :raises SpecsuiteError: the source cannot be read, lacks a column, or has a bad answer row.
    """
    if source in _HF_SOURCES:
        return _items_from(_load_from_hub(split), f"{HF_DATASET[0]} ({split})")
    path = synthetic_path() if source == SYNTHETIC_SOURCE else Path(source)
    return _items_from(_load_local(path), str(path))


def _datasets(what: str) -> Any:
    try:
        import datasets  # slow to import and large to install: only for the Hub and Parquet files
    except ImportError:
        raise SpecsuiteError(f"{what} {_NEEDS_DATASETS}; the bundled set (--gsm8k-path {SYNTHETIC_SOURCE}) and "
                             ".jsonl/.json files do not") from None
    return datasets


def _load_from_hub(split: str) -> Any:
    datasets = _datasets(f"--gsm8k-path hf ({HF_DATASET[0]} from the Hugging Face Hub)")
    try:
        return datasets.load_dataset(*HF_DATASET, split=split)
    except Exception as err:  # any Hub/cache failure means the same thing to the user
        raise SpecsuiteError(
            f"cannot load {HF_DATASET[0]} split {split!r} from the Hugging Face Hub "
            f"({one_line(err)}); pass --gsm8k-path with a local .jsonl/.parquet file, "
            f"or --gsm8k-path {SYNTHETIC_SOURCE} for the bundled synthetic set"
        ) from None


@dataclass(frozen=True)
class _Columns:
    """Rows read without `datasets`, with the little of `datasets.Dataset` that `_items_from` uses."""

    rows: list[dict[str, Any]]

    @property
    def column_names(self) -> list[str]:
        return list(dict.fromkeys(key for row in self.rows for key in row))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, column: str) -> list[Any]:
        return [row.get(column) for row in self.rows]


def _read_json_rows(path: Path) -> _Columns:
    """A .jsonl file (one object per line), or a .json file holding a list of objects or JSON lines."""
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text) if path.suffix.lower() == ".json" else None
    except json.JSONDecodeError:
        whole = None  # a .json file of JSON lines, as datasets' json builder reads it too
    rows = whole if isinstance(whole, list) else [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(row, dict) for row in rows):
        raise ValueError("every row must be a JSON object")
    return _Columns(rows)


def _load_local(path: Path) -> Any:
    if not path.is_file():
        raise SpecsuiteError(f"GSM8K file not found: {path}")
    builder = _LOCAL_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise SpecsuiteError(
            f"GSM8K file {path} has suffix {path.suffix!r}; expected one of {', '.join(_LOCAL_BUILDERS)}"
        )
    try:
        if builder == "json":
            return _read_json_rows(path)
        datasets = _datasets(f"reading {path}")
        return datasets.load_dataset(builder, data_files=str(path), split="train")
    except SpecsuiteError:
        raise
    except Exception as err:  # malformed JSON/Parquet surfaces as assorted json/datasets/pyarrow errors
        raise SpecsuiteError(f"cannot read GSM8K file {path}: {one_line(err)}") from None


def _items_from(rows: Any, where: str) -> list[GSM8KItem]:
    missing = [column for column in _REQUIRED_COLUMNS if column not in rows.column_names]
    if missing:
        raise SpecsuiteError(
            f"GSM8K source {where} lacks column(s) {', '.join(missing)}; found {', '.join(rows.column_names) or 'none'}"
        )
    if len(rows) == 0:
        raise SpecsuiteError(f"GSM8K source {where} has no rows")
    items = []
    # the dataset's own columns (a Hugging Face dataset or the synthetic set), read once here into GSM8KItems
    for index, (question, answer) in enumerate(zip(rows["question"], rows["answer"], strict=True)):
        if not isinstance(question, str) or not isinstance(answer, str):
            raise SpecsuiteError(f"GSM8K source {where} row {index}: question and answer must be strings")
        try:
            items.append(GSM8KItem(question=question, answer=answer, label=parse_label(answer)))
        except ValueError as err:
            raise SpecsuiteError(f"GSM8K source {where} row {index}: {err}") from None
    return items


def one_line(err: BaseException) -> str:
    """``Type: first line of message`` for an exception, for one-line error reports."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
