"""Integrity suite: stop/EOS/max_new_tokens boundaries, streaming reassembly, batch isolation and
seeded determinism under speculation (bug classes C8–C13, C17, C18).

Every request also goes through the accounting checks of its server kind (`specsuite.server.kinds.sglang.integrity_rules` on SGLang: the session's client
is the kind's checking client); each test asserts that its own requests broke none of them. Expectations
come from a T=0 reference answer per prompt: greedy decoding is deterministic, so an answer with a
stop or a smaller budget must be an exact prefix of it, cut exactly where the rule says. Where a
greedy answer leaves the one it is compared with at a near-tie of the served dtype (the lossless
suite's rule, specsuite.families.integrity.near_ties), it is recorded as numerics and not failed.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from specsuite.families.integrity.comparisons import compare_answers, find_canary_leaks, make_canaries
from specsuite.families.integrity.native_answer import NativeAnswer, output_ids_of, text_of
from specsuite.families.integrity.near_ties import chosen_logprob_flip, reference_output
from specsuite.families.lossless.greedy import classify
from specsuite.pytest_plugin.integrity import REPETITIVE_PROMPTS, greedy_request
from specsuite.server.meta_info import FinishReason
from specsuite.server.protocol import GenerationRequest, Sampling

pytestmark = pytest.mark.integrity

MAX_QUOTED = 5
NEVER_GENERATED = "\u2603zq\u2603"  # a stop string no answer contains: list order must not matter
SAMPLED_TEMPERATURES = (0.7, 1.0)
SEEDED_LENGTH = 64


def _fail_on(probe, name: str, cases: int, failures: list[str], mark: int, divergences: list[str] | None = None) -> None:
    """Record the outcome, then fail with the first few problems and any integrity violations.
    Divergences (SGLang's rule, answered differently than without speculation) are recorded and
    shown as a warning, not failed; so are greedy answers that left the expected one at a near-tie."""
    numerics = probe.take_numerics()
    probe.record(name, cases, failures, divergences, numerics)
    if numerics:
        warnings.warn(f"{name}: {len(numerics)} greedy answers left the expected one at a near-tie ({probe.near_tie.describe()}), "
                      f"numerics, not checked further; first: {numerics[0]}", stacklevel=2)
    if divergences:
        warnings.warn(f"{name}: {len(divergences)} of {cases} answers follow SGLang's stop-list order inside one verify step, "
                      f"where a non-speculative run stops at the earlier string; first: {divergences[0]}", stacklevel=2)
    violations = probe.recorder.since(mark)
    message = []
    if failures:
        message.append(f"{len(failures)} of {cases} cases broke the rule:\n" + "\n".join(f"  - {f}" for f in failures[:MAX_QUOTED]))
    if violations:
        message.append(probe.recorder.summary(mark))
    assert not message, "\n".join(message)


def _prompt_id(prompt: str) -> str:
    return f"prompt{REPETITIVE_PROMPTS.index(prompt)}"


def _offsets(count: int, total: int) -> list[int]:
    """`count` token offsets in 1..total, always including the first three (block boundaries)."""
    chosen = {1, 2, 3} | {round(1 + i * (total - 1) / max(count - 1, 1)) for i in range(count)}
    return sorted(o for o in chosen if 1 <= o <= total)


def _expect_prefix(answer: dict[str, Any], reference, count: int, text: str, finish: Any) -> list[str]:
    """Problems when the answer is not the reference cut to `count` ids with exactly this text
    (no_stop_trim cuts right after the stop string: detokenizer_manager.py `trim_matched_stop`)
    and finish."""
    problems = []
    parsed = NativeAnswer.of(answer)
    ids = parsed.output_ids
    if ids != reference.ids[:count]:
        cut = next((i for i, (a, b) in enumerate(zip(ids, reference.ids, strict=False)) if a != b), min(len(ids), count))
        problems.append(f"{len(ids)} ids where {count} expected (first difference at {cut}); tail {ids[-4:]}")
    got_text = parsed.text
    if got_text != text:
        problems.append(f"text {got_text[-40:]!r} ({len(got_text)} chars), expected {text[-40:]!r} ({len(text)} chars)")
    got = parsed.finish_reason
    if got != finish:
        problems.append(f"finish_reason {got!r}, expected {finish!r}")
    return problems


def _past_reference(reference) -> int:
    """A budget a few ids past the reference, so a stop within it never ties with the length cap
    (the tie has its own cases in the max_new_tokens sweep)."""
    return len(reference.ids) + 8


def _checked_case(probe, label: str, request: GenerationRequest, expect, reference=None) -> list[str]:
    """Send non-streamed and streamed; both must meet `expect(answer)` and match each other. An answer
    that leaves the greedy `reference` at a near-tie cannot be held to it (numerics, noted)."""
    plain, finals = probe.both_ways(request)
    greedy = request.sampling.temperature == 0
    flipped = greedy and reference is not None and probe.numerics_flip(label, reference.answer, plain, "the reference answer")
    problems = [] if flipped else [f"non-stream: {p}" for p in expect(plain)]
    problems += probe.stream_problems(label, plain, finals[0], greedy)
    return [f"{label}: {p}" for p in problems]


@pytest.mark.parametrize("prompt", REPETITIVE_PROMPTS, ids=_prompt_id)
def test_stop_string_at_token_offsets(integrity_probe, prompt):
    """A stop string ending at token i: the answer is the reference up to the first token that
    completes it, the text ends right before it (or includes it with no_stop_trim), nothing after."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    reference = probe.reference(prompt)
    cases = []
    for number, offset in enumerate(_offsets(probe.specsuite.run_config.integrity.stop_offsets, len(reference.ids))):
        before, upto = reference.prefix_texts[offset - 1], reference.prefix_texts[offset]
        if len(upto) <= len(before) or not reference.text.startswith(upto):
            continue  # token adds no visible text (special, partial character): no string ends there
        stop = upto[-min(8, len(upto)):]
        if probe.stop_ends_at(reference, stop) is None:
            continue  # spelled in more ids than SGLang's stop check looks at: it would never stop there
        keep = number % 4 == 3
        cases.append((offset, stop, keep))

    def run(case: tuple[int, str, bool]) -> list[str]:
        offset, stop, keep = case
        position = reference.text.find(stop)
        count = probe.stop_ends_at(reference, stop)
        text = reference.text[: position + (len(stop) if keep else 0)]
        request = greedy_request(prompt, _past_reference(reference), stop=(stop,), no_stop_trim=keep)
        finish = {"type": "stop", "matched": stop}
        return _checked_case(probe, f"stop {stop!r} ending at token {offset} (no_stop_trim={keep})", request,
                             lambda answer: _expect_prefix(answer, reference, count, text, finish), reference)

    failures = [p for problems in probe.map(run, cases) for p in problems]
    _fail_on(probe, f"stop_string_offsets[{_prompt_id(prompt)}]", len(cases), failures, mark)


def _stop_outcome(probe, reference, stop: str) -> tuple[int | None, str, dict[str, Any]]:
    """(ids, text, finish) of the answer that stops on `stop`: the fewest ids whose text holds it
    (None: SGLang's stop check would not see it), the text cut at its first occurrence."""
    return probe.stop_ends_at(reference, stop), reference.text[: reference.text.find(stop)], {"type": "stop", "matched": stop}


def _earliest_stop_winner(reference, stop_list: list[str], outcomes: dict[str, Any]) -> dict[str, Any]:
    """The rule of a kind whose earliest stop string wins (vLLM's: v1/engine/detokenizer.py:321-370,
    check_stop_strings): the stop string that completes earliest in the text wins, ties by list order,
    whether or not one step held both."""
    ends = {stop: reference.text.find(stop) + len(stop) for stop in stop_list if stop in outcomes}
    winner = min(ends, key=lambda stop: (ends[stop], stop_list.index(stop)))
    return {"earliest in the text": outcomes[winner]}


@pytest.mark.parametrize("prompt", REPETITIVE_PROMPTS, ids=_prompt_id)
def test_multi_stop_lists_follow_sglang_order(integrity_probe, prompt):
    """Several stop strings, the later one listed first. SGLang checks them in list order over each
    step's new ids (schedule_batch.py `_check_str_based_finish`): the earlier string wins when it
    completes in an earlier step; when both complete in one step the one listed first wins, though
    it sits later in the text. Without speculation that happens only when one token completes
    both; with it, any two within one verify step: a real spec/non-spec divergence, recorded under
    workloads.integrity.divergences (and warned), not failed."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    reference = probe.reference(prompt)
    offsets = _offsets(probe.specsuite.run_config.integrity.stop_offsets, len(reference.ids))
    stops = []
    for offset in offsets:
        upto = reference.prefix_texts[offset]
        if len(upto) > len(reference.prefix_texts[offset - 1]) and reference.text.startswith(upto):
            stops.append(upto[-min(6, len(upto)):])
    pairs = [(stops[i], stops[-1 - i]) for i in range(len(stops) // 2) if stops[i] != stops[-1 - i]]
    step = max(probe.num_draft_tokens, 1)
    cases = []
    for early, late in pairs:
        early_outcome, late_outcome = _stop_outcome(probe, reference, early), _stop_outcome(probe, reference, late)
        if early_outcome[0] is None or late_outcome[0] is None:
            continue
        if late_outcome[0] < early_outcome[0]:
            early, late, early_outcome, late_outcome = late, early, late_outcome, early_outcome
        gap = late_outcome[0] - early_outcome[0]
        if probe.kind.earliest_stop_string_wins:
            expected = _earliest_stop_winner(reference, [late, NEVER_GENERATED, early], {late: late_outcome, early: early_outcome})
        elif gap == 0:
            expected = {"listed first": late_outcome}  # one token completes both: list order, spec or not
        elif gap < step:
            expected = {"earliest": early_outcome, "listed first": late_outcome}  # one verify step may hold both
        else:
            expected = {"earliest": early_outcome}
        cases.append(([late, NEVER_GENERATED, early], expected, gap))

    divergences: list[str] = []

    def run(case) -> list[str]:
        stop_list, expected, gap = case
        request = greedy_request(prompt, _past_reference(reference), stop=tuple(stop_list))

        def expect(answer: dict[str, Any]) -> list[str]:
            got = NativeAnswer.of(answer).finish_reason
            rule, (count, text, finish) = next(((r, e) for r, e in expected.items() if e[2] == got), next(iter(expected.items())))
            # expected: rule -> (ids, text, SGLang's finish object) this test derived from the reference
            if rule == "listed first" and "earliest" in expected:
                earliest_count, _, earliest_finish = expected["earliest"]
                divergences.append(f"stops {stop_list!r}: stopped on {FinishReason.parse(finish).matched!r} (listed first, {gap} ids later) "
                                   f"after {count} ids; without speculation: {FinishReason.parse(earliest_finish).matched!r} after "
                                   f"{earliest_count} ids")
            return _expect_prefix(answer, reference, count, text, finish)

        return _checked_case(probe, f"stops {stop_list!r}", request, expect, reference)

    failures = [p for problems in probe.map(run, cases) for p in problems]
    _fail_on(probe, f"multi_stop[{_prompt_id(prompt)}]", len(cases), failures, mark, divergences)


def _stop_id_offsets(probe, reference) -> list[tuple[int, int]]:
    """(count, id): ids of the reference that first occur at position count-1 and are no EOS/special."""
    skipped = probe.client.context.eos_ids | probe.client.context.skipped_ids
    wanted = set(_offsets(probe.specsuite.run_config.integrity.stop_offsets, len(reference.ids)))
    found = []
    for position, token in enumerate(reference.ids):
        if position + 1 in wanted and token not in skipped and reference.ids.index(token) == position:
            found.append((position + 1, token))
    return found


@pytest.mark.parametrize("prompt", REPETITIVE_PROMPTS, ids=_prompt_id)
def test_stop_token_ids(integrity_probe, prompt):
    """stop_token_ids=[t]: the answer ends with the first t, its text leaves t out; with ignore_eos,
    t does not stop generation on SGLang (ignore_eos also disables stop_token_ids) and still does on
    vLLM (ignore_eos drops only the EOS check: vllm/v1/core/sched/utils.py:104-112)."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    reference = probe.reference(prompt)
    cases = _stop_id_offsets(probe, reference)

    def run(case: tuple[int, int]) -> list[str]:
        count, token = case
        problems = _checked_case(
            probe, f"stop_token_ids [{token}] first at token {count}", greedy_request(prompt, _past_reference(reference), stop_token_ids=(token,)),
            lambda answer: _expect_prefix(answer, reference, count, reference.prefix_texts[count - 1], {"type": "stop", "matched": token}),
            reference)
        budget = min(count + 3, len(reference.ids) - 1)
        if budget > count:
            request = greedy_request(prompt, budget, stop_token_ids=(token,), ignore_eos=True)
            if probe.kind.ignore_eos_keeps_stop_token_ids:
                expect_ignored = (count, reference.prefix_texts[count - 1], {"type": "stop", "matched": token})
            else:
                expect_ignored = (budget, reference.prefix_texts[budget], {"type": "length", "length": budget})
            problems += _checked_case(probe, f"ignore_eos with stop_token_ids [{token}]", request,
                                      lambda answer: _expect_prefix(answer, reference, *expect_ignored), reference)
        return problems

    failures = [p for problems in probe.map(run, cases) for p in problems]
    _fail_on(probe, f"stop_token_ids[{_prompt_id(prompt)}]", len(cases), failures, mark)


@pytest.mark.parametrize("prompt", REPETITIVE_PROMPTS[:2], ids=_prompt_id)
def test_max_new_tokens_sweep(integrity_probe, prompt):
    """max_new_tokens over 1..2k+3: exactly min(budget, natural length) ids, never more, a length
    finish that names the budget; plus a stop id or stop string placed at the budget, one before
    and one after. At the budget itself the stop wins: SGLang tries stop strings, then stop ids,
    then the budget (schedule_batch.py `update_finish_state`)."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    reference = probe.reference(prompt)
    natural = len(reference.ids)
    ref_answer = NativeAnswer.of(reference.answer)
    ref_finish = ref_answer.finish_reason
    cases: list[tuple[str, GenerationRequest, int, list[tuple[Any, str]]]] = []
    for budget in probe.max_new_tokens_sweep:
        if budget < natural or ref_answer.finish_type == "length":
            count, finish = min(budget, natural), {"type": "length", "length": budget}
        else:
            count, finish = natural, ref_finish
        shown = reference.text if count == natural else reference.prefix_texts[count]
        cases.append((f"max_new_tokens {budget}", greedy_request(prompt, budget), count, [(finish, shown)]))
    k = probe.num_draft_tokens
    for count, token in [(c, t) for c, t in _stop_id_offsets(probe, reference) if 2 <= c <= 2 * k + 3][:3]:
        stop = {"type": "stop", "matched": token}
        for budget in (count - 1, count, count + 1):
            if budget >= natural:
                continue
            if budget < count:
                expected = [({"type": "length", "length": budget}, reference.prefix_texts[budget])]
            elif budget > count:
                expected = [(stop, reference.prefix_texts[count - 1])]
            else:  # the stop id is also the last budgeted token: SGLang checks stop ids before the budget
                expected = [(stop, reference.prefix_texts[count - 1])]
            cases.append((f"stop id {token} at token {count}, max_new_tokens {budget}",
                           greedy_request(prompt, budget, stop_token_ids=(token,)), min(budget, count), expected))

    for count in (c for c in _offsets(probe.specsuite.run_config.integrity.stop_offsets, natural) if 2 <= c <= 2 * k + 3):
        upto = reference.prefix_texts[count]
        if len(upto) <= len(reference.prefix_texts[count - 1]) or not reference.text.startswith(upto):
            continue
        stop_text = upto[-min(8, len(upto)):]
        if probe.stop_ends_at(reference, stop_text) != count:
            continue  # it occurs earlier, or SGLang's stop check would not see it: not a stop that ends at this token
        stop = {"type": "stop", "matched": stop_text}
        trimmed = reference.text[: reference.text.find(stop_text)]
        for budget in (count - 1, count, count + 1):
            if budget < count:
                expected = [({"type": "length", "length": budget}, reference.prefix_texts[budget])]
            elif budget > count:
                expected = [(stop, trimmed)]
            else:  # the stop string is completed by the last budgeted token: stop strings come first
                expected = [(stop, trimmed)]
            cases.append((f"stop {stop_text!r} ending at token {count}, max_new_tokens {budget}",
                          greedy_request(prompt, budget, stop=(stop_text,)), min(budget, count), expected))

    def run(case) -> list[str]:
        label, request, count, expected = case

        def expect(answer: dict[str, Any]) -> list[str]:
            finish, shown = next((e for e in expected if e[0] == NativeAnswer.of(answer).finish_reason), expected[0])
            return _expect_prefix(answer, reference, count, shown, finish)

        return _checked_case(probe, label, request, expect, reference)

    failures = [p for problems in probe.map(run, cases) for p in problems]
    _fail_on(probe, f"max_new_tokens_sweep[{_prompt_id(prompt)}]", len(cases), failures, mark)


def _sampled_request(prompt: str, temperature: float, seed: int | None, max_new_tokens: int = SEEDED_LENGTH) -> GenerationRequest:
    sampling = Sampling(temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens, ignore_eos=True, seed=seed)
    return GenerationRequest(prompt=prompt, sampling=sampling, logprobs=True)


def _reassembly_failures(probe, requests: list[GenerationRequest]) -> list[str]:
    """Each request sent both ways, alone and as one batch stream; every stream must reassemble
    byte for byte into the non-streamed answer."""
    failures = []
    for number, request in enumerate(requests):
        plain, finals = probe.both_ways(request)
        label = f"request {number}"
        failures += [f"{label}: {p}" for p in probe.stream_problems(label, plain, finals[0], request.sampling.temperature == 0)]
    plain, finals = probe.both_ways(requests)
    for number, (answer, streamed, request) in enumerate(zip(plain, finals, requests, strict=False)):
        label = f"batch stream, index {number}"
        failures += [f"{label}: {p}" for p in probe.stream_problems(label, answer, streamed, request.sampling.temperature == 0)]
    return failures


def test_stream_reassembles_at_greedy(integrity_probe, specsuite):
    """T=0: the cumulative stream reassembles into the non-streamed answer; text never shrinks or is
    rewritten and exactly one chunk finishes (checked on every stream by the checking client)."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    prompts = list(REPETITIVE_PROMPTS) + [p.prompt for p in specsuite.prompts[:3]]
    requests = [greedy_request(prompt, 96) for prompt in prompts]
    _fail_on(probe, "stream_reassembly_greedy", len(requests) * 2, _reassembly_failures(probe, requests), mark)


def _require_batch_invariance(probe) -> None:
    """A seeded answer compared across batches holds only where the server promises batch invariance (or the run
    assumes it): otherwise a correct server's answer may change with its batch, so the comparison is skipped."""
    holds, reason = probe.batch_invariance()
    if not holds:
        pytest.skip(reason)


@pytest.mark.parametrize("temperature", SAMPLED_TEMPERATURES, ids=lambda t: f"t={t:g}")
def test_stream_reassembles_with_seeded_sampling(integrity_probe, specsuite, temperature):
    """Seeded T>0: the same request streamed and not streamed gives the same bytes."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    _require_batch_invariance(probe)
    prompts = list(REPETITIVE_PROMPTS) + [p.prompt for p in specsuite.prompts[:3]]
    seed = specsuite.run_config.seed
    requests = [_sampled_request(prompt, temperature, seed * 1000 + i) for i, prompt in enumerate(prompts)]
    _fail_on(probe, f"stream_reassembly_seeded[t={temperature:g}]", len(requests) * 2, _reassembly_failures(probe, requests), mark)


def _canary_batch(probe, specsuite) -> tuple[list[str], list[GenerationRequest]]:
    """A mixed batch: one canary per prompt, greedy and sampled, short and long, some with stops."""
    size = specsuite.run_config.integrity.batch_size
    canaries = make_canaries(size, seed=specsuite.run_config.seed)
    bases = list(REPETITIVE_PROMPTS) + [p.prompt for p in specsuite.prompts]
    prompts = [f"Remember the code {canary} and repeat it at the end. {bases[i % len(bases)]}" for i, canary in enumerate(canaries)]
    requests = []
    for i, prompt in enumerate(prompts):
        temperature = (0.0, 0.7, 1.0)[i % 3]
        sampling = Sampling(temperature=temperature, max_new_tokens=(16, 48, 96, 7)[i % 4], stop=("\n\n",) if i % 5 == 0 else None,
                            seed=specsuite.run_config.seed * 1000 + i if temperature > 0 else None)
        requests.append(GenerationRequest(prompt=prompt, sampling=sampling, logprobs=True))
    return canaries, requests


def test_batch_isolation_with_canaries(integrity_probe, specsuite):
    """A unique canary per prompt in a mixed batch (one native batch request, then the same
    requests concurrently): no request's output holds another request's canary."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    canaries, requests = _canary_batch(probe, specsuite)
    batched = probe.generate_batch(requests)
    singles = probe.map(probe.generate, requests)
    failures = [f"native batch: {leak.describe()}" for leak in find_canary_leaks(canaries, [text_of(a) for a in batched])]
    failures += [f"concurrent requests: {leak.describe()}" for leak in find_canary_leaks(canaries, [text_of(a) for a in singles])]
    _fail_on(probe, "batch_isolation", 2 * len(canaries), failures, mark)


def test_seeded_request_same_alone_and_in_batch(integrity_probe, specsuite):
    """A seeded T=1 request gives the same answer alone, again alone, inside a mixed native batch,
    and while other requests run concurrently."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    _require_batch_invariance(probe)
    seed = specsuite.run_config.seed
    target = _sampled_request(REPETITIVE_PROMPTS[0], 1.0, seed * 1000 + 77)
    noise = [_sampled_request(p.prompt, (0.0, 0.7, 1.0)[i % 3], seed * 1000 + i, max_new_tokens=(16, 48, 96)[i % 3])
             for i, p in enumerate(specsuite.prompts[:15])]
    alone = probe.generate(target)
    again = probe.generate(target)
    members = noise[:5] + [target] + noise[5:]
    in_batch = probe.generate_batch(members)[5]
    concurrent = probe.map(probe.generate, members)[5]
    failures = []
    for label, answer in (("repeated alone", again), ("in a native batch", in_batch), ("among concurrent requests", concurrent)):
        failures += [f"{label}: {d}" for d in compare_answers(alone, answer)]
    _fail_on(probe, "seeded_alone_vs_batch", 3, failures, mark)


def test_different_seeds_give_different_outputs(integrity_probe, specsuite):
    """Four seeds, same prompt, T=1: four different answers (a server that drops or mixes up seeds
    gives repeats)."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    seeds = [specsuite.run_config.seed * 1000 + s for s in (11, 12, 13, 14)]
    answers = probe.map(lambda s: output_ids_of(probe.generate(_sampled_request(REPETITIVE_PROMPTS[0], 1.0, s))), seeds)
    failures = [f"seeds {seeds[i]} and {seeds[j]} gave the same {len(answers[i])} ids"
                for i in range(len(seeds)) for j in range(i + 1, len(seeds)) if answers[i] == answers[j]]
    _fail_on(probe, "different_seeds_differ", len(seeds) * (len(seeds) - 1) // 2, failures, mark)  # the cases are the pairs


MIXED_NEIGHBOURS = 6
MIXED_GREEDY_COPIES = 3


def test_greedy_answers_stay_valid_among_sampled_neighbours(integrity_probe, specsuite):
    """T=0 requests sent while seeded T=1, top_p=0.95 requests run beside them (one verify batch)
    must answer as they do alone. Per-row sampling parameters that leak across the batch turn
    greedy rows into the recycled-draft_probs bug's text (vLLM 0.32 on CPU: docs/findings/vllm-spec-padded-ids.md).
    A divergence counts only where the alone answer's top is no near-tie of the served dtype (the
    lossless suite's rule, specsuite.families.lossless.greedy): batch-variant numerics may flip a
    near-tie on a correct GPU server. Ids outside the tokenizer fail at any position."""
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    vocab = specsuite.server.vocab
    greedy = [greedy_request(prompt, 48) for prompt in REPETITIVE_PROMPTS] * MIXED_GREEDY_COPIES
    alone = [probe.generate(request) for request in greedy[:len(REPETITIVE_PROMPTS)]] * MIXED_GREEDY_COPIES
    references = [reference_output(a) for a in alone]
    neighbours = [GenerationRequest(prompt=p.prompt, sampling=Sampling(temperature=1.0, top_p=0.95, max_new_tokens=96,
                                                                       seed=specsuite.run_config.seed * 1000 + i), logprobs=True)
                  for i, p in enumerate(specsuite.prompts[:MIXED_NEIGHBOURS])]
    half = MIXED_NEIGHBOURS // 2
    mixed = probe.map(probe.generate, neighbours[:half] + greedy + neighbours[half:])[half:half + len(greedy)]
    outputs = [output_ids_of(answer) for answer in mixed]
    # The first divergence from the alone answer, judged by the alone answer's own top logprobs there (a prefix
    # comparison: after it, the two answers continue different texts).
    divergences = [d for index, (output, reference) in enumerate(zip(outputs, references, strict=True))
                   if (d := classify(index, output, reference, probe.near_tie)) is not None]
    failures = [f"greedy request {d.prompt_index}: position {d.position}: {d.test_token} where alone {d.reference_token} ({d.reason}); "
                f"among neighbours {outputs[d.prompt_index][max(0, d.position - 4):d.position + 4]}"
                for d in divergences if d.kind == "real"]
    probe.numerics.extend(f"greedy request {d.prompt_index}: {d.reason}" for d in divergences if d.kind == "numerics")
    for number, ids in enumerate(outputs):
        bad = [(i, t) for i, t in enumerate(ids) if not 0 <= t < vocab.tokenizer_length]
        if bad:
            failures.append(f"greedy request {number}: {len(bad)} ids outside the tokenizer ({vocab.tokenizer_length}), first {bad[0][1]} at {bad[0][0]}")
    _fail_on(probe, "greedy_among_sampled", len(greedy), failures, mark)


def test_every_answer_in_the_session_passed_integrity(integrity_recorder):
    """The session audit (run last): every /generate answer any suite received in this session
    passed the accounting checks."""
    assert integrity_recorder.total == 0, integrity_recorder.summary()


OPENAI_BUDGET = 32


@pytest.mark.parametrize("prompt", REPETITIVE_PROMPTS[:2], ids=_prompt_id)
def test_openai_completions_keep_the_accounting(integrity_probe, integrity_openai, prompt):
    """/v1/completions, streamed and not, greedy and sampled with n=2: every answer passes the
    OpenAI integrity rules, and the greedy stream adds up to the greedy non-stream answer (unless
    they part where both chosen ids score within the near-tie tolerance: numerics)."""
    kind = integrity_probe.kind
    if kind.answers_over_completions:
        pytest.skip(f"on {kind.display_name} every suite's answers come over /v1/completions and pass {kind.display_name}'s own rules "
                    f"({kind.integrity_rules_path}); these are SGLang's OpenAI rules")
    probe, mark = integrity_probe, integrity_probe.recorder.checkpoint()
    failures = []
    greedy = {"max_tokens": OPENAI_BUDGET, "temperature": 0}
    plain, streamed = integrity_openai.complete(prompt, greedy), integrity_openai.complete_stream(prompt, greedy)
    if [g.output_ids for g in plain] != [g.output_ids for g in streamed] or [g.text for g in plain] != [g.text for g in streamed]:
        a, b = plain[0], streamed[0]
        flip = chosen_logprob_flip(a.output_ids or [], a.output_logprobs, b.output_ids or [], b.output_logprobs, probe.near_tie)
        if flip is not None and len(plain) == len(streamed) == 1:  # parted at a near-tie: numerics
            probe.numerics.append(f"greedy completion, stream vs non-stream: {flip}")
        else:
            failures.append("greedy stream and non-stream completions differ")
    sampled = {"max_tokens": OPENAI_BUDGET, "temperature": 1.0, "top_p": 0.95, "n": 2, "seed": 11}
    integrity_openai.complete(prompt, sampled)
    integrity_openai.complete_stream(prompt, sampled)
    _fail_on(probe, f"openai_completions[{_prompt_id(prompt)}]", 4, failures, mark)
