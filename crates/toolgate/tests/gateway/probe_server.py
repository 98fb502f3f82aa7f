"""A stdio MCP server with the standard library only, for the sandbox tests:
it runs under the system Python (/usr/bin/python3), which a sandbox shows
read-only like the rest of /usr, so nothing else has to be bound in.

Usage: python3 probe_server.py

Tools (each returns what happened as text, never raises):
  read_file {path}         the file's text, or the error
  write_file {path, text}  "wrote PATH", or the error
  fetch {url}              the HTTP status and first bytes, or the error
                           (through HTTP(S)_PROXY when the sandbox sets it)
  pid {}                   this process's pid
  sleep {seconds}          sleeps, with a progress notification every 0.1 s
                           when the call has a progressToken; a
                           notifications/cancelled for it stops it and is
                           logged as `cancelled ID` to $PROBE_LOG
  crash {}                 exits at once with status 3
"""

import json
import os
import sys
import threading
import time
import urllib.request

OUT = threading.Lock()
CANCELLED = {}

TOOLS = [
    {"name": "read_file", "description": "Reads a file.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]}},
    {"name": "write_file", "description": "Writes a file.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"},
                                                      "text": {"type": "string"}},
                     "required": ["path", "text"]}},
    {"name": "fetch", "description": "Fetches a URL.",
     "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}},
                     "required": ["url"]}},
    {"name": "pid", "description": "Its process id.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "sleep", "description": "Sleeps.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}},
                     "required": ["seconds"]}},
    {"name": "crash", "description": "Exits.",
     "inputSchema": {"type": "object", "properties": {}}},
]


def write(message):
    with OUT:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def log(line):
    path = os.environ.get("PROBE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def sleep(request):
    params = request["params"]
    token = (params.get("_meta") or {}).get("progressToken")
    stop = CANCELLED.setdefault(request["id"], threading.Event())
    deadline = time.monotonic() + float(params["arguments"]["seconds"])
    step = 0
    while time.monotonic() < deadline:
        if stop.wait(0.1):
            return
        step += 1
        if token is not None:
            write({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": step,
                              "message": "slept %d00 ms" % step}})
    write({"jsonrpc": "2.0", "id": request["id"],
           "result": {"content": [{"type": "text", "text": "slept"}], "isError": False}})


def run(name, args):
    try:
        if name == "read_file":
            with open(args["path"], encoding="utf-8") as f:
                return f.read()
        if name == "write_file":
            with open(args["path"], "w", encoding="utf-8") as f:
                f.write(args["text"])
            return "wrote " + args["path"]
        if name == "fetch":
            with urllib.request.urlopen(args["url"], timeout=10) as r:
                return "status %d: %s" % (r.status, r.read(200).decode("utf-8", "replace"))
        if name == "pid":
            return str(os.getpid())
        return "unknown tool " + name
    except Exception as e:  # noqa: BLE001 - the error is the answer
        return "error: %s: %s" % (type(e).__name__, e)


def answer(request):
    method = request.get("method")
    if method == "initialize":
        return {"protocolVersion": request["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "probe", "version": "1.0"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        params = request["params"]
        text = run(params["name"], params.get("arguments") or {})
        return {"content": [{"type": "text", "text": text}], "isError": False}
    if method == "ping":
        return {}
    return None


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("method") == "notifications/cancelled":
            cancelled = request["params"]["requestId"]
            # Logged on arrival: the input may end right after it, and the
            # sleeping thread (a daemon) ends with this loop.
            log("cancelled %s" % cancelled)
            CANCELLED.setdefault(cancelled, threading.Event()).set()
            continue
        if "id" not in request:
            continue
        name = (request.get("params") or {}).get("name")
        if request.get("method") == "tools/call" and name == "sleep":
            threading.Thread(target=sleep, args=(request,), daemon=True).start()
            continue
        if request.get("method") == "tools/call" and name == "crash":
            os._exit(3)
        result = answer(request)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": request["id"],
                     "error": {"code": -32601, "message": "method not found"}}
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        write(reply)


if __name__ == "__main__":
    main()
