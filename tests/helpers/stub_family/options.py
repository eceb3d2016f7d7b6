"""The stub family's one option and its settings section (RunConfig builds the section from the option table)."""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.config.option import COUNT, Option, setting_from

OPTIONS: tuple[Option, ...] = (
    Option("--stub-answers", "sampled answers the stub family asks of the server", ("pytest",), default=12, type=int,
           pytest_area="plugin", bounds=COUNT),
)
setting = setting_from(OPTIONS)


@dataclass(frozen=True)
class StubSettings:
    """How many answers the stub workload asks for."""

    answers: int = setting("--stub-answers")
