"""Fault arms of the reference server: real bug classes of sampling parameters under speculation.

Each arm is off by default and switched on by `--fault-NAME`.  Every one of them lives in the
speculative path only (the verify, its commit, or its finish check), so a server with speculation
off is unchanged by it and a client comparing speculation on against off sees the difference.
The correct behaviour each one breaks is described in logit_adjust.py and engine.py; the bug
classes are C8, C16 and C17 of the project's catalogue.
"""

from __future__ import annotations

RELAXED_PENALTIES = "relaxed-penalties"
MIN_NEW_TOKENS_IN_STEPS = "min-new-tokens-in-steps"
VERIFY_SKIPS_MIN_P = "verify-skips-min-p"
VERIFY_TOP_K_RENORM_BEFORE_TOP_P = "verify-top-k-renorm-before-top-p"
VERIFY_IGNORES_LOGIT_BIAS = "verify-ignores-logit-bias"
STOP_STRING_AT_BLOCK_END_ONLY = "stop-string-at-block-end-only"
LEAK_REJECTED_SLOT = "leak-rejected-slot-as-token-0"
BATCH_IGNORES_SEED = "batch-ignores-seed"

# name -> what the arm does (the --help text).
FAULT_ARMS: dict[str, str] = {
    RELAXED_PENALTIES: "frequency/presence/repetition penalties are fed only the last accepted token of each verify step and "
                       "every position of a block sees the penalty state of the block's start (SGLang's relaxed speculative "
                       "penalties, srt/speculative/eagle_utils.py:562-578 and 860-863)",
    MIN_NEW_TOKENS_IN_STEPS: "min_new_tokens counts verify steps instead of tokens and masks EOS/stop ids over the whole block, "
                             "so they stay masked about accept-length times too long",
    VERIFY_SKIPS_MIN_P: "the verify samples without min_p (the non-speculative sampler applies it)",
    VERIFY_TOP_K_RENORM_BEFORE_TOP_P: "the verify renormalises the top-k before cutting the top-p nucleus (a narrower nucleus than "
                                      "the sampler's joint top-k/top-p)",
    VERIFY_IGNORES_LOGIT_BIAS: "the verify leaves logit_bias out (the prefill's first token still has it)",
    STOP_STRING_AT_BLOCK_END_ONLY: "stop strings are searched only in the window that ends at an accepted block's last token, so a "
                                   "stop inside the block is missed",
    LEAK_REJECTED_SLOT: "a verify step with a rejected draft commits one slot too many: the unwritten slot, token 0",
    BATCH_IGNORES_SEED: "a request's sampling_seed is ignored in a verify step shared with other requests (its coins come from "
                        "the engine's stream)",
}


def fault_flag(name: str) -> str:
    return f"--fault-{name}"


def fault_dest(name: str) -> str:
    """The argparse attribute of a fault flag."""
    return "fault_" + name.replace("-", "_")
