"""The correctness family's options and settings: the sampling grid every correctness case runs (every temperature
with every top_p) and the optional stray-character cap. Listed by its FAMILY entry; the table and RunConfig read them
from there (specsuite/session/option_table.py, specsuite/session/config.py)."""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.config.option import NON_NEGATIVE, PYTEST_RUN, Option, setting_from, temperature_list, top_p_list

OPTIONS: tuple[Option, ...] = (
    Option("--temperatures", "comma-separated sampling temperatures of the correctness grid (each >= 0)", PYTEST_RUN, default="0,0.6,1.0",
           parse=temperature_list, pytest_area="plugin"),
    Option("--top-p", "comma-separated top_p values of the correctness grid (each in (0, 1])", PYTEST_RUN, default="0.95,1.0",
           parse=top_p_list, pytest_area="plugin"),
    Option("--max-stray-per-1200", "optional absolute cap on stray characters per 1200 tokens", ("pytest",), type=float, pytest_area="plugin",
           bounds=NON_NEGATIVE),
)
setting = setting_from(OPTIONS)


@dataclass(frozen=True)
class CorrectnessSettings:
    """The correctness suites' sampling grid (every temperature with every top_p) and the optional stray cap."""

    temperatures: tuple[float, ...] = setting("--temperatures")
    top_p: tuple[float, ...] = setting("--top-p")
    max_stray_per_1200: float | None = setting("--max-stray-per-1200")
