"""Reach, identify and (when asked) launch the server under test; shared by the pytest plugin and
the CLI so both resolve a server the same way: --server-url, else --launch CMD, else the embedded
reference server on a free port."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SpecsuiteError
from harness.identity import ServerIdentity
from harness.launcher import LaunchedServer, launch_reference_server
from harness.sglang_client import SGLangClient
from harness.vocab import VocabInfo, load_vocab_info


@dataclass
class ServerUnderTest:
    """The resolved server: client, vocabulary facts, identity and, when launched here, the process."""

    client: SGLangClient
    vocab: VocabInfo
    identity: ServerIdentity
    arm: str
    launched: LaunchedServer | None = None

    def close(self) -> None:
        self.client.close()
        if self.launched is not None:
            self.launched.stop()


def launch_url(command: str, explicit: str | None = None) -> str:
    """Where a launched command will serve: --launch-url, else its --host/--port, else SGLang's default."""
    if explicit:
        return explicit.rstrip("/")
    words = shlex.split(command)
    host, port = "127.0.0.1", "30000"
    for flag, value in zip(words, words[1:]):
        if flag == "--host":
            host = "127.0.0.1" if value in ("0.0.0.0", "::") else value
        elif flag == "--port":
            port = value
    return f"http://{host}:{port}"


def open_server(
    *,
    server_url: str | None,
    launch: str | None,
    log_dir: Path,
    api_key: str | None,
    arm: str | None,
    tokenizer: str | None = None,
    vocab_size: int | None = None,
    launch_url_override: str | None = None,
    ready_timeout_s: float = 600.0,
    reference_arm: str = "fix",
) -> ServerUnderTest:
    """Resolve the server, check it is SGLang-shaped, and probe its vocabulary (one-line errors)."""
    launched = None
    url = server_url
    if url is None and launch:
        url = launch_url(launch, launch_url_override)
        launched = LaunchedServer(launch, base_url=url, log_path=log_dir / "server.log", ready_timeout_s=ready_timeout_s, api_key=api_key).start()
    elif url is None:
        launched = launch_reference_server(reference_arm, log_dir=log_dir, ready_timeout_s=ready_timeout_s)
        url = launched.base_url
        arm = arm or reference_arm
    arm = arm or "candidate"
    try:
        client = SGLangClient(url, api_key=api_key)
        model_info = client.check_connection()
        server_info = client.server_info()
        tokenizer_dir = tokenizer or model_info.get("tokenizer_path") or model_info.get("model_path")
        if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
            raise SpecsuiteError(f"the server's tokenizer {tokenizer_dir!r} is not a folder on this machine: pass --tokenizer <local folder>")
        vocab = load_vocab_info(tokenizer_dir, vocab_size)
        identity = ServerIdentity.from_server(url, model_info, server_info, vocab, extra={"arm": arm})
    except SpecsuiteError:
        if launched is not None:
            launched.stop()
        raise
    return ServerUnderTest(client, vocab, identity, arm, launched)
