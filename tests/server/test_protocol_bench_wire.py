"""The serving benchmark's bodies, now built on the server side (specsuite/server/bench/wire.py), are
byte-for-byte the bodies the workload built before (tests/data/protocol_wire/bench_bodies.json,
captured by capture_bench_bodies.py.txt next to it), with the same sampling_sent and ignored flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.families.bench.client import RequestSettings
from specsuite.families.bench.datasets import DatasetRow
from specsuite.server.bench.wire import BenchWire
from specsuite.server.protocol import GenerationRequest, Sampling

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "protocol_wire" / "bench_bodies.json").read_text())
CASES = RECORDED["cases"]


def _settings(case: dict) -> RequestSettings:
    return RequestSettings(backend=case["backend"], base_url="http://127.0.0.1:1", model=RECORDED["model"],
                           temperature=RECORDED["temperature"], top_p=case["top_p"], ignore_eos=case["ignore_eos"],
                           extra_request_body=RECORDED["extras"][case["extra"]], oai_sampling=case["oai_sampling"])


def _row(case: dict) -> DatasetRow:
    return DatasetRow(*RECORDED["prompts"][case["prompt"]])


def _name(case: dict) -> str:
    return "-".join(str(case[k]) for k in ("backend", "prompt", "ignore_eos", "top_p", "oai_sampling", "extra"))


def test_the_recorded_grid_is_whole():
    assert len(CASES) == 4 * 2 * 2 * 2 * 2 * 2
    assert {c["backend"] for c in CASES} == {"sglang", "sglang-oai", "vllm", "sglang-oai-chat"}
    assert sum("error" in c for c in CASES) == 16  # the chat backend refuses token-id prompts


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_bench_body_bytes_equal_the_recorded_ones(case):
    settings = _settings(case)
    assert settings.wire.sampling_sent(settings.sampling) == case["sampling_sent"]
    assert settings.wire.ignored_sampling_flags(settings.sampling) == case["ignored_sampling_flags"]
    request = settings.bench_request(_row(case))
    if "error" in case:
        with pytest.raises(SpecsuiteError) as raised:
            settings.wire.encode(request)
        assert str(raised.value) == case["error"]
        return
    assert settings.wire.encode(request) == case["body"].encode()


def test_a_typed_request_without_the_bench_fields_is_refused_in_one_line():
    with pytest.raises(SpecsuiteError, match="max_new_tokens and ignore_eos"):
        BenchWire("sglang").body(GenerationRequest(prompt="x", sampling=Sampling(temperature=0.0)))
    with pytest.raises(SpecsuiteError, match="unknown backend"):
        BenchWire("tgi")
