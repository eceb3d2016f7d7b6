"""Everything the harness knows about specsuite's reference server, in one place.

The reference server (``fixtures/refserver``) is a CPU emulation of an SGLang EAGLE server with
the founding bug's fix and no-fix arms. The harness launches it, recognises it in /server_info,
reads its ground-truth counters and loads its numpy sampler for the kernel suite; all of that goes
through this module, which is the only one in ``harness/`` that imports ``fixtures``. The imports
of the fixture are lazy, so an install without ``fixtures/`` still imports the harness.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

MODULE = "fixtures.refserver"
ARMS = ("nofix", "fix")  # the seed's before/after, in run order (the last one is the A/B baseline)

# The seed PR's speculative configuration: EAGLE chain drafts of 5 steps, rejection sampling.
SPECULATIVE_ARGS = (
    "--enable-metrics",
    "--speculative-algorithm", "EAGLE",
    "--speculative-num-steps", "5",
    "--speculative-eagle-topk", "1",
    "--speculative-num-draft-tokens", "6",
    "--speculative-use-rejection-sampling",
    "--random-seed", "0",
)  # fmt: skip

# /server_info keys only the reference server reports (fixtures/refserver/cli.py: server_args_dict).
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


def server_command(arm: str, *, port: int, host: str | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The argv that starts the reference server's ``arm`` with the seed's speculative configuration."""
    address = ["--host", host] if host else []
    return [sys.executable, "-m", MODULE, *address, "--port", str(port), "--arm", arm, *SPECULATIVE_ARGS, *extra_args]


def is_reference_server(server_info: dict[str, Any]) -> bool:
    """True when /server_info comes from the reference server, however it was reached."""
    return MARKER_KEY in server_info


def model_dir() -> str:
    """The model folder the embedded reference server serves (and reports on /model_info)."""
    from fixtures.refserver.model_loading import MODEL_DIR

    return str(MODEL_DIR)


def serve(argv: Sequence[str], prog: str) -> int:
    """Run the reference server in this process (``specsuite serve-reference``)."""
    from fixtures.refserver.cli import main

    return main(list(argv), prog=prog)


def numpy_chain_sampler() -> tuple[Callable[..., Any], type]:
    """The reference server's numpy chain sampler and its guard settings type."""
    from fixtures.refserver.sampling import SamplerGuards, chain_rejection_sample

    return chain_rejection_sample, SamplerGuards
