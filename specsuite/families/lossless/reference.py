"""The speculation-off reference the two-sample and greedy tests compare against: a running server
(--lossless-reference-url; SGLang or vLLM, specsuite.server.kinds) or, when none is given, the embedded reference server launched with
`--speculative-algorithm NONE` (only meaningful when the server under test serves that same
model, which is checked before launching)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.server import kinds, refserver_contract
from specsuite.server.bench_answers import model_path_of, speculative_algorithm_of
from specsuite.server.launcher import READY_TIMEOUT_S, LaunchedServer, launch_reference_server
from specsuite.server.protocol import ServerClient

SPECULATION_OFF_ARGS = ("--speculative-algorithm", "NONE")


@dataclass
class ReferenceServer:
    """The reference's client (None when unavailable, with the reason) and, if launched, its process."""

    client: ServerClient | None
    description: dict[str, Any]
    unavailable_reason: str | None = None
    launched: LaunchedServer | None = None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.launched is not None:
            self.launched.stop()


def embedded_model_path() -> str:
    """The model path the embedded reference server reports on /model_info."""
    return refserver_contract.model_dir()


def _describe(client: ServerClient, how: str, warn_if_speculative: bool = False) -> dict[str, Any]:
    """What the reference is, as the run records it; a warning when a reference named by URL speculates."""
    model = client.check_connection()
    algorithm = speculative_algorithm_of(client.server_info())
    description = {"how": how, "url": client.base_url, "model_path": model_path_of(model), "speculative_algorithm": algorithm}
    if warn_if_speculative and algorithm not in (None, "", "NONE"):
        description["warning"] = f"the reference runs speculation ({algorithm}); the comparison then tests two speculative servers"
    return description


def open_reference(
    *, reference_url: str | None, api_key: str | None, test_model_path: str | None, log_dir: Path, ready_timeout_s: float = READY_TIMEOUT_S
) -> ReferenceServer:
    """Connect to --lossless-reference-url, or launch the embedded speculation-off reference when the server
    under test serves the embedded model; otherwise the reference is unavailable (with the reason)."""
    if reference_url:
        client = kinds.make_client(kinds.AUTO, reference_url, api_key=api_key)  # SGLang or vLLM, as the server says
        try:
            description = _describe(client, "url", warn_if_speculative=True)
        except SpecsuiteError:
            client.close()
            raise
        return ReferenceServer(client, description)
    embedded = embedded_model_path()
    if test_model_path != embedded:
        reason = (f"the server under test serves {test_model_path!r}, not the embedded reference model: "
                  f"pass --lossless-reference-url to a speculation-off server of the same model")
        return ReferenceServer(None, {"how": "none"}, reason)
    launched = launch_reference_server(refserver_contract.DEFAULT_ARM, log_dir=log_dir, extra_args=SPECULATION_OFF_ARGS, ready_timeout_s=ready_timeout_s)
    client = kinds.make_client(refserver_contract.SERVER_KIND, launched.base_url)
    try:
        description = _describe(client, "embedded")
    except SpecsuiteError:
        client.close()
        launched.stop()
        raise
    return ReferenceServer(client, description, launched=launched)
