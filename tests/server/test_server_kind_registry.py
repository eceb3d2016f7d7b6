"""The server-kind registry (specsuite/server/kinds/): the built-in kinds in detection order and their launchers, and
the registry's own rules (names and bench backends are a kind's own; a client is of its most derived class). A kind
of the tests' own, Stubby, is served by the generic code in tests/server/test_stub_server_kind.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.server import kinds, refserver_contract
from specsuite.server.kinds.sglang.client import SGLangClient
from specsuite.session.option_table import OPTIONS
from tests.helpers.stub_server_kind.kind import STUBBY


def test_the_built_in_kinds_in_detection_order_and_the_option_choices_are_theirs():
    assert kinds.names() == ("sglang", "vllm") and kinds.fallback() is kinds.get("sglang")
    assert kinds.choices() == ("auto", "sglang", "vllm")
    assert kinds.bench_backend_names() == ("sglang", "sglang-oai", "sglang-oai-chat", "vllm")
    by_flag = {option.flag: option for option in OPTIONS}
    assert by_flag["--server-kind"].choices == kinds.choices()
    assert by_flag["--bench-backend"].choices == by_flag["--backend"].choices == kinds.bench_backend_names()
    assert by_flag["--bench-backend"].default_text == "vllm on a vLLM server, else sglang"
    assert kinds.get(refserver_contract.SERVER_KIND) is kinds.fallback()  # the embedded reference speaks the first kind's API


def test_each_built_in_kind_launches_its_own_server():
    sglang, vllm = kinds.get("sglang").launcher(Path("/venv"), "eagle", port=30001), kinds.get("vllm").launcher("python", "eagle", port=8141)
    assert sglang[1:3] == ["-m", "sglang.launch_server"] and "30001" in sglang
    assert vllm[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and "8141" in vllm


def test_a_kind_may_not_take_a_bench_backend_another_kind_offers():
    copied = replace(STUBBY, name="copycat", bench_backends=kinds.get("vllm").bench_backends)
    with pytest.raises(SpecsuiteError, match="bench backend vllm is taken"):
        kinds.register(copied)
    assert "copycat" not in kinds.names()


def test_a_client_is_of_the_kind_with_its_most_derived_class():
    derived = type("DerivedSGLangClient", (SGLangClient,), {})
    backend = replace(STUBBY.bench_backends[0], name="derived-completions")
    kind = kinds.register(replace(STUBBY, name="derived", client_class=derived, bench_backends=(backend,)))
    try:
        assert kinds.kind_of_client(derived("http://127.0.0.1:1")) is kind
        assert kinds.kind_of_client(SGLangClient("http://127.0.0.1:1")) is kinds.get("sglang")
        assert kinds.kind_of_client(object()) is kinds.fallback()
    finally:
        kinds.unregister("derived")
