"""Seeded answers are compared across batches (alone, streamed, in a native batch, among concurrent requests) only
where the server promises batch-invariant numerics: SGLang's --enable-deterministic-inference (its /server_info
key), vLLM's VLLM_BATCH_INVARIANT (its development /server_info, read as `batch_invariant`), or
--assume-deterministic. A server that seeds each request but makes no such promise (vLLM by default, a stub kind) is
skipped with its reason in one line: on a GPU its correct answers move with the batch."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from specsuite.pytest_plugin.integrity import IntegrityProbe
from specsuite.server import kinds
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.server.kinds.vllm.client import VLLMClient
from tests.helpers.stub_server_kind.client import StubbyClient
from tests.helpers.stub_server_kind.kind import STUBBY


def probe(client: Any, server_args: dict[str, Any], assume: bool = False) -> IntegrityProbe:
    identity = SimpleNamespace(server_args=server_args, deterministic_inference=bool(server_args.get("enable_deterministic_inference")))
    specsuite = SimpleNamespace(server=SimpleNamespace(identity=identity),
                                run_config=SimpleNamespace(integrity=SimpleNamespace(assume_deterministic=assume)))
    return IntegrityProbe(specsuite, client=client, recorder=None)  # type: ignore[arg-type]


class SGLangModel(SGLangClient):
    """An SGLang client whose /model_info names a real model (not the reference server's)."""

    def model_info(self) -> dict[str, Any]:
        return {"model_path": "/models/llama", "model_type": "llama"}


def vllm() -> VLLMClient:
    return VLLMClient("http://h:1", model="m")


@pytest.mark.parametrize(("client", "server_args", "reason"), [
    (SGLangModel("http://h:1"), {"enable_deterministic_inference": True}, "SGLang reports batch-invariant numerics"),
    (vllm(), {"batch_invariant": True}, "vLLM reports batch-invariant numerics"),
    (vllm(), {}, "--assume-deterministic"),
], ids=["sglang-deterministic", "vllm-batch-invariant", "assumed"])
def test_a_promise_of_batch_invariance_keeps_the_byte_comparison(client, server_args, reason):
    assume = reason == "--assume-deterministic"
    assert probe(client, server_args, assume).batch_invariance() == (True, reason)


@pytest.mark.parametrize(("client", "server_args", "seen"), [
    (vllm(), {}, "vLLM does not promise batch-invariant numerics (does not say"),
    (vllm(), {"batch_invariant": False}, "vLLM does not promise batch-invariant numerics (reports it off"),
], ids=["vllm-not-said", "vllm-off"])
def test_seeded_requests_without_the_promise_skip_with_one_line(client, server_args, seen):
    """vLLM seeds each request's own generator, so its seeds are honoured; that alone no longer makes a seeded answer
    comparable across batches."""
    assert probe(client, server_args).seeds_honoured()[0]
    holds, reason = probe(client, server_args).batch_invariance()
    assert not holds and reason.startswith(seen) and "\n" not in reason and "--assume-deterministic" in reason


def test_sglang_without_deterministic_inference_keeps_its_seed_reason():
    holds, reason = probe(SGLangModel("http://h:1"), {"enable_deterministic_inference": False}).batch_invariance()
    assert not holds and reason.startswith("SGLang ignores sampling_seed")


def test_a_kind_that_seeds_each_request_but_says_nothing_of_batches_is_skipped():
    """A third kind with seeds_each_request and no batch_invariance reader (tests/helpers/stub_server_kind/)."""
    kinds.register(STUBBY)
    try:
        holds, reason = probe(StubbyClient("http://h:1"), {"server_kind": "stubby"}).batch_invariance()
    finally:
        kinds.unregister(STUBBY.name)
    assert not holds and reason.startswith("Stubby does not promise batch-invariant numerics (does not say")


def test_sglangs_promise_is_read_from_its_server_info_key():
    """srt/arg_groups/fields/exec_.py:1153 (0.5.23), served by /server_info as a resolved server arg."""
    read = kinds.get("sglang").batch_invariance
    assert (read({"enable_deterministic_inference": True}), read({"enable_deterministic_inference": False}), read({})) == (True, False, None)
