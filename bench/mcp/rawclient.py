"""A raw MCP client over stdio, Python stdlib only, the same for every server
that bench/mcp-servers.sh compares, so no SDK's overhead favours one side.

It speaks newline-delimited JSON-RPC 2.0 to the server's stdin and stdout:
`initialize` (protocolVersion 2025-11-25; the version the server answers is
kept and reported), `notifications/initialized`, `tools/list`, then timed
`tools/call` requests, one at a time. It measures, in this order:

  startup   spawn -> the initialize result received, over RUNS fresh
            processes after one untimed spawn (each closed right after;
            closing is not timed)
  calls     for each measurement of the workload, in one long-lived process:
            WARMUP untimed calls, then CALLS timed ones; a call is timed from
            just before its request is written to just after the last byte of
            its response line is read (the client's JSON decoding is not timed)
  memory    VmHWM (peak resident set) from /proc/<pid>/status of the process
            it spawned, after the whole workload, just before closing it

Every response is checked: a JSON-RPC error, `isError: true`, or text that
lacks the workload's markers fails the measurement, and its number is not
reported (a fast failure measures nothing). Failures are listed in "errors".

    python3 rawclient.py --workload WORKLOAD.json [--runs 20] [--calls 50] \
        [--cwd DIR] -- SERVER ARGV...

WORKLOAD.json: {"measurements": [{"key": "read_small", "tool": "read",
  "args": {...}, "calls": 50 (optional, else --calls), "warmup": 3,
  "expect": ["substring", ...], "min_chars": 0, "gap": 0.05 (seconds slept,
  untimed, before each call: an agent's pace),
  "expect_lines": {"regex": "\\.rs$", "count": 572}}]}; a measurement with
"method" instead of "tool" (e.g. "ping") times that bare request.
Prints one JSON object on stdout: {"protocol", "server_info", "tools",
"startup", "results": {key: {"median", "mean", "min", "max", "n", "chars"
(of text content), "bytes" (of the whole response)}},
"vmhwm_kb_initialized", "vmhwm_kb", "errors"}; times in seconds.
"""

import argparse
import json
import os
import re
import selectors
import signal
import statistics
import subprocess
import sys
import time

PROTOCOL = "2025-11-25"
FALLBACK_PROTOCOL = "2025-06-18"
# A request that takes longer than this is a hung server, not a slow one.
TIMEOUT_S = 120.0


class ServerError(Exception):
    """The server broke the protocol, exited or timed out."""


class Server:
    """One spawned server process and its newline-delimited JSON-RPC stream."""

    def __init__(self, argv: list[str], cwd: str | None, stderr_path: str):
        self.stderr_path = stderr_path
        self.stderr = open(stderr_path, "ab")
        try:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self.stderr, bufsize=0,
            )
        except OSError as e:
            self.stderr.close()
            raise ServerError(f"cannot start {argv[0]}: {e}")
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)
        self.buf = bytearray()
        self.scanned = 0  # bytes of buf already known to hold no newline
        self.next_id = 1
        self.last_bytes = 0  # the size of the last response line

    def send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        except BrokenPipeError:
            raise ServerError(f"the server closed its stdin (exit code {self.proc.poll()})"
                              f"{self.stderr_tail()}")

    def _line(self, deadline: float) -> bytes:
        while True:
            nl = self.buf.find(b"\n", self.scanned)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buf)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerError(f"no response within {TIMEOUT_S:.0f} s")
            if not self.sel.select(left):
                continue
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                try:
                    code = self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = "none yet"
                raise ServerError(f"the server closed stdout (exit code {code}){self.stderr_tail()}")
            self.buf += chunk

    def request(self, method: str, params: dict) -> tuple[dict, int]:
        """Send a request; return its response and the nanoseconds from the
        write to the end of the response line."""
        rid = self.next_id
        self.next_id += 1
        deadline = time.monotonic() + TIMEOUT_S
        t0 = time.perf_counter_ns()
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            raw = self._line(deadline)
            t1 = time.perf_counter_ns()
            if not raw.strip():
                continue
            try:
                msg = json.loads(raw)
            except ValueError:
                raise ServerError(f"not JSON on stdout: {raw[:200]!r}")
            if "method" in msg:
                if "id" in msg:
                    # A request from the server (roots/list, sampling...): we
                    # declared no client capabilities, so refuse it at once.
                    self.send({"jsonrpc": "2.0", "id": msg["id"],
                               "error": {"code": -32601, "message": "not supported"}})
                continue  # notifications: logging, progress, list changes
            if msg.get("id") != rid:
                continue
            self.last_bytes = len(raw)
            return msg, t1 - t0

    def initialize(self) -> dict:
        """A compliant server answers an unknown protocolVersion with its own;
        one that refuses it instead gets one more try with what it names as
        supported (or the previous revision), which later spawns then use."""
        global PROTOCOL
        for _ in range(2):
            params = {"protocolVersion": PROTOCOL, "capabilities": {},
                      "clientInfo": {"name": "toolgate-bench-rawclient", "version": "1"}}
            msg, _ = self.request("initialize", params)
            if "error" not in msg:
                return msg["result"]
            data = msg["error"].get("data")
            supported = data.get("supported") if isinstance(data, dict) else None
            PROTOCOL = supported[0] if supported else FALLBACK_PROTOCOL
        raise ServerError(f"initialize failed: {json.dumps(msg['error'])}")

    def stderr_tail(self) -> str:
        """The end of what the server wrote to stderr, to say why it died."""
        if self.stderr_path == os.devnull:
            return ""
        self.stderr.flush()
        with open(self.stderr_path, "rb") as f:
            f.seek(max(0, os.path.getsize(self.stderr_path) - 600))
            tail = f.read().decode(errors="replace").strip()
        return f"; its stderr ends: {tail}" if tail else ""

    def vmhwm_kb(self) -> int | None:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.sel.close()
        self.proc.stdout.close()
        self.stderr.close()


