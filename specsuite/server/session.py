"""Reach, identify and (when asked) launch the server under test; shared by the pytest plugin and
the CLI so both resolve a server the same way: --server-url, else --launch CMD, else the embedded
reference server on a free port.

The embedded fallback keeps the README's one-line commands working, but it must never stand in
for a real server unnoticed (a nightly job whose SPECSUITE_SERVER_URL is unset would test the CPU
emulation and pass). So every resolved server carries `server_under_test`, a small record that
says how it was chosen and whether it is the reference emulation, for the pytest header, the
terminal summary, results.json and the reports; and `require_server_url=True` (pytest's
--require-server-url and --specsuite-profile nightly, the CLI's --require-server-url) refuses the fallback.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.results.types import ServerChoice
from specsuite.server import kinds, refserver_contract
from specsuite.server.identity import ServerIdentity, tokenizer_folder
from specsuite.server.launcher import READY_TIMEOUT_S, LaunchedServer, launch_reference_server
from specsuite.server.protocol import ServerClient
from specsuite.server.vocab import VocabInfo, load_vocab_info


@dataclass
class ServerUnderTest:
    """The resolved server: client, vocabulary facts, identity and, when launched here, the process."""

    client: ServerClient  # the client of its kind (specsuite.server.kinds)
    vocab: VocabInfo
    identity: ServerIdentity
    arm: str
    launched: LaunchedServer | None = None
    server_under_test: dict[str, Any] = field(default_factory=dict)

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
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "--host":
            host = "127.0.0.1" if value in ("0.0.0.0", "::") else value
        elif flag == "--port":
            port = value
    return f"http://{host}:{port}"


SERVER_URL_ENV = "SPECSUITE_SERVER_URL"  # the default of --server-url

# How the server was chosen (`server_under_test["source"]`).
SOURCE_SERVER_URL = "server-url"
SOURCE_LAUNCH = "launch"
SOURCE_EMBEDDED = "embedded-reference"
REFUSED_FALLBACK = ("no server under test: {why} refuses the embedded reference server (a CPU emulation, not SGLang); "
                    "{how}")
GIVE_A_SERVER = "pass --server-url URL (or set SPECSUITE_SERVER_URL) or --launch CMD"  # pytest, gsm8k, bench; `specsuite run` says its own


def is_reference_emulation(server_info: dict[str, Any]) -> bool:
    """True when /server_info comes from specsuite's reference server, however it was reached."""
    return refserver_contract.is_reference_server(server_info)


def describe_server_under_test(record: dict[str, Any]) -> str:
    """One line naming the server under test (a `server_under_test` record); it leads with the warning when it is the emulation."""
    choice = ServerChoice.from_dict(record)
    url = choice.url if choice.has("url") else "?"
    if choice.embedded_reference:
        return (f"server under test: the EMBEDDED REFERENCE EMULATION at {url} (CPU refserver, not a real "
                "SGLang server; no --server-url/SPECSUITE_SERVER_URL was given)")
    if choice.reference_emulation:
        return f"server under test: the REFERENCE EMULATION at {url} (CPU refserver, not a real SGLang server; via {choice.source})"
    version = f", version {choice.version}" if choice.version else ""
    kind = f"{choice.server_kind} " if choice.server_kind else ""
    return f"server under test: {kind}{url} (via {choice.source}{version})"


def _unrecognised(line: str) -> str | None:
    """The fallback kind's one-line diagnosis of a detected server widened to every kind (no probe recognised it);
    None when the line is another error."""
    said = f"does not look like an {kinds.fallback().display_name} server"
    if said not in line:
        return None
    every = [kind.display_name for kind in kinds.all_kinds()]
    either = ", ".join(every[:-1]) + " or " + every[-1]
    missing = " nor ".join(kind.signature for kind in kinds.all_kinds()[1:])
    return line.replace(said, f"does not look like an {either} server (no {missing} either)", 1)


def _check_connection(client: Any, server_kind: str) -> dict[str, Any]:
    """The client's probe; when the kind was detected (no kind's signature answered), the one-line diagnosis names
    every kind the harness speaks."""
    try:
        return client.check_connection()
    except SpecsuiteError as exc:
        widened = _unrecognised(str(exc)) if server_kind == kinds.AUTO else None
        if widened is not None:
            raise SpecsuiteError(widened) from None
        raise


def check_server_given(server_url: str | None, launch: str | None, require_server_url: bool, why: str, how: str = GIVE_A_SERVER) -> None:
    """Raise the one-line refusal when no server was given and the fallback is not allowed; `how` names the
    options of the command that refuses (every hint names an option that command has)."""
    if require_server_url and not server_url and not launch:
        raise SpecsuiteError(REFUSED_FALLBACK.format(why=why, how=how))


