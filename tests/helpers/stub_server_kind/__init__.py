"""A third server kind, "Stubby", whole in this folder: what a new kind needs, with nothing of the harness edited.

- `client.py`: its client, answering the server-client protocol (`specsuite.server.protocol.ServerClient`, the typed
  native call included) over Stubby's own routes;
- `integrity_rules.py` and `checking.py`: its one integrity rule and the checking client that runs it;
- `kind.py`: its `ServerKind` entry (probe, signature, bench format, counters, flags; no launcher);
- `server.py`: a tiny in-process HTTP server playing Stubby (no model runs).

tests/server/test_stub_server_kind.py registers `kind.STUBBY` for one test at a time, in one line; the built-in kinds
are registered the same way, one line each in `specsuite.server.kinds.BUILTIN_KINDS`.
"""
