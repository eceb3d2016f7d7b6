"""`specsuite serve-vllm`: serve vLLM with one speculation method until Ctrl-C or SIGTERM.

    specsuite serve-vllm --method eagle --port 8141
    specsuite serve-vllm --method none --port 8142                    # the lossless reference
    specsuite serve-vllm --method eagle --spec-config '{"num_speculative_tokens": 5}' -- --max-num-seqs 4
    specsuite serve-vllm --method eagle --port 8143 --patch expand_fix  # the CPU expand bug corrected
    specsuite serve-vllm --method eagle --patch planted_bias --planted-bias-c 1.25   # a known-biased sampler

It waits for /health like the reference server's launcher (specsuite.server.launcher), prints the
URL and the command, and stops the server's whole process group on exit. With `--patch`, the project's
patch (specsuite/fixtures/vllm_patches) goes first on the server's PYTHONPATH, and once vLLM is ready its log must
hold the patch's activation line, or serve-vllm stops the server and exits 1: a run is never called
corrected (or biased) on a server that is not.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from specsuite.cli.serving_loop import serve_until_stopped
from specsuite.errors import SpecsuiteError
from specsuite.server.identity import redact_command
from specsuite.server.kinds.vllm.launch import find_vllm_python, vllm_command, vllm_env
from specsuite.server.kinds.vllm.patches import patch_env, require_patch_active
from specsuite.server.launcher import LaunchedServer
from specsuite.session.option_table import find_option


def serve_vllm(args: argparse.Namespace) -> int:
    extra = list(args.vllm_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    overrides = find_option("--spec-config", "serve-vllm").parse_value(args.spec_config)  # checked at start already
    command = vllm_command(find_vllm_python(args.vllm_python), args.method, port=args.port, host=args.host, model=args.model,
                           spec_model=args.spec_model, spec_overrides=overrides, extra_args=extra)
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    log_path = Path(f"vllm-{args.method}-{args.port}.log").resolve()
    patch = getattr(args, "patch", "none") or "none"
    env = vllm_env()
    if patch != "none":
        env.update(patch_env(patch, getattr(args, "planted_bias_c", None)))
    elif getattr(args, "planted_bias_c", None) is not None:
        raise SpecsuiteError("--planted-bias-c goes with --patch planted_bias")
    server = LaunchedServer(command, base_url=f"http://{host}:{args.port}", log_path=log_path, env=env,
                            ready_timeout_s=args.ready_timeout)
    # vLLM arguments after `--` may carry --api-key: never print it.
    patched = f", patch {patch} (PYTHONPATH {env['PYTHONPATH']})" if patch != "none" else ""
    print(f"specsuite: starting vLLM ({args.method}{patched}): {redact_command(shlex.join(command))}", file=sys.stderr, flush=True)
    print(f"specsuite: its log: {log_path}", file=sys.stderr, flush=True)
    check = (lambda: f"patch {patch} is active: {require_patch_active(log_path, patch)}") if patch != "none" else None
    return serve_until_stopped(server, f"vLLM ({args.method})", log_path, check)
