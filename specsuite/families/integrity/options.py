"""The integrity family's options and settings: whether sampling_seed is trusted, and the probes' sizes. Listed by its
FAMILY entry; the table and RunConfig read them from there (specsuite/session/option_table.py, specsuite/session/config.py)."""

from __future__ import annotations

from dataclasses import dataclass

from specsuite.config.option import COUNT, Option, setting_from

OPTIONS: tuple[Option, ...] = (
    # specsuite/pytest_plugin/integrity.py declares them
    Option("--assume-deterministic", "treat the server as honouring sampling_seed with batch-invariant numerics", ("pytest",),
           action="store_true", default_text="only when the server reports a batch-invariance promise (SGLang "
           "enable_deterministic_inference, vLLM VLLM_BATCH_INVARIANT), or for the reference server", pytest_area="integrity"),
    Option("--integrity-stop-offsets", "token offsets per prompt at which stop strings and stop ids are placed", ("pytest",), default=24,
           type=int, pytest_area="integrity", bounds=COUNT),
    Option("--integrity-batch-size", "requests in the canary isolation batch", ("pytest",), default=64, type=int, pytest_area="integrity", bounds=COUNT),
)
setting = setting_from(OPTIONS)


@dataclass(frozen=True)
class IntegritySettings:
    """The integrity suite: whether sampling_seed is trusted, and its probe sizes."""

    assume_deterministic: bool = setting("--assume-deterministic")
    stop_offsets: int = setting("--integrity-stop-offsets")
    batch_size: int = setting("--integrity-batch-size")
