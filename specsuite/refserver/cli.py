"""Command line of the reference server: `python -m specsuite.refserver` and
`specsuite serve-reference` share this parser and entry point."""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import signal
import sys
from typing import Sequence

from aiohttp import web

from specsuite.errors import SpecsuiteError
from specsuite.refserver.engine import ARMS, Engine, EngineConfig
from specsuite.refserver.engine_process import EngineProcess
from specsuite.refserver.faults import FAULT_ARMS, fault_dest, fault_flag
from specsuite.refserver.kernel_sampler import NUMPY_SAMPLER, parse_sampler_option
from specsuite.refserver.model_loading import MODEL_DIR, load_reference_model

log = logging.getLogger("specsuite.refserver")


def build_parser(prog: str = "python -m specsuite.refserver") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="CPU reference speculative-decoding server (SGLang 0.5.23 HTTP API).")
    add = parser.add_argument
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--arm", choices=ARMS, default="fix", help="fix: copy draft_probs + sampler guards; nofix: draft_probs recycled in the graph pool, no guards; "
        "copy-only; guards-only")
    add("--random-seed", type=int, default=0)
    add("--api-key", default=None, help="require Authorization: Bearer KEY (SGLang's open paths stay open)")
    add("--admin-api-key", default=None, help="require this key, and only this one, on the admin routes /flush_cache and /abort_request (as SGLang)")
    add("--enable-metrics", action="store_true", help="serve Prometheus metrics on /metrics")
    add("--max-running-requests", type=int, default=48)
    add("--context-length", type=int, default=None,
        help="the model's context length (default and upper limit: its max_position_embeddings, as SGLang refuses a longer one)")
    add("--step-time-ms", type=float, default=0.0,
        help="run decode steps on a clock of this many ms, releasing each step's tokens at its end (imitates a GPU server's ITL)")
    add("--extra-step-us", type=float, default=0.0, help="add a fixed cost per decode step (imitates the fix's copy)")
    add("--bias-accept", type=float, default=0.0, help="TEST KNOB: accept drafts with probability min(1, p/q + delta)")
    add("--lossy-greedy-gap", type=float, default=0.0,
        help="TEST KNOB: a lossy greedy verify that commits the runner-up wherever the target's top-2 gap is below this many nats")
    add("--accept-inflation", type=float, default=1.0,
        help="TEST KNOB: accept drafts with probability min(1, c * p/q), c >= 1 (an over-accepting sampler; 1: correct)")
    add("--padded-row-logit-gap", type=float, default=None,
        help="TEST KNOB: padded rows other than the fallback sit this many nats below the smallest real logit (default: "
             "the model's 25, as the fallback's); lower it to give them mass of their own, as a real checkpoint's untrained rows have")
    add("--sampler", type=parse_sampler_option, default=NUMPY_SAMPLER, metavar="numpy|sglang==VERSION|installed|FILE.py",
        help="the chain rejection sampler that decides sampled verify rows: this server's numpy one (default), or SGLang's "
             "chain_speculative_sampling_triton from a release, this Python's SGLang, or a file (GPU if torch sees one, "
             "else Triton's interpreter)")
    add("--speculative-algorithm", choices=("EAGLE", "NONE"), default="EAGLE", type=str.upper)
    add("--speculative-num-steps", type=int, default=5)
    add("--speculative-eagle-topk", type=int, default=1)
    add("--speculative-num-draft-tokens", type=int, default=None, help="must be steps + 1 (topk=1 chain)")
    add("--speculative-use-rejection-sampling", action="store_true")
    add("--disable-cuda-graph", action="store_true", help="no graph memory pool: the control without aliasing")
    add("--served-model-name", default=None)
    add("--log-level", default="warning")
    faults = parser.add_argument_group("fault arms", "Real bug classes of sampling parameters under speculation, each off by default "
                                       "and each in the speculative path only: with --speculative-algorithm NONE they change nothing.")
    for name, does in FAULT_ARMS.items():
        faults.add_argument(fault_flag(name), dest=fault_dest(name), action="store_true", help=f"FAULT ARM: {does}")
    return parser


