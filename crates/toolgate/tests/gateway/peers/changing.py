"""A stdio MCP server whose tools are whatever a JSON file says, re-read on every tools/list.

Usage:
    python changing.py --tools FILE

FILE holds a JSON list of tool definitions as they go on the wire:
    [{"name": "add", "description": "Adds two numbers.", "inputSchema": {"type": "object", ...}}, ...]

A test rewrites FILE between two toolgate runs (or during one) to play a
"rug pull": a server whose tool descriptions change after they were approved.
The definitions are served as written, without validation beyond what the SDK
does to every tools/list result, so a test can also serve odd ones.

Calling any tool, listed or not, returns the text
    called NAME with ARGS_JSON
where ARGS_JSON is `json.dumps(arguments, sort_keys=True)`, e.g.
`called add with {"a": 1, "b": 2}` (`{}` when the call has no arguments).

While connected it polls FILE every 0.2 s and sends
notifications/tools/list_changed when its mtime, size or inode changes (so a
rewrite by rename counts too). It advertises `tools.listChanged` accordingly.
This is the handshake-era (initialize) behaviour; a 2026-07-28 client would
need subscriptions/listen, which this peer does not serve.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

POLL_SECONDS = 0.2


def file_version(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", required=True, type=Path, metavar="FILE")
    args = parser.parse_args()
    # Set once the client has finished the handshake: notifications sent
    # before notifications/initialized would arrive ahead of the session.
    clients: list[ServerSession] = []

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        try:
            tools = json.loads(args.tools.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise MCPError(types.INTERNAL_ERROR, f"cannot read the tools file {args.tools}: {err}") from err
        # A dict result goes on the wire as is (after the SDK's result check).
        return {"tools": tools}

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = f"called {params.name} with {json.dumps(params.arguments or {}, sort_keys=True)}"
        return types.CallToolResult(content=[types.TextContent(text=text)])

    async def initialized(ctx: Any, params: types.NotificationParams) -> None:
        clients.append(ctx.session)

    async def watch() -> None:
        seen = file_version(args.tools)
        while True:
            await anyio.sleep(POLL_SECONDS)
            now = file_version(args.tools)
            if now == seen:
                continue
            seen = now
            # Before the handshake there is nobody to tell; the client's
            # first tools/list reads the file anyway.
            if clients:
                await clients[0].send_tool_list_changed()

    server = Server("changing-peer", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))

    async def run() -> None:
        async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            await server.run(read, write, options)
            tasks.cancel_scope.cancel()  # stdin closed: stop watching too

    anyio.run(run)


if __name__ == "__main__":
    main()
