"""Opens SESSIONS sessions to a Streamable HTTP MCP server one after the
other, each calling TOOL once and closing, and prints one JSON object: the
texts seen. The first SDK_SESSIONS go through the Python SDK's client; the
rest through a plain HTTP client of the standard library (initialize,
initialized, tools/call, DELETE), so that a thousand connect and
disconnect cycles take seconds, not minutes.

Usage: python sessions_client.py URL TOOL SESSIONS [SDK_SESSIONS]
"""

import json
import sys
import urllib.request

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(url, message, session=None):
    headers = dict(HEADERS)
    if session:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read().decode()
        session = response.headers.get("Mcp-Session-Id") or session
    # A JSON body, or server-sent events whose data lines carry the answer.
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:]), session
    return (json.loads(body) if body.strip() else None), session


def raw_session(url, tool, i):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "sessions", "version": "0"}}}
    _, session = post(url, init)
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": {"message": f"s{i}"}}}
    answer, _ = post(url, call, session)
    request = urllib.request.Request(url, headers={"Mcp-Session-Id": session}, method="DELETE")
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError:
        pass
    return "\n".join(b["text"] for b in answer["result"]["content"] if b["type"] == "text")


async def main(url, tool, sessions, sdk_sessions):
    texts = []
    for i in range(min(sessions, sdk_sessions)):
        async with Client(streamable_http_client(url), mode="legacy") as client:
            result = await client.call_tool(tool, {"message": f"s{i}"})
            texts.append("\n".join(b.text for b in result.content if b.type == "text"))
    for i in range(len(texts), sessions):
        texts.append(raw_session(url, tool, i))
    print(json.dumps({"texts": texts}))


if __name__ == "__main__":
    sdk = int(sys.argv[4]) if len(sys.argv) > 4 else int(sys.argv[3])
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), sdk)
