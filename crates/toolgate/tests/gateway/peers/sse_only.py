"""An MCP server that speaks only the deprecated HTTP+SSE transport (2024-11-05).

Usage:
    python sse_only.py

Prints `listening http://127.0.0.1:PORT/sse` once it accepts connections and
serves until killed.

The transport: `GET /sse` opens the event stream, whose first event
(`endpoint`) names `/messages/?session_id=...`; the client POSTs each JSON-RPC
message there and reads the answers from the stream. Nothing else is served,
so a Streamable HTTP client POSTing to `/sse` gets `405 Method Not Allowed`
(the usual sign of a server that predates Streamable HTTP) and `/mcp` is 404.

Tools:
    echo(message: str) -> the message, as text
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from _listen import serve
from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

ECHO = types.Tool(
    name="echo",
    description="Returns the message it is given.",
    input_schema={
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name != "echo":
        return types.CallToolResult(content=[types.TextContent(text=f"no tool {params.name}")], is_error=True)
    message = (params.arguments or {}).get("message", "")
    return types.CallToolResult(content=[types.TextContent(text=str(message))])


server = Server("sse-only-peer", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
sse = SseServerTransport("/messages/")


async def event_stream(request: Request) -> Response:
    # One MCP connection per GET: it lives exactly as long as the stream.
    async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
        await server.run(read, write, server.create_initialization_options())
    # The stream has already been answered; starlette still wants a Response.
    return Response()


app = Starlette(
    routes=[
        Route("/sse", endpoint=event_stream, methods=["GET"]),
        Mount("/messages/", app=sse.handle_post_message),
    ]
)

if __name__ == "__main__":
    serve(app, lambda port: [f"listening http://127.0.0.1:{port}/sse"])
