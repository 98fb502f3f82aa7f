"""Per-call latency of an MCP shell server's tool, over stdio, with the
official `mcp` Python SDK: starts the server once, initializes, warms up,
then times N sequential tools/call requests and prints one JSON object
(seconds): {"server_start": ..., "mean": ..., "median": ..., "stddev": ...,
"min": ..., "n": ...}.

    python client.py --tool shell_execute --args '{"command": ["true"]}' \
        --n 200 -- mcp-shell-server
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def measure(server: list[str], tool: str, args: dict, n: int, warmup: int) -> dict:
    params = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
    # The server logs every call to stderr; keep it out of the report.
    with open(os.devnull, "w") as errlog:
        started = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                if tool not in tools:
                    sys.exit(f"the server has no tool `{tool}`; it has: {', '.join(sorted(tools))}")
                server_start = time.perf_counter() - started
                times = []
                for i in range(warmup + n):
                    t0 = time.perf_counter()
                    result = await session.call_tool(tool, args)
                    elapsed = time.perf_counter() - t0
                    if result.isError:
                        text = " ".join(getattr(c, "text", "") for c in result.content)
                        sys.exit(f"`{tool}` {json.dumps(args)} failed: {text}")
                    if i >= warmup:
                        times.append(elapsed)
    return {
        "server_start": server_start,
        "mean": statistics.fmean(times),
        "median": statistics.median(times),
        "stddev": statistics.stdev(times) if len(times) > 1 else 0.0,
        "min": min(times),
        "n": len(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", required=True, help="the tool to call")
    parser.add_argument("--args", required=True, help="its arguments, a JSON object")
    parser.add_argument("--n", type=int, default=200, help="timed calls")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    parser.add_argument("server", nargs="+", help="the server's command line (after --)")
    opts = parser.parse_args()
    result = asyncio.run(measure(opts.server, opts.tool, json.loads(opts.args), opts.n, opts.warmup))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
