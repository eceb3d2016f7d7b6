"""The contract tests' source fetcher itself: a known SGLang 0.5.23 file comes back intact."""

from __future__ import annotations


def test_reads_a_file_of_the_release(sglang_source) -> None:
    text = sglang_source("srt/sampling/sampling_params.py")
    assert "class SamplingParams" in text
