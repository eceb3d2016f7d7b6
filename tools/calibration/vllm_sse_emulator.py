"""A vLLM-shaped streaming server with a fixed schedule, to compare benchmark clients without a model.

POST /v1/completions streams what vLLM 0.32 sends with `stream_options.include_usage` and
`return_token_ids`: a first one-token chunk after `--ttft-ms`, then one chunk every `--step-ms`
carrying 1 to 4 tokens in a fixed cycle (a speculative decoder's accepted tokens), the last with
`finish_reason: length`, a usage-only chunk (`choices: []`, `usage`, `metrics.speculative_decoding`)
and `data: [DONE]`; it honours `max_tokens` and ignores everything else. /health, /v1/models (its
`root` is --root, the tokenizer folder) and /metrics (vLLM's spec-decode counters) answer too.
Nothing here depends on a model's speed, so two clients measured against it in turn should agree
to within the machine's timer noise; `vs_vllm_bench_serve.py --server-url` points at it.

    .venv/bin/python tools/calibration/vllm_sse_emulator.py --port 8179 --step-ms 12 --ttft-ms 25
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import orjson
from aiohttp import web

CYCLE = (3, 1, 2, 4, 2, 1, 3, 2)  # tokens per step after the first; mean 2.25


class Emulator:
    """The schedule and the counters /metrics reports."""

    def __init__(self, step_s: float, ttft_s: float, root: str) -> None:
        self.step_s, self.ttft_s, self.root = step_s, ttft_s, root
        self.drafts = 0
        self.accepted = 0

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "specsuite-tiny-llama", "object": "model", "root": self.root}]})

    async def metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=f"vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {self.drafts}.0\n"
                                 f"vllm:spec_decode_num_draft_tokens_total{{engine=\"0\"}} {3 * self.drafts}.0\n"
                                 f"vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {self.accepted}.0\n")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
            total = int(body["max_tokens"])
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": {"message": "max_tokens is required"}}, status=400)
        prompt = body.get("prompt")
        prompt_tokens = len(prompt) if isinstance(prompt, list) else max(1, len(str(prompt).split()))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sizes = [1]
        step = 0
        while sum(sizes) < total:
            sizes.append(min(CYCLE[step % len(CYCLE)], total - sum(sizes)))
            step += 1
        loop = asyncio.get_running_loop()
        due = loop.time() + self.ttft_s
        sent = 0
        for index, size in enumerate(sizes):
            await asyncio.sleep(max(0.0, due - loop.time()))  # a fixed timetable: lateness is not carried into the next step
            due += self.step_s
            ids = [100 + (sent + i) % 50 for i in range(size)]
            sent += size
            choice = {"index": 0, "text": " t" * size, "logprobs": None, "finish_reason": "length" if sent >= total else None,
                      "stop_reason": None, "token_ids": ids}
            if index == 0:
                choice["prompt_token_ids"] = None
            await response.write(b"data: " + orjson.dumps({"id": "cmpl-e", "object": "text_completion", "model": "e", "choices": [choice]}) + b"\n\n")
        steps = len(sizes) - 1
        self.drafts += steps
        self.accepted += sent - 1 - steps
        spec = {"mean_acceptance_length": (sent - 1) / steps if steps else 1.0, "num_spec_steps": steps}
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + sent, "completion_tokens": sent}
        await response.write(b"data: " + orjson.dumps({"id": "cmpl-e", "object": "text_completion", "model": "e", "choices": [], "usage": usage,
                                                       "metrics": {"speculative_decoding": spec}}) + b"\n\ndata: [DONE]\n\n")
        return response


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8179)
    parser.add_argument("--step-ms", type=float, default=12.0)
    parser.add_argument("--ttft-ms", type=float, default=25.0)
    parser.add_argument("--root", default="specsuite/fixtures/vllm_models/target", help="the tokenizer folder /v1/models names")
    args = parser.parse_args(argv)
    if args.step_ms <= 0 or args.ttft_ms < 0:
        parser.error("--step-ms must be positive and --ttft-ms not negative")
    emulator = Emulator(args.step_ms / 1000.0, args.ttft_ms / 1000.0, args.root)
    app = web.Application()
    app.router.add_get("/health", emulator.health)
    app.router.add_get("/v1/models", emulator.models)
    app.router.add_get("/metrics", emulator.metrics)
    app.router.add_post("/v1/completions", emulator.completions)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
