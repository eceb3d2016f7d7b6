"""`specsuite serve-sglang`: serve a real SGLang release on this CPU until Ctrl-C or SIGTERM.

    specsuite serve-sglang --sglang-version 0.5.23 --method eagle --port 30000
    specsuite serve-sglang --sglang-version 0.5.23 --method none --port 30001      # the lossless reference
    specsuite serve-sglang --sglang-version 0.5.20 --install                       # install first if needed

It waits for /health like the other launchers, prints the URL and the command, refuses to call
the server ready unless its log shows the project's CPU ops in use, and stops the server's whole
process group on exit.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from specsuite.cli.serving_loop import serve_until_stopped
from specsuite.errors import SpecsuiteError
from specsuite.server.identity import redact_command
from specsuite.server.kinds.sglang.launch import OPS_BANNER, install_release, release_venv, sglang_command, sglang_dir, sglang_env
from specsuite.server.launcher import LaunchedServer


def serve_sglang(args: argparse.Namespace) -> int:
    extra = list(args.sglang_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    directory = sglang_dir(args.sglang_dir)
    if args.install:
        print(f"specsuite: installing SGLang {args.sglang_version} in {directory} (first time: a few minutes)", file=sys.stderr, flush=True)
        install_release(args.sglang_version, directory)
    command = sglang_command(release_venv(args.sglang_version, directory), args.sglang_method, port=args.sglang_port, host=args.sglang_host, extra_args=extra)
    host = "127.0.0.1" if args.sglang_host in ("0.0.0.0", "::") else args.sglang_host
    log_path = Path(f"sglang-{args.sglang_version}-{args.sglang_method}-{args.sglang_port}.log").resolve()
    server = LaunchedServer(command, base_url=f"http://{host}:{args.sglang_port}", log_path=log_path, env=sglang_env(),
                            ready_timeout_s=args.sglang_ready_timeout)
    # SGLang arguments after `--` may carry --api-key: never print it.
    print(f"specsuite: starting SGLang {args.sglang_version} ({args.sglang_method}): {redact_command(shlex.join(command))}", file=sys.stderr, flush=True)
    print(f"specsuite: its log: {log_path}", file=sys.stderr, flush=True)

    def ops_in_use() -> str:
        if OPS_BANNER not in log_path.read_text(errors="replace"):
            raise SpecsuiteError(f"SGLang answered but its log has no line from the project's CPU ops ({OPS_BANNER!r}): "
                                 f"another sgl_kernel was imported; see {log_path}")
        return "the server runs on the project's CPU ops (specsuite/fixtures/sglang_cpu_ops)"

    return serve_until_stopped(server, f"SGLang {args.sglang_version} ({args.sglang_method})", log_path, ops_in_use)