def result_text(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


def check(m: dict, msg: dict) -> tuple[str | None, int]:
    """Why the response to measurement `m` is not a plausible success (None
    if it is), and the length of its text."""
    if "error" in msg:
        return f"JSON-RPC error {json.dumps(msg['error'])[:300]}", 0
    result = msg.get("result") or {}
    text = result_text(result)
    if result.get("isError"):
        return f"isError: {text[:300]!r}", len(text)
    for marker in m.get("expect", []):
        if marker not in text:
            return f"the text ({len(text)} chars) lacks {marker!r}: {text[:200]!r}...", len(text)
    if len(text) < m.get("min_chars", 0):
        return f"the text has {len(text)} chars, fewer than {m['min_chars']}: {text[:200]!r}...", len(text)
    lines = m.get("expect_lines")
    if lines:
        rx = re.compile(lines["regex"])
        n = sum(1 for line in text.splitlines() if rx.search(line))
        if n != lines["count"]:
            return f"{n} lines match {lines['regex']!r}, not {lines['count']}: {text[:200]!r}...", len(text)
    return None, len(text)


def summary(ns: list[int]) -> dict:
    s = [x / 1e9 for x in ns]
    return {"median": statistics.median(s), "mean": statistics.fmean(s),
            "min": min(s), "max": max(s), "n": len(s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True, help="the workload, a JSON file")
    parser.add_argument("--runs", type=int, default=20, help="spawns timed for startup")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per measurement")
    parser.add_argument("--cwd", help="the server's working directory")
    parser.add_argument("--stderr", default=os.devnull, help="append the server's stderr here")
    parser.add_argument("server", nargs="+", help="the server's command line (after --)")
    opts = parser.parse_args()
    with open(opts.workload) as f:
        workload = json.load(f)
    out = {"argv": opts.server, "errors": [], "results": {}}

    def fail(what: str) -> None:
        out["errors"].append(what)
        print(f"FAILED {os.path.basename(opts.server[0])}: {what}", file=sys.stderr)

    # Startup: spawn -> initialize result, fresh process each time. The first
    # spawn is not timed: it fills the page cache and whatever the server
    # caches on disk on its first run (toolgate's sandbox probe, .pyc files).
    startup = []
    for run in range(1 + opts.runs):
        t0 = time.perf_counter_ns()
        try:
            server = Server(opts.server, opts.cwd, opts.stderr)
        except ServerError as e:
            fail(f"startup: {e}")
            break
        try:
            server.initialize()
            if run:
                startup.append(time.perf_counter_ns() - t0)
        except ServerError as e:
            fail(f"startup: {e}")
            break
        finally:
            server.close()
    if startup:
        out["startup"] = summary(startup)

    # The workload, in one long-lived process.
    try:
        server = Server(opts.server, opts.cwd, opts.stderr)
    except ServerError as e:
        fail(f"workload: {e}")
        print(json.dumps(out))
        return
    try:
        result = server.initialize()
        out["protocol"] = result.get("protocolVersion")
        out["server_info"] = result.get("serverInfo")
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed, _ = server.request("tools/list", {})
        tools = {t["name"] for t in (listed.get("result") or {}).get("tools", [])}
        out["tools"] = sorted(tools)
        out["vmhwm_kb_initialized"] = server.vmhwm_kb()
        for m in workload["measurements"]:
            key, tool = m["key"], m.get("tool")
            if tool is None:
                # A bare request (`ping`): the round trip with no tool behind it.
                method, params = m["method"], m.get("params", {})
            elif tool not in tools:
                fail(f"{key}: the server has no tool `{tool}`; it has: {', '.join(sorted(tools))}")
                continue
            else:
                method, params = "tools/call", {"name": tool, "arguments": m["args"]}
            calls, warmup = m.get("calls", opts.calls), m.get("warmup", 3)
            gap = m.get("gap", 0)
            times, chars = [], 0
            for i in range(warmup + calls):
                if gap:
                    time.sleep(gap)
                msg, ns = server.request(method, params)
                why, chars = check(m, msg)
                if why:
                    fail(f"{key}: {method} {json.dumps(params)[:200]}: {why}")
                    break
                if i >= warmup:
                    times.append(ns)
            else:
                out["results"][key] = summary(times) | {"chars": chars, "bytes": server.last_bytes}
        out["vmhwm_kb"] = server.vmhwm_kb()
    except ServerError as e:
        fail(f"workload: {e}")
    finally:
        server.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
