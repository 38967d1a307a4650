"""Serve a loopback farm's handler on several addresses at one port (aiohttp): the ``main`` of
the farms that run as ``python -m tests.farm.<name> --log FILE [--port P]`` and print
``READY <port>`` (tests.farm.harness.farm_module starts them)."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: what answers a request: (the address it came to, its path) → the response
Answer = Callable[[str, str], web.StreamResponse]


def answering(make_answer: Callable[[int], Answer]) -> Callable[[str, int], Handler]:
    """A ``make_handler`` for :func:`main` from ``make_answer(port)``: every request answered by
    ``answer(address, path)`` and written to the access log as a JSON line (time, host, path,
    status), which the tests judge a crawl by."""
    def make(log_path: str, port: int) -> Handler:
        log = open(log_path, "a", buffering=1)
        answer = make_answer(port)

        async def handle(request: web.Request) -> web.StreamResponse:
            addr = request.transport.get_extra_info("sockname")[0]
            resp = answer(addr, request.path)
            log.write(json.dumps({"t": time.time(), "host": addr, "path": request.path,
                                  "status": resp.status}) + "\n")
            return resp
        return handle
    return make


async def serve(make_handler: Callable[[str, int], Handler], addrs: Sequence[str], log: str,
                port: int) -> None:
    if not port:
        with socket.socket() as s:
            s.bind((addrs[0], 0))
            port = s.getsockname()[1]
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", make_handler(log, port))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for addr in addrs:
        await web.TCPSite(runner, addr, port).start()
    print(f"READY {port}", flush=True)
    await asyncio.Event().wait()


def main(make_handler: Callable[[str, int], Handler], addrs: Sequence[str]) -> None:
    """``make_handler(log path, port)`` gives the request handler of every address."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    try:
        asyncio.run(serve(make_handler, list(addrs), args.log, args.port))
    except KeyboardInterrupt:
        sys.exit(0)
