"""Answer extraction and scoring for GSM8K under three named definitions.

``sglang``
    SGLang ``few_shot_gsm8k`` (``get_answer_value``): drop every comma, take the **last** run of
    ``\\d`` digits, convert it as a Python integer literal; no digits, or a run Python rejects as a
    literal, gives the sentinel ``INVALID``. No sign and no decimal point: ``-3`` reads as 3 and
    ``2.5`` as 5. The gold label is read from the full worked answer with the same rule (its
    ``#### N`` line comes last), so a negative gold answer is compared by magnitude, exactly as
    the anchor does. Outcome: ``invalid`` when the prediction is the sentinel, else
    ``correct``/``incorrect`` by integer equality.
``lmeval_strict``
    lm-evaluation-harness gsm8k ``strict-match``: the first ``#### (-?[0-9.,]+)`` capture.
``lmeval_flexible``
    lm-evaluation-harness gsm8k ``flexible-extract``: the last match of
    ``(-?[$0-9.,]{2,})|(-?[0-9]+)`` (so a run of dots or commas such as ``...`` is a match).

For both lm-eval definitions a missing match is lm-eval's ``[invalid]`` fallback (our
``invalid``); otherwise prediction and the full gold answer are compared as strings after
lm-eval's ``exact_match`` normalisation: delete ``,`` and ``$``, delete everything up to
``#### ``, delete one trailing ``.``, lower-case. Hence ``72.00`` is *incorrect* against 72.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFINITIONS",
    "INVALID",
    "Outcome",
    "Score",
    "extract_lmeval_flexible",
    "extract_lmeval_strict",
    "extract_sglang_last_integer",
    "lmeval_normalize",
    "score_output",
]

INVALID = -9999999  # the anchor's sentinel for "no answer found"
DEFINITIONS = ("sglang", "lmeval_strict", "lmeval_flexible")
Outcome = Literal["correct", "incorrect", "invalid"]

_DIGIT_RUN = re.compile(r"\d+")  # str pattern: \d is any Unicode decimal digit, as in the anchor
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
_LMEVAL_IGNORE = (re.compile(","), re.compile(r"\$"), re.compile(r"(?s).*#### "), re.compile(r"\.$"))


@dataclass(frozen=True)
class Score:
    """What one definition extracted from an output, and the resulting outcome."""

    extracted: int | str | None
    outcome: Outcome


def extract_sglang_last_integer(text: str) -> int:
    """The anchor's rule: last digit run after removing commas, or ``INVALID``."""
    runs = _DIGIT_RUN.findall(text.replace(",", ""))
    if not runs:
        return INVALID
    last = runs[-1]
    # The anchor converts with ast.literal_eval and maps SyntaxError to INVALID; these are the
    # digit runs Python's parser rejects as an integer literal.
    if not last.isascii():  # non-ASCII decimal digits (e.g. Arabic-Indic, full-width)
        return INVALID
    if last[0] == "0" and last.strip("0"):  # leading zeros such as "07"
        return INVALID
    max_digits = sys.get_int_max_str_digits()
    if max_digits and len(last) > max_digits:
        return INVALID
    return int(last)


def extract_lmeval_strict(text: str) -> str | None:
    """lm-eval strict-match: the first ``#### N`` capture, stripped; None when absent."""
    match = _STRICT.search(text)
    return match.group(1).strip() if match else None


def extract_lmeval_flexible(text: str) -> str | None:
    """lm-eval flexible-extract: the last numeric-looking match, stripped; None when absent."""
    matches = _FLEXIBLE.findall(text)
    if not matches:
        return None
    return next(group for group in matches[-1] if group).strip()


def lmeval_normalize(text: str) -> str:
    """lm-eval gsm8k ``exact_match`` normalisation (regexes_to_ignore, then ignore_case)."""
    for pattern in _LMEVAL_IGNORE:
        text = pattern.sub("", text)
    return text.lower()


def score_output(text: str, gold_answer: str) -> dict[str, Score]:
    """Score one model output against the full worked gold answer under every definition."""
    predicted = extract_sglang_last_integer(text)
    if predicted == INVALID:
        sglang = Score(predicted, "invalid")
    else:
        label = extract_sglang_last_integer(gold_answer)
        sglang = Score(predicted, "correct" if predicted == label else "incorrect")
    reference = lmeval_normalize(gold_answer)
    return {
        "sglang": sglang,
        "lmeval_strict": _lmeval_score(extract_lmeval_strict(text), reference),
        "lmeval_flexible": _lmeval_score(extract_lmeval_flexible(text), reference),
    }


def _lmeval_score(extracted: str | None, reference: str) -> Score:
    if extracted is None:
        return Score(None, "invalid")
    return Score(extracted, "correct" if lmeval_normalize(extracted) == reference else "incorrect")
