"""OpenAI-shaped answers go through the integrity checks: `/v1/completions` and
`/v1/chat/completions`, streamed or not, from the reference server through
`checking_openai_client`.

Correct answers must raise nothing (a false alarm is the worst defect); then each rule is shown to
fire by breaking one field of a real answer.
"""

from __future__ import annotations

import copy

import pytest

from specsuite.families.integrity.openai_rules import CHAT, COMPLETIONS, check_openai, check_openai_stream
from specsuite.families.integrity.recorder import CheckingOpenAIClient, IntegrityRecorder
from specsuite.families.integrity.wiring import checking_openai_client
from specsuite.server.launcher import launch_reference_server
from specsuite.server.session import ServerOptions, open_server

PROMPT = "Count from one to forty in words: one, two, three, four, five, six,"
MESSAGES = [{"role": "user", "content": "What is the weather in Fairford?"}]


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """(client, recorder) for the reference server's OpenAI routes."""
    log_dir = tmp_path_factory.mktemp("integrity-openai")
    with launch_reference_server("fix", log_dir, ready_timeout_s=60) as launched:
        server = open_server(ServerOptions(server_url=launched.base_url), log_dir)
        recorder = IntegrityRecorder()
        yield checking_openai_client(server, recorder), recorder
        server.close()


class Capture(CheckingOpenAIClient):
    """Also keeps the last raw answer, to break it in the fault tests."""

    last: tuple[str, dict, object] | None = None

    def answered(self, api, body, result):
        self.last = (api, body, copy.deepcopy(result))
        super().answered(api, body, result)

    def streamed(self, api, body, chunks):
        self.last = (api, body, copy.deepcopy(chunks))
        super().streamed(api, body, chunks)


@pytest.fixture(scope="module")
def capture(checked):
    client, recorder = checked
    return Capture(client._http, client.model, recorder, client.context)


COMPLETION_CASES = {
    "greedy": {"max_tokens": 24, "temperature": 0},
    "sampled-n3": {"max_tokens": 20, "temperature": 1.0, "top_p": 0.95, "n": 3, "seed": 7},
    "stop-string": {"max_tokens": 40, "temperature": 0, "stop": [" ten"]},
    "top-logprobs": {"max_tokens": 12, "temperature": 0, "logprobs": 3},
    "default-budget": {"temperature": 0},
    "long": {"max_tokens": 64, "temperature": 0.7, "seed": 3},
}


@pytest.mark.parametrize("case", COMPLETION_CASES)
def test_correct_completions_raise_nothing_streamed_or_not(checked, case):
    client, recorder = checked
    mark = recorder.checkpoint()
    before = recorder.answers_checked
    plain = client.complete(PROMPT, COMPLETION_CASES[case])
    streamed = client.complete_stream(PROMPT, COMPLETION_CASES[case])
    assert recorder.answers_checked - before == 2 * len(plain)
    assert recorder.since(mark) == [], recorder.summary(mark)
    if COMPLETION_CASES[case].get("temperature") == 0:
        assert [g.output_ids for g in streamed] == [g.output_ids for g in plain]


@pytest.mark.parametrize("params", [{"max_tokens": 24, "temperature": 0}, {"max_tokens": 16, "temperature": 1.0, "n": 2, "seed": 5}],
                         ids=["greedy", "sampled-n2"])
def test_correct_chat_answers_raise_nothing_streamed_or_not(checked, params):
    client, recorder = checked
    mark = recorder.checkpoint()
    plain = client.chat(MESSAGES, params)
    assert all(g.output_ids for g in plain)  # non-stream chat carries response_token_ids
    client.chat_stream(MESSAGES, params)
    assert recorder.since(mark) == [], recorder.summary(mark)


def _fired(api: str, body: dict, answer, context, stream: bool = False) -> set[str]:
    check = check_openai_stream if stream else check_openai
    return {violation.check for violation in check(api, body, answer, context)}


def test_each_completions_rule_fires_on_a_broken_answer(capture):
    capture.complete(PROMPT, {"max_tokens": 24, "temperature": 0, "stop_token_ids": None})
    api, body, answer = capture.last
    context = capture.context
    assert _fired(api, body, answer, context) == set()

    def broken(change) -> set[str]:
        bad = copy.deepcopy(answer)
        change(bad, bad["choices"][0])
        return _fired(api, body, bad, context)

    assert "completion_tokens" in broken(lambda a, c: a["usage"].update(completion_tokens=a["usage"]["completion_tokens"] + 1))
    assert "logprob_alignment" in broken(lambda a, c: c["logprobs"]["token_logprobs"].pop())
    assert "logprob_alignment" in broken(lambda a, c: c["logprobs"].update(top_logprobs=[None] * len(c["logprobs"]["tokens"])))
    assert "finish_reason" in broken(lambda a, c: c.update(finish_reason="stopped"))
    eos = next(iter(context.eos_ids))
    assert "stop_token" in broken(lambda a, c: c["token_ids"].insert(3, eos))
    assert "max_new_tokens" in broken(lambda a, c: c["token_ids"].append(c["token_ids"][-1]))
    assert "response_shape" in broken(lambda a, c: a["choices"].append(copy.deepcopy(c)))
    assert "stop_string" in _fired(api, {**body, "stop": [answer["choices"][0]["text"][5:9]]}, answer, context)
    assert "retokenize" in broken(lambda a, c: c.update(text=c["text"] + " and a great deal of text that no id produced" * 3))


