"""The harness against answers recorded from live SGLang releases, and a live release against them.

tests/data/sglang_live/eagle-VERSION.json holds what SGLang VERSION (from the package index, on the
project's CPU ops, EAGLE) answered to the fixed requests of specsuite/server/answer_shapes.py. Offline,
every release's recording must parse the way the harness parses a server (the meta_info keys it reads,
the identity fields, the metric names, the SSE stream); with a live server named
(SPECSUITE_SGLANG_LIVE_CONTRACT="VERSION=URL", set by .ci/sglang-job), the server's answers must keep
the recorded shapes: a key gone or a type changed fails here, naming it; a key added is printed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specsuite.server.answer_shapes import record_answers, shape, shape_differences
from specsuite.server.generation import Generation
from specsuite.server.identity import collect_secrets, sanitise

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = sorted((ROOT / "tests" / "data" / "sglang_live").glob("eagle-*.json"))
LIVE_ENV = "SPECSUITE_SGLANG_LIVE_CONTRACT"


def recording(path: Path) -> dict:
    return json.loads(path.read_text())["answers"]


def test_both_served_releases_are_recorded():
    assert {path.stem for path in RECORDINGS} >= {"eagle-0.5.20", "eagle-0.5.23"}


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_generate_answers_parse_as_the_harness_reads_them(path):
    from tests.sglang_contract.test_api_surface import harness_meta_keys

    answers = recording(path)
    payload = {"text": "x", "sampling_params": {"temperature": 0, "max_new_tokens": 12}}
    generation = Generation.from_sglang(payload, answers["generate"])
    assert len(generation.output_ids) == 12 and generation.finish_reason is not None
    meta = answers["generate"]["meta_info"]
    # The spec counters the correctness suite's acceptance checks read, on a live EAGLE server.
    assert {"spec_verify_ct", "spec_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts"} <= meta.keys()
    read_but_absent = sorted(key for key in harness_meta_keys() if key not in meta and key not in answers["generate_logprobs"]["meta_info"])
    # Keys that only some requests carry (logprob variants, finish details) may be absent here; none of the always-set ones.
    assert not {"finish_reason", "completion_tokens", "prompt_tokens", "spec_verify_ct"} & set(read_but_absent)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_streamed_answer_reassembles_to_the_plain_one(path):
    answers = recording(path)
    events = [event for event in answers["generate_stream"] if event != "[DONE]"]
    assert answers["generate_stream"][-1] == "[DONE]"
    assert events[-1]["output_ids"] == answers["generate"]["output_ids"]  # cumulative stream: the last event holds every id
    assert events[-1]["text"] == answers["generate"]["text"]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_server_info_and_metrics_carry_what_the_identity_and_counters_read(path):
    from specsuite.families.correctness import family as correctness
    from specsuite.server import kinds

    answers = recording(path)
    info = answers["server_info"]
    assert info["device"] == "cpu" and info["speculative_algorithm"] == "EAGLE"
    assert {"version", "model_path", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"} <= info.keys()
    assert answers["model_info"]["model_path"].endswith("target")
    read = set(kinds.get("sglang").counters) | {correctness.GENERATED_TOKENS}
    # A labelled counter is exported from its first increment on: the abort counter (0.5.23
    # srt/observability/metrics_collector.py:1959-1960, incremented at :2186) stays absent until a request is
    # aborted, and the harness takes an absent counter as no data (specsuite/server/counters.py counter_deltas).
    first_seen_on_increment = {"sglang:num_aborted_requests_total"}
    missing = read - set(answers["metrics"])
    assert missing <= first_seen_on_increment, f"metrics the harness reads that this release does not export: {sorted(missing)}"


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_openai_completion_answers_have_the_openai_shape(path):
    answers = recording(path)
    completion = answers["v1_completions"]
    assert completion["object"] == "text_completion" and completion["choices"][0]["text"]
    assert {"prompt_tokens", "completion_tokens", "total_tokens"} <= completion["usage"].keys()
    assert answers["v1_completions_stream"][-1] == "[DONE]"


def test_shape_differences_name_the_keys_that_moved():
    before = shape({"meta_info": {"spec_verify_ct": 3, "id": "x"}, "output_ids": [1, 2]})
    after = shape({"meta_info": {"spec_verify_ct": "3", "spec_new": 1}, "output_ids": [1]})
    assert sorted(shape_differences(before, after)) == [".meta_info.id: gone", ".meta_info.spec_new: new",
                                                        ".meta_info.spec_verify_ct: number became str"]


def test_live_release_keeps_the_recorded_shapes():
    value = os.environ.get(LIVE_ENV)
    if not value:
        pytest.skip(f"no live SGLang named: {LIVE_ENV}=VERSION=URL is set by .ci/sglang-job")
    version, url = value.split("=", 1)
    recorded_path = ROOT / "tests" / "data" / "sglang_live" / f"eagle-{version}.json"
    live = record_answers(url)
    live = sanitise(live, collect_secrets(live))
    recorded = recording(recorded_path)
    differences = []
    for name in recorded:
        if name == "metrics":
            differences += [f"/metrics: {metric} gone" for metric in sorted(set(recorded[name]) - set(live[name]))]
        elif name != "flush_cache":
            differences += [f"{name}{difference}" for difference in shape_differences(shape(recorded[name]), shape(live[name]))]
    # /server_info's internal_states is the scheduler's state, whose keys come with its history (an average
    # accept length appears after the first logged decode batch); a key the release adds breaks no reader.
    added = [d for d in differences if d.endswith(": new")]
    print("\n".join(f"new in the live answer: {d}" for d in added))
    problems = [d for d in differences if d not in added and not d.startswith("server_info.internal_states")]
    assert live["flush_cache"]["status"] == 200, f"/flush_cache on an idle server answered {live['flush_cache']}"
    assert not problems, f"SGLang {version}'s answers drifted from {recorded_path.name}:\n" + "\n".join(problems)
