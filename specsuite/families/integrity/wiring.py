"""Wire a resolved server's client to the integrity checks, in one line for any workload:

    client = checking_client(server, recorder)        # server: a ServerUnderTest
    openai = checking_openai_client(server, recorder)  # the same server's OpenAI routes

The server's kind names the client that runs its rules (`ServerKind.checking_client`, in the kind's folder under
specsuite/server/kinds/); the recorder they report to, and the OpenAI routes' checking client, are in
`specsuite.families.integrity.recorder`.
"""

from __future__ import annotations

from typing import Any

from specsuite.errors import SpecsuiteError
from specsuite.families.integrity.recorder import CheckingOpenAIClient, IntegrityRecorder
from specsuite.server import kinds
from specsuite.server.integrity_rules import IntegrityContext
from specsuite.server.session import ServerUnderTest
from specsuite.server.tokenizer import load_tokenizer


def context_for_server(server: ServerUnderTest, tokenizer_dir: str | None = None) -> IntegrityContext:
    """The check context for a resolved server: its EOS ids, tokenizer, draft length, stream mode."""
    folder = tokenizer_dir or server.identity.tokenizer_path or server.identity.model_path
    if not folder:
        raise SpecsuiteError("the server reports no tokenizer_path: pass --tokenizer <local folder>")
    tokenizer = load_tokenizer(folder)
    identity = server.identity
    draft = identity.speculative_num_draft_tokens if identity.speculative_algorithm else None
    return IntegrityContext(
        eos_ids=frozenset(server.vocab.eos_ids),
        skipped_ids=tokenizer.special_ids,
        encode=lambda text: tokenizer.encode(text, add_special_tokens=False),
        decode=tokenizer.decode,
        num_draft_tokens=draft if isinstance(draft, int) else None,
        incremental_streaming=identity.incremental_streaming,
    )


def checking_openai_client(server: ServerUnderTest, recorder: IntegrityRecorder, tokenizer_dir: str | None = None,
                           context: IntegrityContext | None = None) -> CheckingOpenAIClient:
    """An OpenAI client for the same server (its URL and API key), checked like `checking_client`;
    pass `context` to reuse one already built (it loads the tokenizer)."""
    inner = getattr(server.client, "inner", server.client)  # a checking client shares its inner client's transport
    # SGLang echoes any `model` back without checking it; the served name reads best in logs.
    model = server.identity.served_model_name or "default"
    return CheckingOpenAIClient(inner._http, model, recorder, context or context_for_server(server, tokenizer_dir))


def checking_client(server: ServerUnderTest, recorder: IntegrityRecorder, tokenizer_dir: str | None = None) -> Any:
    """`server.client`, checked by its kind's checking client: the one-line wiring for any workload (never checked twice)."""
    inner = getattr(server.client, "inner", server.client)
    return kinds.kind_of_client(inner).checking_client(inner, recorder, context_for_server(server, tokenizer_dir))