def test_each_stream_rule_fires_on_a_broken_stream(capture):
    capture.complete_stream(PROMPT, {"max_tokens": 24, "temperature": 0, "n": 2})
    api, body, chunks = capture.last
    context = capture.context
    assert _fired(api, body, chunks, context, stream=True) == set()
    finishing = next(i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["finish_reason"])

    twice = copy.deepcopy(chunks)
    twice.insert(finishing, copy.deepcopy(chunks[finishing]))
    assert "stream_finish" in _fired(api, body, twice, context, stream=True)
    early = copy.deepcopy(chunks)
    index = early[finishing]["choices"][0]["index"]
    early.insert(finishing + 1, {**copy.deepcopy(chunks[finishing]), "choices": [{"index": index, "text": "", "logprobs": None,
                                                                                  "finish_reason": None, "matched_stop": None, "token_ids": []}]})
    assert "stream_finish" in _fired(api, body, early, context, stream=True)
    missing = [c for c in chunks if not c["choices"] or c["choices"][0]["index"] != 1]
    assert "stream_index" in _fired(api, body, missing, context, stream=True)
    short = copy.deepcopy(chunks)  # one position's logprob missing from a chunk
    carrier = next(c for c in short if c["choices"] and c["choices"][0].get("logprobs"))["choices"][0]["logprobs"]
    for key in ("tokens", "token_logprobs", "text_offset"):
        carrier[key].pop()
    assert "logprob_alignment" in _fired(api, body, short, context, stream=True)
    dropped = copy.deepcopy(chunks)
    first_with_ids = next(c for c in dropped if c["choices"] and c["choices"][0].get("token_ids"))
    first_with_ids["choices"][0]["token_ids"] = first_with_ids["choices"][0]["token_ids"][1:]
    assert "completion_tokens" in _fired(api, body, dropped, context, stream=True)


def test_chat_rules_fire_on_a_broken_answer(capture):
    capture.chat(MESSAGES, {"max_tokens": 16, "temperature": 0})
    api, body, answer = capture.last
    assert api == CHAT and _fired(api, body, answer, capture.context) == set()
    bad = copy.deepcopy(answer)
    bad["choices"][0]["logprobs"]["content"].pop()
    assert "logprob_alignment" in _fired(api, body, bad, capture.context)
    without_ids = copy.deepcopy(answer)
    del without_ids["choices"][0]["response_token_ids"]
    without_ids["usage"]["completion_tokens"] += 1
    assert "logprob_alignment" in _fired(api, body, without_ids, capture.context)
    assert COMPLETIONS != CHAT


def test_a_chat_stream_may_drop_the_logprobs_of_a_textless_step_but_never_adds_any(capture):
    """SGLang's chat stream attaches a step's logprobs to its content chunk and sends no chunk for
    a step without text, such as the EOS step (srt/entrypoints/openai/serving_chat.py:1031-1057):
    fewer entries than completion_tokens is correct there, more is not."""
    capture.chat_stream(MESSAGES, {"max_tokens": 200, "temperature": 0})
    api, body, chunks = capture.last
    usage = next(c["usage"] for c in chunks if c.get("usage"))
    entries = sum(len((choice.get("logprobs") or {}).get("content") or []) for c in chunks for choice in c["choices"])
    assert 0 < entries <= usage["completion_tokens"]
    assert _fired(api, body, chunks, capture.context, stream=True) == set()
    duplicated = copy.deepcopy(chunks)  # every carrier once more: the joined count goes over
    for chunk in duplicated:
        for choice in chunk["choices"]:
            if choice.get("logprobs"):
                choice["logprobs"]["content"] *= 2
    assert "logprob_alignment" in _fired(api, body, duplicated, capture.context, stream=True)
    lossy = copy.deepcopy(chunks)  # as if the last step had been an EOS alone, without text
    [choice for c in lossy for choice in c["choices"] if choice.get("logprobs")][-1]["logprobs"]["content"].pop()
    assert _fired(api, body, lossy, capture.context, stream=True) == set()
    padded = copy.deepcopy(chunks)
    carrier = next(choice for c in padded for choice in c["choices"] if choice.get("logprobs"))
    carrier["logprobs"]["content"] += carrier["logprobs"]["content"] * (usage["completion_tokens"] + 1)
    assert "logprob_alignment" in _fired(api, body, padded, capture.context, stream=True)


def test_a_violation_names_the_prompt_hash_its_generation_records(capture):
    """A quoted violation can be matched to the recorded Generation: same prompt hash."""
    for call, prompt in ((capture.complete, PROMPT), (capture.chat, MESSAGES)):
        [generation] = call(prompt, {"max_tokens": 8, "temperature": 0})
        api, body, answer = capture.last
        broken = copy.deepcopy(answer)
        broken["choices"][0]["finish_reason"] = "stopped"
        [violation] = check_openai(api, body, broken, capture.context)
        assert violation.prompt_hash == generation.prompt_hash and violation.rid == answer["id"]
