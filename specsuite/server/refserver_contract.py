"""Everything the harness knows about specsuite's reference server, in one place.

The reference server (the package ``specsuite.refserver``) is a CPU emulation of an SGLang EAGLE
server with the recycled-draft_probs bug's fix and no-fix arms. The harness launches it as a process
(`server_command`), recognises it in /server_info, reads its ground-truth counters (and registers
the A/B metrics only they feed, `COUNTER_RATES`) and loads its numpy sampler for the kernel suite;
all of that goes through this module, the only harness module that imports ``specsuite.refserver``
(tests/packaging/test_layering.py). Those imports are lazy, so importing the harness does not import the
server; the server itself never imports the harness (both share ``specsuite.kernel_loading``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MODULE = "specsuite.refserver"
SERVER_KIND = "sglang"  # the server kind whose HTTP API it emulates (specsuite.server.kinds): SGLang's native routes
FIX_ARM = "fix"  # copy draft_probs + sampler guards: the correct arm
ARMS = ("nofix", FIX_ARM)  # the recycled-draft_probs bug unfixed and fixed, in run order (the last one is the A/B baseline)
ABLATION_ARMS = ("copy-only", "guards-only")  # one half of the fix each (specsuite/refserver/engine.py ARMS)
DEFAULT_ARM = FIX_ARM  # the arm the harness launches when none is named (the embedded server, the speculation-off reference)

# The configuration that reaches the recycled-draft_probs bug: EAGLE chain drafts of 5 steps, rejection sampling.
SPECULATIVE_ARGS = (
    "--enable-metrics",
    "--speculative-algorithm", "EAGLE",
    "--speculative-num-steps", "5",
    "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "6",
    "--speculative-use-rejection-sampling",
    "--random-seed", "0",
)  # fmt: skip

# /server_info keys only the reference server reports (specsuite/refserver/cli.py: server_args_dict).
MARKER_KEY = "refserver_arm"
SAMPLER_KEY = "refserver_sampler"
MODEL_TYPE = "specsuite_ngram"

# Its Prometheus ground truth: what the graph-pool corruption and the sampler actually did.
_METRIC_PREFIX = "specsuite_refserver:"
NONFINITE_ENTRIES = _METRIC_PREFIX + "draft_probs_nonfinite_entries_total"
NONFINITE_BATCHES = _METRIC_PREFIX + "draft_probs_nonfinite_batches_total"
SAMPLER_BATCHES = _METRIC_PREFIX + "sampler_batches_total"
FALLBACK_EMISSIONS = _METRIC_PREFIX + "sampler_fallback_emissions_total"
GUARD_REPLACEMENTS = _METRIC_PREFIX + "sampler_guard_replacements_total"
DRAFTED_TOKENS = _METRIC_PREFIX + "spec_drafted_tokens_total"
ACCEPTED_TOKENS = _METRIC_PREFIX + "spec_accepted_tokens_total"
COUNTERS = (NONFINITE_ENTRIES, NONFINITE_BATCHES, SAMPLER_BATCHES, FALLBACK_EMISSIONS, GUARD_REPLACEMENTS,
            DRAFTED_TOKENS, ACCEPTED_TOKENS)


@dataclass(frozen=True)
class CounterRate:
    """An A/B event rate that only the reference server's counters feed: events of one counter out of
    another's (or, with `exposure_counter` None, out of generated tokens).  specsuite.families.correctness.family
    registers each as a lower-is-better rate-ratio metric read from the server's counters; it names no
    emulator counter itself."""

    name: str
    label: str
    events_counter: str
    exposure_counter: str | None
    report_label: str
    unit: str
    exposure_unit: str
    report_format: str  # a metric_registry.ReportFormat
    short: str
    plot_title: str
    axis_label: str
    corruption_sign: bool = False  # "worse" here is a sign of corrupt sampling
    spread_row: bool = False  # also a row of the report's spread-between-repeats table


# In the order the comparison rows and the report's before/after table list them (first in the table).
COUNTER_RATES = (
    # Non-finite entries cluster inside batches, so this row's p-value is optimistic: a symptom counter.
    CounterRate("nonfinite_draft_probs", "non-finite draft_probs entries", NONFINITE_ENTRIES, SAMPLER_BATCHES,
                "non-finite draft_probs entries per batch", unit="per sampler batch", exposure_unit="sampler batches",
                report_format="per_batch", short="non-finite draft_probs", plot_title="Non-finite draft_probs entries",
                axis_label="entries per sampler batch"),
    CounterRate("sampler_fallbacks", "sampler fallback emissions", FALLBACK_EMISSIONS, None,
                "sampler fallback emissions / committed tokens", unit="per committed token", exposure_unit="committed tokens",
                report_format="token_rate", short="sampler fallbacks", plot_title="Sampler fallback emissions",
                axis_label="% of committed tokens", corruption_sign=True, spread_row=True),
)


def server_command(arm: str, *, port: int, host: str | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The argv that starts the reference server's ``arm`` with the bug's speculative configuration (SPECULATIVE_ARGS)."""
    address = ["--host", host] if host else []
    return [sys.executable, "-m", MODULE, *address, "--port", str(port), "--arm", arm, *SPECULATIVE_ARGS, *extra_args]


def is_reference_server(server_info: dict[str, Any]) -> bool:
    """True when /server_info comes from the reference server, however it was reached."""
    return MARKER_KEY in server_info


def model_dir() -> str:
    """The model folder the embedded reference server serves (and reports on /model_info)."""
    from specsuite.refserver.model_loading import MODEL_DIR

    return str(MODEL_DIR)


def serve(argv: Sequence[str], prog: str) -> int:
    """Run the reference server in this process (``specsuite serve-reference``)."""
    from specsuite.refserver.cli import main

    return main(list(argv), prog=prog)


def numpy_chain_sampler() -> tuple[Callable[..., Any], type]:
    """The reference server's numpy chain sampler and its guard settings type."""
    from specsuite.refserver.sampling import SamplerGuards, chain_rejection_sample

    return chain_rejection_sample, SamplerGuards
