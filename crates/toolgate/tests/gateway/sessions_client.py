"""Opens SESSIONS sessions to a Streamable HTTP MCP server one after the
other, each calling TOOL once, and prints one JSON object: the texts seen.

Usage: python sessions_client.py URL TOOL SESSIONS
"""

import json
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url, tool, sessions):
    texts = []
    for i in range(sessions):
        async with Client(streamable_http_client(url), mode="legacy") as client:
            result = await client.call_tool(tool, {"message": f"s{i}"})
            texts.append("\n".join(b.text for b in result.content if b.type == "text"))
    print(json.dumps({"texts": texts}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