def resolve_config(args: argparse.Namespace, parser: argparse.ArgumentParser, eos_ids: tuple[int, ...]) -> EngineConfig:
    """Check the spec flags the way SGLang does and build the engine config."""
    if args.speculative_eagle_topk != 1:
        parser.error("only --speculative-eagle-topk 1 (chain drafting) is supported")
    if args.speculative_num_steps < 1:
        parser.error("--speculative-num-steps must be at least 1")
    draft_tokens = args.speculative_num_draft_tokens or args.speculative_num_steps + 1
    if draft_tokens != args.speculative_num_steps + 1:
        parser.error("with topk=1, --speculative-num-draft-tokens must equal --speculative-num-steps + 1")
    if args.max_running_requests < 1:
        parser.error("--max-running-requests must be at least 1")
    if args.sampler != NUMPY_SAMPLER and args.bias_accept:
        parser.error(f"--bias-accept is a knob of the numpy sampler; it cannot be combined with --sampler {args.sampler}")
    if args.lossy_greedy_gap < 0:
        parser.error("--lossy-greedy-gap must be >= 0 (nats)")
    if not 1.0 <= args.accept_inflation < float("inf"):
        parser.error(f"--accept-inflation must be a number >= 1, got {args.accept_inflation}")
    if args.sampler != NUMPY_SAMPLER and args.accept_inflation != 1.0:
        parser.error(f"--accept-inflation is a knob of the numpy sampler; it cannot be combined with --sampler {args.sampler}")
    if args.sampler != NUMPY_SAMPLER and args.arm == "guards-only":
        parser.error(f"--arm guards-only switches on the numpy sampler's guards; with --sampler {args.sampler} "
                     "the kernel's own code guards or not (use --arm nofix)")
    return EngineConfig(
        arm=args.arm,
        speculative_algorithm=args.speculative_algorithm,
        num_steps=args.speculative_num_steps,
        num_draft_tokens=draft_tokens,
        use_rejection_sampling=args.speculative_use_rejection_sampling,
        disable_cuda_graph=args.disable_cuda_graph,
        max_running_requests=args.max_running_requests,
        random_seed=args.random_seed,
        step_time_ms=args.step_time_ms,
        extra_step_us=args.extra_step_us,
        bias_accept=args.bias_accept,
        lossy_greedy_gap=args.lossy_greedy_gap,
        accept_inflation=args.accept_inflation,
        sampler=args.sampler,
        eos_ids=eos_ids,
        faults=frozenset(name for name in FAULT_ARMS if getattr(args, fault_dest(name), False)),
    )


def server_args_dict(args: argparse.Namespace, config: EngineConfig, model_path: str, context_length: int,
                     sampler_identity: dict | None = None) -> dict:
    """The flat, resolved args that /server_info reports (SGLang field names, then ours)."""
    speculative = config.speculative
    return {
        "model_path": model_path,
        "tokenizer_path": model_path,
        "served_model_name": args.served_model_name or model_path,
        "host": args.host,
        "port": args.port,
        "tp_size": 1,
        "dp_size": 1,
        "context_length": context_length,
        "max_running_requests": config.max_running_requests,
        "random_seed": config.random_seed,
        "log_level": args.log_level,
        "enable_metrics": args.enable_metrics,
        "api_key": args.api_key,
        "admin_api_key": args.admin_api_key,  # SGLang echoes both keys in /server_info
        "disable_cuda_graph": config.disable_cuda_graph,
        # SGLang's field: the greedy comparisons' near-tie tolerance follows it. The engine's
        # distributions are float64 n-gram tables, the same for every batch shape.
        "dtype": "float32",
        # The engine honours sampling_seed per request, which SGLang does only in this mode.
        "enable_deterministic_inference": True,
        "stream_interval": 1,
        "incremental_streaming_output": False,
        "decode_log_interval": config.decode_log_interval,
        "speculative_algorithm": config.speculative_algorithm if speculative else None,
        "speculative_draft_model_path": model_path if speculative else None,
        "speculative_num_steps": config.num_steps if speculative else None,
        "speculative_eagle_topk": 1 if speculative else None,
        "speculative_num_draft_tokens": config.num_draft_tokens if speculative else None,
        "speculative_use_rejection_sampling": config.use_rejection_sampling,
        "speculative_accept_threshold_single": 1.0,
        "speculative_accept_threshold_acc": 1.0,
        "refserver_arm": config.arm,
        "refserver_step_time_ms": config.step_time_ms,
        "refserver_extra_step_us": config.extra_step_us,
        "refserver_bias_accept": config.bias_accept,
        "refserver_lossy_greedy_gap": config.lossy_greedy_gap,
        "refserver_accept_inflation": config.accept_inflation,
        "refserver_padded_row_logit_gap": args.padded_row_logit_gap,
        "refserver_faults": sorted(config.faults),  # the fault arms switched on (faults.py)
        # Which sampler decided: label, version, sha256 of the kernel file, device.
        "refserver_sampler": sampler_identity,
    }


