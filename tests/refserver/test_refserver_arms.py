"""The reference server's arms over real HTTP.

One workload, 24 prompts from specsuite/fixtures/data/correctness_prompts.jsonl with fixed sampling seeds,
runs against three servers started once for this module: `nofix` (the recycled-draft_probs bug: EAGLE, steps
5, topk 1, draft 6, rejection sampling, draft_probs aliased in the graph pool), `fix`, and
`nofix --disable-cuda-graph` (no pool, so no aliasing).  At temperature 1.0 / top_p 0.95 the
no-fix arm must show the whole failure chain (ids >= tokenizer length with the vocab_size-1
fallback among them, stray "!" and repeated special fragments in `text`, non-finite draft_probs
on /metrics, a higher accept length than the fix); every other run must be clean.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from scipy import stats

from specsuite.server.launcher import LaunchedServer, launch_reference_server
from tests.helpers.arm_workload import ArmRun as BaseArmRun
from tests.helpers.arm_workload import run_arm_workload
from tests.helpers.workload_cache import cached_workloads

ROOT = Path(__file__).resolve().parents[2]
MODEL_CONFIG = json.loads((ROOT / "specsuite/refserver/model/config.json").read_text())
TOKENIZER_LENGTH = MODEL_CONFIG["tokenizer_length"]
FALLBACK_ID = MODEL_CONFIG["vocab_size"] - 1
PROMPTS = [json.loads(line) for line in (ROOT / "specsuite/fixtures/data/correctness_prompts.jsonl").read_text().splitlines()][::4][:24]
MAX_NEW_TOKENS = 200
MIN_TOTAL_TOKENS = 2000
CONCURRENCY = 8
TIMEOUT_S = (5, 120)
FRAGMENTS = ("</think>", "<tool_call>")

NONFINITE = "specsuite_refserver:draft_probs_nonfinite_entries_total"
FALLBACKS = "specsuite_refserver:sampler_fallback_emissions_total"
GUARD_REPLACEMENTS = "specsuite_refserver:sampler_guard_replacements_total"


@dataclass
class ArmRun(BaseArmRun):
    @property
    def bad_ids(self) -> list[int]:
        return [token for token in self.output_ids if token >= TOKENIZER_LENGTH]


def run_workload(base_url: str, temperature: float) -> ArmRun:
    """All prompts, seeded, CONCURRENCY at a time; returns results in prompt order."""
    run = run_arm_workload(base_url, PROMPTS, temperature, max_new_tokens=MAX_NEW_TOKENS, seed_base=1000,
                           concurrency=CONCURRENCY, timeout=TIMEOUT_S)
    return ArmRun(run.results, run.metric_deltas)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("refserver-arms")
    started: dict[str, LaunchedServer] = {}
    try:
        started["nofix"] = launch_reference_server("nofix", log_dir, ready_timeout_s=60)
        started["fix"] = launch_reference_server("fix", log_dir, ready_timeout_s=60)
        started["nofix-no-graph"] = launch_reference_server("nofix", log_dir, extra_args=["--disable-cuda-graph"], ready_timeout_s=60)
        yield {name: server.base_url for name, server in started.items()}
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture(scope="module")
def runs(servers):
    """Each (server, temperature) workload runs once, on first use."""
    return cached_workloads(servers, run_workload)


def test_workload_is_big_enough(runs):
    run = runs("nofix", 1.0)
    assert len(PROMPTS) >= 20
    assert len(run.output_ids) >= MIN_TOTAL_TOKENS, f"only {len(run.output_ids)} tokens generated"


def test_nofix_emits_ids_outside_the_tokenizer_including_the_fallback(runs):
    run = runs("nofix", 1.0)
    assert run.bad_ids, "no id >= tokenizer length in the no-fix arm"
    assert FALLBACK_ID in run.bad_ids
    # Every fallback the sampler committed is in output_ids, and nothing else is out of range here.
    assert run.output_ids.count(FALLBACK_ID) == run.metric_deltas[FALLBACKS]


def test_nofix_metrics_count_nonfinite_draft_probs(runs):
    deltas = runs("nofix", 1.0).metric_deltas
    assert deltas[NONFINITE] > 0
    assert deltas[FALLBACKS] > 0


def _repeated_fragment_responses(texts: list[str]) -> int:
    """Responses where a special fragment occurs three or more times (a sane answer closes
    `</think>` once and opens a few tool calls at most)."""
    return sum(1 for text in texts if any(text.count(fragment) >= 3 for fragment in FRAGMENTS))


def test_nofix_text_shows_stray_bang_and_repeated_special_fragments(runs):
    nofix, fix = runs("nofix", 1.0).texts(), runs("fix", 1.0).texts()
    nofix_bangs, fix_bangs = sum(t.count("!") for t in nofix), sum(t.count("!") for t in fix)
    assert nofix_bangs >= 50 and nofix_bangs > 10 * (fix_bangs + 1), (nofix_bangs, fix_bangs)
    assert re.search(r"!{3,}", "".join(nofix)), "no run of stray '!'"
    assert _repeated_fragment_responses(nofix) >= 5
    assert _repeated_fragment_responses(fix) == 0


def test_nofix_accept_length_is_higher_than_fix(runs):
    nofix, fix = runs("nofix", 1.0), runs("fix", 1.0)
    assert nofix.pooled_accept_length > fix.pooled_accept_length + 0.5
    per_request = [[m["spec_accept_length"] for m in run.spec_meta] for run in (nofix, fix)]
    assert stats.mannwhitneyu(*per_request, alternative="greater").pvalue < 0.01


@pytest.mark.parametrize(("server", "temperature"), [("fix", 1.0), ("fix", 0.0), ("nofix", 0.0), ("nofix-no-graph", 1.0)])
def test_clean_runs_have_no_bad_ids_fallbacks_or_nonfinite_entries(runs, server, temperature):
    run = runs(server, temperature)
    assert len(run.output_ids) >= MIN_TOTAL_TOKENS
    assert run.bad_ids == []
    assert run.metric_deltas[FALLBACKS] == 0
    assert run.metric_deltas[NONFINITE] == 0
    assert run.metric_deltas[GUARD_REPLACEMENTS] == 0


def test_greedy_output_is_the_same_in_both_arms(runs):
    assert [r["output_ids"] for r in runs("nofix", 0.0).results] == [r["output_ids"] for r in runs("fix", 0.0).results]


def test_control_without_graphs_matches_the_fix_arm_token_for_token(runs):
    """Without the pool there is no aliasing: seeded sampling gives exactly the fix arm's output."""
    assert [r["output_ids"] for r in runs("nofix-no-graph", 1.0).results] == [r["output_ids"] for r in runs("fix", 1.0).results]
