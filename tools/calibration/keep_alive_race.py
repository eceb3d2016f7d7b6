"""How often does reusing a keep-alive connection fail a request on a healthy, loaded server?

A uvicorn server (the HTTP server of SGLang and vLLM) with a short keep-alive timeout and an event loop
that stalls, as a busy server's does, answers rounds of concurrent requests from one pooled client; between
rounds the client idles for about the keep-alive timeout. Busy processes load every core, as the CI
machine's live jobs do. Two clients take turns over the same rounds:
- `requests.Session` as is: a pooled connection is reused whatever its idle time;
- `specsuite.server.idle_connections.idle_expiring_session` with MAX_IDLE_S scaled to the server's timeout
  as 2 s is to uvicorn's 5 s: idle connections are retired before the server closes them.
Reported: requests sent and requests that failed, per client, with the first failure's text.

    .venv/bin/python tools/calibration/keep_alive_race.py --server-python .sglang/sglang-0.5.23/bin/python

`--server-python`: a Python with uvicorn and uvloop (an SGLang or vLLM environment); the project's own
environment has no uvicorn.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from specsuite.server import idle_connections  # noqa: E402

SERVER = """
import asyncio, sys, time
import uvicorn, uvloop

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})

async def stall(busy_s):
    while True:  # a loop that computes between its I/O, as a serving engine's does
        await asyncio.sleep(0.05)
        start = time.monotonic()
        while time.monotonic() - start < busy_s:
            pass

async def main(port, keep_alive_s, busy_s):
    server = uvicorn.Server(uvicorn.Config(app, port=port, timeout_keep_alive=keep_alive_s, log_level="warning", loop="uvloop"))
    asyncio.get_running_loop().create_task(stall(busy_s))
    await server.serve()

uvloop.run(main(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"keep_alive_race: the server did not listen on port {port} within {timeout_s:g} s")


def spin() -> None:
    while True:
        pass


def run_rounds(session: requests.Session, url: str, rounds: int, concurrency: int, idle_s: float,
               rng: random.Random) -> dict:
    failures: list[str] = []

    def one(_: int) -> None:
        try:
            session.post(url, json={"ping": 1}, timeout=10)
        except requests.RequestException as exc:
            failures.append(repr(exc)[:200])

    with ThreadPoolExecutor(concurrency) as pool:
        for _ in range(rounds):
            list(pool.map(one, range(concurrency)))
            time.sleep(rng.uniform(0.97, 1.03) * idle_s)
    return {"sent": rounds * concurrency, "failed": len(failures), "first_failure": failures[0] if failures else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-python", required=True, help="a Python with uvicorn and uvloop")
    parser.add_argument("--keep-alive-s", type=float, default=1.0, help="the server's keep-alive timeout")
    parser.add_argument("--busy-s", type=float, default=0.2, help="how long each stall of the server's loop lasts")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--load-processes", type=int, default=os.cpu_count() or 2, help="busy processes beside the run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args()
    if not Path(args.server_python).is_file():
        print(f"keep_alive_race: --server-python {args.server_python} is not a file", file=sys.stderr)
        return 2

    port = free_port()
    server = subprocess.Popen([args.server_python, "-c", SERVER, str(port), str(args.keep_alive_s), str(args.busy_s)])
    load = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.load_processes)]
    try:
        wait_listening(port)
        for process in load:
            process.start()
        url = f"http://127.0.0.1:{port}/generate"
        idle_connections.MAX_IDLE_S = args.keep_alive_s * 2.0 / 5.0
        result = {"seed": args.seed, "keep_alive_s": args.keep_alive_s, "busy_s": args.busy_s, "rounds": args.rounds,
                  "concurrency": args.concurrency, "load_processes": args.load_processes,
                  "max_idle_s": idle_connections.MAX_IDLE_S}
        with requests.Session() as plain:
            result["plain_session"] = run_rounds(plain, url, args.rounds, args.concurrency, args.keep_alive_s,
                                                 random.Random(args.seed))
        with idle_connections.idle_expiring_session() as expiring:
            result["idle_expiring_session"] = run_rounds(expiring, url, args.rounds, args.concurrency, args.keep_alive_s,
                                                         random.Random(args.seed))
    finally:
        for process in load:
            process.terminate()
        server.terminate()
        server.wait(timeout=10)
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