async def _serve(args: argparse.Namespace, parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    from specsuite.refserver.app import build_app
    from specsuite.refserver.server import ServerState

    model = load_reference_model()
    config = resolve_config(args, parser, model.eos_ids)
    if args.context_length is not None:
        if not 1 <= args.context_length <= model.context_length:
            parser.error(f"--context-length must be in [1, {model.context_length}] (the model's max_position_embeddings), got {args.context_length}")
        model.context_length = args.context_length
    if args.padded_row_logit_gap is not None:
        model.target.judged_row_gap = model.draft.judged_row_gap = args.padded_row_logit_gap
    # With step emulation the engine computes in its own process, off the HTTP thread's GIL.
    engine_type = EngineProcess if config.step_time_ms > 0 or config.extra_step_us > 0 else Engine
    try:
        engine = engine_type(config, model.target, model.draft, model.decode_text)  # Engine loads its sampler here
        engine.start()  # EngineProcess: its child loads it
    except SpecsuiteError as exc:
        # The loader's advice names its own option (--kernel); here it is --sampler.
        raise SystemExit(f"refserver: --sampler {config.sampler}: {str(exc).replace('--kernel', '--sampler')}") from None
    sampler = engine.sampler_identity
    print(f"refserver: sampler {sampler['label']} on {sampler['device']}"
          + (f", sha256 {sampler['sha256']}" if sampler.get("sha256") else ""), flush=True)
    state = ServerState(
        model=model,
        engine=engine,
        server_args=server_args_dict(args, config, str(MODEL_DIR), model.context_length, sampler),
        launch_command=shlex.join([sys.executable, "-m", "specsuite.refserver", *argv]),
        api_key=args.api_key,
        admin_api_key=args.admin_api_key,
        enable_metrics=args.enable_metrics,
    )
    runner = web.AppRunner(build_app(state), handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    try:
        await site.start()
    except OSError as exc:
        raise SystemExit(f"refserver: cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    await _warm_up(state)
    state.ready = True
    print(f"The server is fired up and ready to roll! (http://{args.host}:{args.port}, arm={config.arm}, sampler={sampler['label']})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()
    engine.stop()


async def _warm_up(state) -> None:
    """SGLang's warmup: one short greedy generation before /health turns 200."""
    from specsuite.refserver.protocol import parse_generate
    from specsuite.refserver.server import _wait_finished, engine_requests

    items, _, _ = parse_generate({"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}, lambda: "warmup")
    pairs = engine_requests(state, items, asyncio.get_running_loop())
    for engine_request, _ in pairs:
        state.engine.submit(engine_request)
    await asyncio.gather(*(_wait_finished(r, e) for r, e in pairs))


GIL_SWITCH_INTERVAL_S = 0.0002


def main(argv: Sequence[str] | None = None, prog: str = "python -m specsuite.refserver") -> int:
    parser = build_parser(prog)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.step_time_ms > 0 or args.extra_step_us > 0:
        # The HTTP process's threads (event loop, step publisher, result receiver) share a GIL:
        # at the default 5 ms switch interval the publisher could wait a whole interval past a
        # step's deadline. Only with emulation: without it, the engine thread shares the process
        # and the extra switches cost about 15% of the throughput at concurrency 16.
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        asyncio.run(_serve(args, parser, argv))
    except KeyboardInterrupt:
        pass
    return 0
