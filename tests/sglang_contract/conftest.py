"""The SGLang 0.5.23 source that the contract tests read facts from.

`sglang_source("srt/managers/schedule_batch.py")` is the text of that file in the public
sglang==0.5.23 wheel (paths relative to the `sglang/` package), fetched once into the specsuite
cache.  Where the package index cannot be reached the test skips and says so, so CI on a machine
with the registry checks SGLang itself, and an offline machine still runs the rest.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.sglang_wheel import extract_member

CONTRACT_VERSION = "0.5.23"


@pytest.fixture(scope="session")
def sglang_source() -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def read(relative_path: str) -> str:
        if relative_path not in cache:
            try:
                member = extract_member(CONTRACT_VERSION, f"sglang/{relative_path}")
            except SpecsuiteError as exc:
                pytest.skip(f"SGLang {CONTRACT_VERSION} source unavailable: {exc}")
            cache[relative_path] = member.path.read_text(encoding="utf-8")
        return cache[relative_path]

    return read
