"""One scenario of the MCP end-to-end tests, driven by the real Python SDK.

Usage: python scenario.py SCENARIO < config.json

The config (from the Rust test) says how to reach toolgate and what the
scenario needs:
  {"mode": "legacy" | "auto",
   "stdio": {"command": ..., "args": [...], "cwd": ..., "env": {...}}
     or "http": {"url": ..., "token": "..." | null},
   ...scenario parameters}

Prints one JSON object of observations on stdout. The Rust test decides what
is right; this script only reports what the SDK saw. An exception the SDK
raises for one call is an observation (`raised`), not a crash.
"""

import base64
import contextlib
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


class Session:
    """A connected client plus what the server said on the side."""

    def __init__(self, config, roots=None):
        self.config = config
        self.roots = roots
        self.logs = []
        self.stderr_file = None

    async def list_roots(self, _context):
        return types.ListRootsResult(
            roots=[types.Root(uri=uri, name=f"root{i}") for i, uri in enumerate(self.roots)]
        )

    async def on_log(self, params):
        self.logs.append({"level": params.level, "data": params.data})

    @contextlib.asynccontextmanager
    async def connect(self):
        options = {
            "mode": self.config["mode"],
            "logging_callback": self.on_log,
            "log_level": "debug",
        }
        if self.roots is not None:
            options["list_roots_callback"] = self.list_roots
        if "http" in self.config:
            http = self.config["http"]
            headers = {}
            if http.get("token"):
                headers["Authorization"] = f"Bearer {http['token']}"
            client = create_mcp_http_client(headers=headers)
            async with client, Client(
                streamable_http_client(http["url"], http_client=client), **options
            ) as c:
                yield c
        else:
            stdio = self.config["stdio"]
            params = StdioServerParameters(
                command=stdio["command"],
                args=stdio["args"],
                env=stdio["env"],
                cwd=stdio["cwd"],
            )
            # The server's stderr, for the test to read.
            self.stderr_file = tempfile.TemporaryFile(mode="w+")
            async with Client(stdio_client(params, errlog=self.stderr_file), **options) as c:
                yield c

    def server_stderr(self):
        if self.stderr_file is None:
            return ""
        self.stderr_file.seek(0)
        return self.stderr_file.read()


def content_json(block):
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "image":
        return {"type": "image", "mime_type": block.mime_type, "bytes": base64.b64decode(block.data).hex()}
    return {"type": block.type}


