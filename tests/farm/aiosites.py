"""Serve a loopback farm's handler on several addresses at one port (aiohttp): the ``main`` of
the farms that run as ``python -m tests.farm.<name> --log FILE [--port P]`` and print
``READY <port>`` (tests.farm.harness.farm_module starts them)."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
