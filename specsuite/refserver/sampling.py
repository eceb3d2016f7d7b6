"""Token distributions and samplers: temperature, top-k/top-p/min-p filtering, greedy and
chain speculative (rejection) sampling, all in numpy and vectorised over the batch.

`chain_rejection_sample` follows the semantics of SGLang's chain speculative sampling kernel
(`chain_speculative_sampling_triton` in `sglang/kernels/ops/speculative/reject_sampling.py`, called by
`sglang/srt/speculative/eagle_utils.py: eagle_sample`): accept draft i
when coin*q(x_i) < p(x_i); at the first rejection sample the replacement from the residual
(p - q)+ in two passes (normalising sum, then cumulative search); when the cumulative sum never
passes coin*norm the kernel commits its fallback id, vocab_size - 1 (also on a degenerate
residual, p == q, and for a bonus row whose CDF never passes its coin).

`SamplerGuards.enabled` switches on the fix of SGLang 0.5.22+ (range-tested q in both residual
passes, q(X) in (0, 1] in the accept test): with it off the arm is 0.5.20's kernel, with it on
0.5.23's, decision for decision (tests/kernels/test_kernel_conformance.py holds both to the real kernels).
`SamplerGuards.output_guard` is the reference server's own extra rule, not in any SGLang release:
an emitted id outside [0, tokenizer_length), or the fallback id after a residual search that found
nothing, is redrawn from p over the tokenizer's ids.  The only arithmetic difference left is float
order: numpy sums in float64, the kernel in fp32 over 4096-wide blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CANDIDATES = 256  # top-p is resolved among this many top tokens when they hold enough mass


def _keep_mask_from_sorted(sorted_probs: np.ndarray, top_p: np.ndarray, top_k: np.ndarray, row_mass: np.ndarray,
                           joint: bool = True) -> np.ndarray:
    """Mask over descending-sorted probs: rank < top_k and prefix mass before a token < top_p.

    joint (SGLang's non-speculative sampler): both cut-offs are read off the same unrenormalised
    row, as top_k_top_p_sampling_from_probs(filter_apply_order="joint") and the pytorch backend's
    top_k_top_p_min_p_sampling_from_probs_torch do (0.5.23 srt/layers/sampler.py:435-439, 820-827).
    joint=False: the nucleus of the top-k-renormalised row, top_k_renorm_prob then
    top_p_renorm_prob, which is what SGLang 0.5.23's verify does (srt/speculative/eagle_utils.py:
    725-745): a narrower nucleus whenever top-k cut any mass.  `row_mass` is each row's total,
    used when top-k keeps more ids than `sorted_probs` holds."""
    ranks = np.arange(sorted_probs.shape[1])[None, :]
    in_top_k = ranks < top_k[:, None]
    if joint:
        top_k_mass = row_mass
    else:
        top_k_mass = np.where(top_k <= sorted_probs.shape[1], np.where(in_top_k, sorted_probs, 0.0).sum(axis=1), row_mass)
    before = (np.cumsum(sorted_probs, axis=1) - sorted_probs) / top_k_mass[:, None]
    keep = in_top_k & (before < top_p[:, None])
    keep[:, 0] = True
    return keep


def renormalize_top_k_top_p(probs: np.ndarray, top_k: np.ndarray, top_p: np.ndarray, joint: bool = True) -> np.ndarray:
    """Zero everything outside each row's top-k and nucleus, then renormalise.  joint: both
    cut-offs on the row as given (SGLang's sampler); False: top-k renormalised first, then the
    nucleus of what is left (see `_keep_mask_from_sorted`).  Rows with top_p >= 1 and top_k >= V pass."""
    vocab = probs.shape[1]
    active = np.flatnonzero((top_p < 1.0) | (top_k < vocab))
    if active.size == 0:
        return probs
    out = probs.copy()
    sub = probs[active]
    width = min(_CANDIDATES, vocab)
    candidate_idx = np.argpartition(-sub, width - 1, axis=1)[:, :width] if width < vocab else np.tile(np.arange(vocab), (len(active), 1))
    candidate_p = np.take_along_axis(sub, candidate_idx, axis=1)
    order = np.argsort(-candidate_p, axis=1, kind="stable")
    candidate_idx = np.take_along_axis(candidate_idx, order, axis=1)
    candidate_p = np.take_along_axis(candidate_p, order, axis=1)
    row_mass = sub.sum(axis=1)
    keep = _keep_mask_from_sorted(candidate_p, top_p[active], top_k[active], row_mass, joint)
    # The nucleus fits among the candidates unless every candidate was kept and more remain.
    resolved = ~keep[:, -1] | (width == vocab) | (top_k[active] <= width)
    kept = np.zeros_like(sub)
    np.put_along_axis(kept, candidate_idx, np.where(keep, candidate_p, 0.0), axis=1)
    for local in np.flatnonzero(~resolved):
        row = active[local]
        full_order = np.argsort(-sub[local], kind="stable")
        full_keep = _keep_mask_from_sorted(sub[local][full_order][None, :], top_p[row : row + 1], top_k[row : row + 1],
                                           row_mass[local : local + 1], joint)[0]
        kept[local] = 0.0
        kept[local, full_order[full_keep]] = sub[local, full_order[full_keep]]
    out[active] = kept / kept.sum(axis=1, keepdims=True)
    return out


def apply_min_p(probs: np.ndarray, min_p: np.ndarray) -> np.ndarray:
    """Zero ids below min_p times their row's largest probability, then renormalise: SGLang's min-p
    after top-k/top-p (srt/layers/sampler.py:829-835; the threshold is relative to the row's
    maximum, so renormalising first changes nothing).  Rows with min_p 0 pass untouched."""
    active = np.flatnonzero(min_p > 0.0)
    if active.size == 0:
        return probs
    out = probs.copy()
    sub = probs[active]
    kept = np.where(sub >= (sub.max(axis=1) * min_p[active])[:, None], sub, 0.0)
    out[active] = kept / kept.sum(axis=1, keepdims=True)
    return out


def sample_from(probs: np.ndarray, coins: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling, one coin per row; a row whose CDF never passes the coin takes its
    last non-zero id (a well-formed distribution never gets there)."""
    cdf = np.cumsum(probs, axis=1)
    passed = cdf > (coins * cdf[:, -1])[:, None]
    ids = passed.argmax(axis=1)
    never = ~passed.any(axis=1)
    if never.any():
        ids[never] = probs.shape[1] - 1 - np.argmax(probs[never][:, ::-1] > 0, axis=1)
    return ids


@dataclass(frozen=True)
class SamplerGuards:
    """`enabled`: the kernel fix's checks on q (range tests in the residual passes and the accept
    test).  `output_guard`: the reference server's extra rule that no emitted id falls outside
    [0, tokenizer_length) and the fallback id is never committed; None means "same as enabled",
    which is what the reference server's fix arm runs."""

    enabled: bool
    tokenizer_length: int
    output_guard: bool | None = None

    @property
    def guards_output(self) -> bool:
        return self.enabled if self.output_guard is None else self.output_guard


@dataclass
class ChainResult:
    """Per-row outcome of one verify step."""

    accepted_drafts: np.ndarray  # (B,) number of draft tokens accepted
    final_ids: np.ndarray  # (B,) residual/bonus token committed after the accepted drafts
    fallback: np.ndarray  # (B,) bool: the committed id is the kernel's fallback, vocab_size - 1 (its CDF never passed the coin)
    guard_replaced: np.ndarray  # (B,) bool: the output guard replaced an out-of-range or fallback id


def chain_rejection_sample(
    target_probs: np.ndarray,
    draft_probs: np.ndarray,
    draft_ids: np.ndarray,
    accept_coins: np.ndarray,
    final_coins: np.ndarray,
    guards: SamplerGuards,
    bias_accept: float = 0.0,
    accept_inflation: float = 1.0,
) -> ChainResult:
    """Chain speculative sampling for B rows with k drafts each.

    target_probs (B, k+1, V) are the verify distributions (temperature, top-k, top-p applied),
    draft_probs (B, k, V) the q rows as the sampler reads them (possibly corrupted), draft_ids
    (B, k) the proposals, accept_coins (B, k) and final_coins (B,) uniforms in [0, 1).
    `bias_accept` > 0 is a deliberately broken accept rule, coin < p/q + bias, for testing
    that distribution tests catch a biased sampler.  `accept_inflation` c > 1 is another, coin < c * p/q: the
    draft is accepted with min(1, c * p/q), an over-accepting sampler with no corruption sign (the bias adds the
    same delta to every ratio; c scales it, so drafts the target already favours gain the most).
    """
    batch, steps, vocab = draft_probs.shape
    rows = np.arange(batch)
    p_at = np.take_along_axis(target_probs[:, :steps, :], draft_ids[:, :, None], axis=2)[:, :, 0]
    q_at = np.take_along_axis(draft_probs, draft_ids[:, :, None], axis=2)[:, :, 0]
    with np.errstate(invalid="ignore", over="ignore"):
        # The bias term only when asked for: 0 * -inf is NaN, and p + NaN would reject a draft that
        # the kernel's plain `coin * q < p` accepts (-inf < p), which is the recycled-draft_probs bug's accept-site damage itself.
        target = p_at * accept_inflation if accept_inflation != 1.0 else p_at
        accept = accept_coins * q_at < (target + bias_accept * q_at if bias_accept else target)
        if guards.enabled:
            accept &= (q_at > 0.0) & (q_at <= 1.0)
    rejected_any = ~accept.all(axis=1)
    accepted_drafts = np.where(rejected_any, np.argmin(accept, axis=1), steps)

    final_ids = np.empty(batch, dtype=np.int64)
    fallback = np.zeros(batch, dtype=bool)
    bonus_rows = rows[~rejected_any]
    if bonus_rows.size:
        bonus = target_probs[bonus_rows, steps].astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            passed = np.cumsum(bonus, axis=1) > (final_coins[bonus_rows] * bonus.sum(axis=1))[:, None]
        found = passed.any(axis=1)
        final_ids[bonus_rows] = np.where(found, passed.argmax(axis=1), vocab - 1)  # the kernel's fallback
        fallback[bonus_rows] = ~found
    residual_rows = rows[rejected_any]
    if residual_rows.size:
        position = accepted_drafts[residual_rows]
        p_row = target_probs[residual_rows, position]
        q_row = draft_probs[residual_rows, position].astype(np.float64)
        if guards.enabled:
            q_row = np.where((q_row >= 0.0) & (q_row <= 1.0), q_row, 0.0)
        else:
            q_row = np.where(q_row == q_row, q_row, 0.0)  # the kernel's NaN test; -inf passes it
        with np.errstate(invalid="ignore", over="ignore"):
            residual = np.maximum(p_row - q_row, 0.0)
            norm = residual.sum(axis=1)
            cumulative = np.cumsum(residual, axis=1)
            passed = cumulative > (final_coins[residual_rows] * norm)[:, None]
        found = passed.any(axis=1)
        # Both releases commit vocab_size - 1 here, 0.5.23 too on a degenerate residual (p == q).
        final_ids[residual_rows] = np.where(found, passed.argmax(axis=1), vocab - 1)
        fallback[residual_rows] = ~found

    guard_replaced = np.zeros(batch, dtype=bool)
    if guards.guards_output:
        # A degenerate residual (p == q on the support) has no mass left: the correct draw is then from p.
        out_of_range = (final_ids < 0) | (final_ids >= guards.tokenizer_length) | fallback
        if out_of_range.any():
            bad = rows[out_of_range]
            real = target_probs[bad, accepted_drafts[bad], : guards.tokenizer_length]
            final_ids[bad] = sample_from(real, final_coins[bad])
            guard_replaced[bad] = True
            fallback[bad] = False  # what is committed is no longer the fallback id
    return ChainResult(accepted_drafts, final_ids, fallback, guard_replaced)


def greedy_verify(target_argmax: np.ndarray, draft_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy (T=0) verify: accept drafts while they equal the target argmax; the committed final
    token is the target argmax at the first mismatch (or the bonus position)."""
    steps = draft_ids.shape[1]
    match = draft_ids == target_argmax[:, :steps]
    accepted = np.where(match.all(axis=1), steps, np.argmin(match, axis=1))
    final = target_argmax[np.arange(len(accepted)), accepted]
    return accepted, final


def lossy_greedy_argmax(target_probs: np.ndarray, gap: float) -> np.ndarray:
    """The argmax over the last axis, except where the top-2 log-gap is below `gap` nats: there the
    runner-up (a lossy verify, the test knob --lossy-greedy-gap; 0 leaves the argmax)."""
    if gap <= 0:
        return target_probs.argmax(axis=-1)
    order = np.argsort(-target_probs, axis=-1, kind="stable")[..., :2]
    best = np.take_along_axis(target_probs, order, axis=-1)
    with np.errstate(divide="ignore"):
        log_gap = np.log(best[..., 0]) - np.log(best[..., 1])
    return np.where(log_gap < gap, order[..., 1], order[..., 0])
