"""A stdio MCP server with many deterministic tools, for listing, search and size tests.

Usage:
    python many_tools.py [--count N] [--huge-schema]

Serves N tools (default 100) named tool_000, tool_001, ... (at least three
digits). Tool i is described as
    "tool_017: merges git commits into yaml"
with the verb, the subject and the format taken from three word lists whose
lengths are pairwise coprime (13, 16, 11), so the first 2288 tools all get
different word combinations and a small N still spreads over every subject.
Subjects are searchable words: weather, invoice, calendar, git, database, ...

Each tool takes one string `q` and returns the text `NAME: q`, e.g.
`tool_017: hello`. With --huge-schema every input schema also describes a
nine optional parameters, about 2 KB of JSON per tool, so measurements of
schema size have something to measure (`q` stays the only required one).

The same N always yields byte-identical tools/list results.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

VERBS = ["converts", "summarizes", "validates", "merges", "exports", "imports", "translates",
         "archives", "filters", "ranks", "encrypts", "renders", "schedules"]  # 13
SUBJECTS = ["weather reports", "invoices", "calendar events", "git commits", "database rows",
            "email threads", "support tickets", "shipping labels", "payroll records", "sensor readings",
            "chat transcripts", "recipe cards", "flight bookings", "audit logs", "music playlists",
            "medical appointments"]  # 16
FORMATS = ["csv", "json", "pdf", "markdown", "xml", "yaml", "html", "parquet", "sql", "plain text",
           "spreadsheets"]  # 11


def description(name: str, i: int) -> str:
    return f"{name}: {VERBS[i % 13]} {SUBJECTS[i % 16]} into {FORMATS[i % 11]}"


def input_schema(i: int, huge: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {"q": {"type": "string", "description": "What to work on."}}
    if huge:
        for k in range(9):
            subject = SUBJECTS[(i + k) % 16]
            properties[f"option_{k:02d}"] = {
                "type": "string",
                "description": f"Optional setting {k} for {subject}: how the {subject} are selected, "
                               f"grouped and written when exported as {FORMATS[(i + k) % 11]}.",
                "enum": ["default", "strict", "lenient", "verbose"],
            }
    return {"type": "object", "properties": properties, "required": ["q"], "additionalProperties": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, metavar="N")
    parser.add_argument("--huge-schema", action="store_true", help="~2 KB of input schema per tool")
    args = parser.parse_args()

    tools = []
    for i in range(args.count):
        name = f"tool_{i:03d}"
        tools.append(types.Tool(name=name, description=description(name, i),
                                input_schema=input_schema(i, args.huge_schema)))
    names = {tool.name for tool in tools}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            return types.CallToolResult(content=[types.TextContent(text=f"no tool {params.name}")], is_error=True)
        q = (params.arguments or {}).get("q", "")
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name}: {q}")])

    server = Server("many-tools-peer", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
