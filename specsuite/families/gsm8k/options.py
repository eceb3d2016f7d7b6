"""The GSM8K family's options and settings: the data set, how it is asked, its temperatures, the suite's thresholds;
and what the main job of `specsuite run` sets (MAIN_JOB). Listed by its FAMILY entry; the table and RunConfig read
them from there (specsuite/session/option_table.py, specsuite/session/config.py).

`--gsm8k-temperatures` is GSM8K's own list on every front end; `specsuite gsm8k --temperatures` is a deprecated
alias of it (`--temperatures` elsewhere is the correctness grid)."""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.config.option import COUNT, NON_NEGATIVE_COUNT, PROBABILITY, Alias, Option, setting_from, temperature_list

OPTIONS: tuple[Option, ...] = (
    # pytest and `specsuite gsm8k`; the subcommand's short names are older aliases
    Option("--gsm8k-path", "GSM8K source: 'synthetic' (the project's set), 'hf' (datasets.load_dataset), or a .jsonl/.parquet file",
           ("pytest", "gsm8k"), default="synthetic", pytest_area="plugin"),
    Option("--gsm8k-num-questions", "questions per GSM8K run", ("pytest", "gsm8k"), default=200, type=int, pytest_area="plugin",
           aliases=(Alias("--num-questions", ("gsm8k",)),), bounds=COUNT),
    Option("--gsm8k-num-shots", "few-shot examples", ("pytest", "gsm8k"), default=5, type=int, pytest_area="plugin",
           aliases=(Alias("--num-shots", ("gsm8k",)),), bounds=NON_NEGATIVE_COUNT),
    Option("--gsm8k-temperatures", "comma-separated GSM8K temperatures (each >= 0)", ("pytest", "gsm8k"), default="0", parse=temperature_list,
           pytest_area="plugin", aliases=(Alias("--temperatures", ("gsm8k",)),)),
    Option("--gsm8k-parallel", "concurrent GSM8K requests", ("pytest", "gsm8k"), default=16, type=int, pytest_area="plugin",
           aliases=(Alias("--parallel", ("gsm8k",)),), bounds=COUNT),
    Option("--gsm8k-shots-from-eval", "take shots from the evaluated questions, as sglang's few_shot_gsm8k does", ("pytest", "gsm8k"),
           action="store_true", default_text="excluded", pytest_area="plugin", aliases=(Alias("--shots-from-eval", ("gsm8k",)),)),
    Option("--gsm8k-min-accuracy", "fail below this accuracy (SGLang's last-integer rule)", ("pytest",), type=float, pytest_area="plugin", bounds=PROBABILITY),
    Option("--gsm8k-max-invalid", "fail above this invalid fraction", ("pytest",), type=float, pytest_area="plugin", bounds=PROBABILITY),
)
setting = setting_from(OPTIONS)


@dataclass(frozen=True)
class Gsm8kSettings:
    """One GSM8K run per temperature: the data set and how it is asked; and the suite's pass thresholds."""

    path: str = setting("--gsm8k-path")
    num_questions: int = setting("--gsm8k-num-questions")
    num_shots: int = setting("--gsm8k-num-shots")
    parallel: int = setting("--gsm8k-parallel")
    shots_from_eval: bool = setting("--gsm8k-shots-from-eval")
    temperatures: tuple[float, ...] = setting("--gsm8k-temperatures")
    min_accuracy: float | None = setting("--gsm8k-min-accuracy")  # the suite's floor (SGLang's last-integer rule); None: none
    max_invalid: float | None = setting("--gsm8k-max-invalid")  # the suite's cap on unparsable answers; None: none


# The main job (specsuite/session/main_job_profiles.py): T=0 (greedy, clean) and T=1 (sampled) on the bundled synthetic
# set, 200 questions each, as the option values a pytest session parses.
MAIN_JOB: tuple[tuple[str, str | int], ...] = (("--gsm8k-path", "synthetic"), ("--gsm8k-num-questions", 200), ("--gsm8k-temperatures", "0,1"))
