"""Deferred tools as the official Python MCP SDK sees them.

Usage: python deferred.py < config.json

The config (from tests/deferred.rs):
  {"url": "http://127.0.0.1:PORT/mcp", "mode": "legacy" | "auto",
   "query": keywords for mcp_find_tools, "call": [name, args] of a tool the
   search should activate}

Lists the tools, searches, waits for the tool list to change (a
notifications/tools/list_changed through message_handler on 2025-11-25, a
subscriptions/listen event on 2026-07-28), lists again and calls the
activated tool. Prints one JSON object of what the SDK saw; the Rust test
decides what is right.
"""

import contextlib
import json
import sys

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def result_json(result):
    return {
        "is_error": bool(result.is_error),
        "text": "\n".join(b.text for b in result.content if b.type == "text"),
        "structured": result.structured_content,
    }


async def run(config):
    changes = []

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changes.append("notification")

    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(create_mcp_http_client())
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(config["url"], http_client=http),
                mode=config["mode"],
                message_handler=on_message,
            )
        )
        observed = {
            "protocol_version": client.protocol_version,
            "list_changed_capability": client.server_capabilities.tools.list_changed
            if client.server_capabilities.tools
            else None,
        }
        subscription = None
        if config["mode"] != "legacy":
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
            observed["honored"] = bool(subscription.honored.tools_list_changed)

            async def events():
                async for event in subscription:
                    changes.append(type(event).__name__)

            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(events)
        before = await client.list_tools()
        observed["before"] = [t.name for t in before.tools]
        found = await client.call_tool("mcp_find_tools", {"query": config["query"]})
        observed["found"] = result_json(found)
        with anyio.move_on_after(10):
            while not changes:
                await anyio.sleep(0.05)
        observed["changes"] = list(changes)
        after = await client.list_tools()
        observed["after"] = [t.name for t in after.tools]
        name, args = config["call"]
        observed["call"] = result_json(await client.call_tool(name, args))
        if subscription is not None:
            group.cancel_scope.cancel()
        return observed


def main():
    config = json.load(sys.stdin)
    try:
        observed = anyio.run(run, config)
    except BaseException as e:  # noqa: BLE001 - report, the test decides
        observed = {"crashed": repr(e)}
    print(json.dumps(observed), flush=True)


if __name__ == "__main__":
    main()
