"""Serve an ASGI app on a free loopback port and announce it on stdout.

Used by the HTTP peer `oauth.py`; not a peer itself.

The test that spawns a peer reads its stdout until a line starting with
`listening `, so stdout carries nothing but the announcement lines: uvicorn's
access log (which it writes to stdout by default) is off, and every other log
goes to stderr.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp


def serve(app: ASGIApp, announce: Callable[[int], list[str]]) -> None:
    """Serve `app` on 127.0.0.1:<free port> until the process is killed.

    `announce(port)` returns the lines to print once uvicorn has started; the
    last of them should be the `listening http://...` line. They are printed
    only after startup (lifespan included), so a client that connects as soon
    as it reads them is not refused.
    """
    # Binding here, not in uvicorn, is how we learn the port before printing:
    # uvicorn only logs it, and stdout must stay clean.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]

    config = uvicorn.Config(
        app,
        log_config=None,  # no stdout handlers; warnings reach stderr via logging's last resort
        access_log=False,
        lifespan="auto",
        # Open SSE streams would otherwise hold a SIGTERM'd peer open forever.
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if serving.done():
                await serving  # startup failed: re-raise why
                sys.exit("the server stopped during startup")
            await asyncio.sleep(0.01)
        for line in announce(port):
            print(line, flush=True)
        await serving

    asyncio.run(main())