@dataclass(frozen=True)
class ServerOptions:
    """How to resolve the server under test: a URL, else a launch command, else the embedded reference server.

    `require_server_url` refuses the embedded fallback (`require_reason` names the option that asked for it in the
    error line). `admin_api_key` goes only with /flush_cache. The keys are left out of the repr (logs never see them).
    """

    server_url: str | None = None
    launch: str | None = None
    launch_url: str | None = None  # where a launched command serves, when its --host/--port do not say
    ready_timeout_s: float = READY_TIMEOUT_S
    request_timeout_s: float = 120.0  # the client's read timeout: how long the harness waits for one answer
    arm: str | None = None
    reference_arm: str = refserver_contract.DEFAULT_ARM
    tokenizer: str | None = None
    vocab_size: int | None = None
    server_kind: str = kinds.AUTO
    require_server_url: bool = False
    require_reason: str = "--require-server-url"
    api_key: str | None = field(default=None, repr=False)
    admin_api_key: str | None = field(default=None, repr=False)


@dataclass
class ServerEndpoint:
    """A server resolved and reached, nothing asked of it yet: where it serves, how it was chosen (`source`), and the
    process when it was launched here. `open_server` goes on to identify it; `specsuite bench` needs no more."""

    url: str
    source: str
    launched: LaunchedServer | None = None

    @property
    def embedded_reference(self) -> bool:
        return self.source == SOURCE_EMBEDDED

    @property
    def server_under_test(self) -> dict[str, Any]:
        """How it was chosen, for a record (the benchmark adds the URL and what /server_info says)."""
        return {"embedded_reference": self.embedded_reference, "source": self.source}

    def stop(self) -> None:
        if self.launched is not None:
            self.launched.stop()


def start_server(options: ServerOptions, log_dir: Path, *, reference_args: Sequence[str] = (),
                 reference_api_key: str | None = None) -> ServerEndpoint:
    """Where the server under test is, launched here when asked (its log under `log_dir`). `reference_args` and
    `reference_api_key` go to an embedded reference server (`specsuite bench`'s)."""
    check_server_given(options.server_url, options.launch, options.require_server_url, options.require_reason)
    if options.server_url:
        return ServerEndpoint(options.server_url, SOURCE_SERVER_URL)
    if options.launch:
        url = launch_url(options.launch, options.launch_url)
        launched = LaunchedServer(options.launch, base_url=url, log_path=log_dir / "server.log", ready_timeout_s=options.ready_timeout_s,
                                  api_key=options.api_key).start()
        return ServerEndpoint(url, SOURCE_LAUNCH, launched)
    launched = launch_reference_server(options.reference_arm, log_dir=log_dir, extra_args=reference_args,
                                       ready_timeout_s=options.ready_timeout_s, api_key=reference_api_key)
    return ServerEndpoint(launched.base_url, SOURCE_EMBEDDED, launched)


def open_server(options: ServerOptions, log_dir: Path) -> ServerUnderTest:
    """Resolve the server, find its kind (SGLang or vLLM, `specsuite.server.kinds`), and probe
    its vocabulary (one-line errors)."""
    return identify_server(start_server(options, log_dir), options)


def identify_server(endpoint: ServerEndpoint, options: ServerOptions) -> ServerUnderTest:
    """The reached server's kind, identity and vocabulary (a local tokenizer folder); a launched one is stopped when
    that fails."""
    url, launched = endpoint.url, endpoint.launched
    arm = options.arm or (options.reference_arm if endpoint.embedded_reference else "candidate")
    try:
        client = kinds.make_client(options.server_kind, url, api_key=options.api_key, admin_api_key=options.admin_api_key,
                                   timeout_s=options.request_timeout_s)
        model_info = _check_connection(client, options.server_kind)
        server_info = client.server_info()
        tokenizer_dir = options.tokenizer or tokenizer_folder(model_info)
        if options.tokenizer and not Path(options.tokenizer).is_dir():
            raise SpecsuiteError(f"--tokenizer {options.tokenizer}: no such folder on this machine (it must hold the model's tokenizer files)")
        if not tokenizer_dir or not Path(tokenizer_dir).is_dir():
            raise SpecsuiteError(f"the server's tokenizer {tokenizer_dir!r} is not a folder on this machine: pass --tokenizer <local folder>")
        vocab = load_vocab_info(tokenizer_dir, options.vocab_size)
        identity = ServerIdentity.from_server(url, model_info, server_info, vocab, extra={"arm": arm})
    except SpecsuiteError:
        endpoint.stop()
        raise
    under_test = {
        "embedded_reference": endpoint.embedded_reference,
        "reference_emulation": is_reference_emulation(server_info),
        "source": endpoint.source,
        "url": identity.base_url,
        "version": identity.version,
        "server_kind": kinds.kind_of_client(client).name,
    }
    return ServerUnderTest(client, vocab, identity, arm, launched, under_test)