async def call(client, name, args, **kwargs):
    """A tools/call as observations: the result, or what the SDK raised."""
    try:
        result = await client.call_tool(name, args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every failure is an observation
        return {"raised": {"type": type(e).__name__, "code": getattr(e, "code", None), "message": str(e)}}
    return {
        "is_error": bool(result.is_error),
        "content": [content_json(b) for b in result.content],
        "structured": result.structured_content,
    }


async def tools(config):
    async with Session(config).connect() as c:
        listed = await c.list_tools()
        return {
            "protocol_version": c.protocol_version,
            "tools": {
                t.name: {
                    "annotations": t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if t.annotations
                    else None,
                    "input_schema": t.input_schema,
                    "output_schema": t.output_schema,
                }
                for t in listed.tools
            },
        }


async def calls(config):
    """Every call of `config["calls"]` ([name, args] pairs) in one session."""
    async with Session(config).connect() as c:
        await c.list_tools()
        results = [await call(c, name, args) for name, args in config["calls"]]
        return {"protocol_version": c.protocol_version, "results": results}


async def progress(config):
    events = []

    async def on_progress(value, total, message):
        events.append({"progress": value, "message": message})

    async with Session(config).connect() as c:
        result = await call(c, "bash", {"command": config["command"]}, progress_callback=on_progress)
        at_result = len(events)
        # Anything still in flight would arrive now.
        await anyio.sleep(1.0)
        return {
            "protocol_version": c.protocol_version,
            "result": result,
            "events": events,
            "after_result": events[at_result:],
        }


def processes_with(needle):
    """Command lines of live processes that contain `needle`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        line = b" ".join(argv).decode(errors="replace").strip()
        if needle in line and pid != str(os.getpid()):
            # The sandbox's own command line is long; its head says enough.
            found.append(line if len(line) <= 120 else line[:120] + "…")
    return found


async def cancel(config):
    """Cancels a bash call while its command runs, then watches past the
    command's own end."""
    marker = config["marker"]
    needle = config["needle"]
    async with Session(config).connect() as c:
        started = anyio.Event()
        lines = []

        async def on_progress(value, total, message):
            lines.append(message)
            started.set()

        outcome = {}

        async def run():
            outcome["result"] = await call(c, "bash", {"command": config["command"]}, progress_callback=on_progress)

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            # Cancel a live process, not a queued call: wait for the command's
            # first line, then for its sleep to show up in /proc.
            with anyio.fail_after(60):
                await started.wait()
                while f"sleep {needle}" not in processes_with(needle):
                    await anyio.sleep(0.05)
            running_at_cancel = processes_with(needle)
            # Task cancellation is how an SDK user cancels; the SDK sends
            # notifications/cancelled for the abandoned request.
            group.cancel_scope.cancel()
        # Past the command's own end: a command that survived would be done.
        await anyio.sleep(config["watch"])
        survivors = processes_with(needle)
        # The session still works after a cancellation.
        after = await call(c, "ls", {"path": "."})
        return {
            "protocol_version": c.protocol_version,
            "result": outcome.get("result"),
            "lines_before_cancel": lines,
            "running_at_cancel": running_at_cancel,
            "survivors": survivors,
            "marker_exists": os.path.exists(marker),
            "call_after_cancel": after,
        }


async def roots(config):
    """Offers `config["roots"]`, then makes `config["calls"]`."""
    session = Session(config, roots=config["roots"])
    async with session.connect() as c:
        results = [await call(c, name, args) for name, args in config["calls"]]
        version = c.protocol_version
    return {
        "protocol_version": version,
        "results": results,
        "logs": session.logs,
        "stderr": session.server_stderr(),
    }


def raw_post(url, token):
    """A plain initialize POST, as any HTTP client would send it."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
    ).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return {"status": response.status}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode(errors="replace")}


async def unauthorized(config):
    """What a client without the right token gets."""
    observed = {"raw_without_token": raw_post(config["http"]["url"], None)}
    observed["raw_wrong_token"] = raw_post(config["http"]["url"], "wrong")
    try:
        with anyio.fail_after(30):
            async with Session(config).connect() as c:
                await c.list_tools()
        observed["sdk"] = "connected"
    except BaseException as e:  # noqa: BLE001 - ExceptionGroup from the task group, too
        observed["sdk"] = "raised"
        observed["sdk_error"] = repr(e)
    return observed


async def in_flight(config):
    """Starts a background process and a long bash call, tells the test, and
    waits to be killed with the server (or for the call to end)."""
    async with Session(config).connect() as c:
        started = await call(c, "process_start", {"command": config["background"]})
        print(json.dumps({"process_start": started}), flush=True)
        ready = anyio.Event()

        async def on_progress(value, total, message):
            ready.set()

        async def announce():
            await ready.wait()
            print(json.dumps({"bash_running": True}), flush=True)

        async with anyio.create_task_group() as group:
            group.start_soon(announce)
            result = await call(c, "bash", {"command": config["command"]}, progress_callback=on_progress)
            group.cancel_scope.cancel()
        return {"bash_result": result}


SCENARIOS = {
    "tools": tools,
    "calls": calls,
    "progress": progress,
    "cancel": cancel,
    "roots": roots,
    "unauthorized": unauthorized,
    "in_flight": in_flight,
}


def main():
    scenario = SCENARIOS[sys.argv[1]]
    config = json.load(sys.stdin)
    try:
        observed = anyio.run(scenario, config)
    except BaseException as e:  # noqa: BLE001 - report, the test decides
        observed = {"crashed": repr(e)}
    print(json.dumps(observed), flush=True)


if __name__ == "__main__":
    main()
