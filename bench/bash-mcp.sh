#!/usr/bin/env bash
# The `bash` tool against the reference Python MCP shell server
# (PyPI mcp-shell-server, tool `shell_execute`), side by side in one run,
# for the cheapest command there is, `true`:
#
# Per call, in one long-running process (the agent's steady state):
#   python-mcp     mcp-shell-server over stdio, started and initialized once,
#                  then N sequential tools/call {"command": ["true"]} from the
#                  official `mcp` Python SDK client (bench/mcp/client.py):
#                  JSON-RPC both ways, the server's checks, a direct exec of
#                  `true` (it refuses shells) WITHOUT any sandbox
#   toolgate       the criterion bench crates/toolgate-tools/benches/bash.rs:
#                  Executor::call("bash", {"command": "true"}) in process
#                  (validation, policy with the tree-sitter parse, a sandboxed
#                  `bash -c true`, output shaping), no MCP transport yet
#                  (toolgate has no MCP server), and its parts from the same run
# Whole processes (start to exit, hyperfine):
#   toolgate call bash '{"command":"true"}'   the CLI: config, workspace,
#                  pipeline, sandbox; one call per process
#   bash -c true   the floor
#   (and the Python server's start-up to initialized, measured by the client)
#
# Prints the means and the ratios to the Python server's per-call latency.
# Needs python3 (venv, pip), hyperfine and bubblewrap
# (apt-get install -y hyperfine bubblewrap); the network to PyPI once.
# RUNS (hyperfine runs, default 100), CALLS (MCP calls, default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
runs="${RUNS:-100}"
calls="${CALLS:-300}"
command -v hyperfine >/dev/null && command -v bwrap >/dev/null ||
    apt-get install -y hyperfine bubblewrap >/dev/null
target="${CARGO_TARGET_DIR:-$repo/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project" "$work/home"

echo "== installing mcp-shell-server and the mcp SDK into $work/venv" >&2
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check mcp-shell-server mcp
versions=$("$work/venv/bin/python" -c 'from importlib.metadata import version as v; print("mcp-shell-server", v("mcp-shell-server") + ", mcp", v("mcp"))')

echo "== building toolgate and toolgate-stage2 (release)" >&2
cargo build --release -q -p toolgate --bin toolgate --bin toolgate-stage2
toolgate="$target/release/toolgate"

echo "== criterion: cargo bench -p toolgate-tools --bench bash" >&2
cargo bench -q -p toolgate-tools --bench bash >"$work/criterion.log" 2>&1 ||
    { cat "$work/criterion.log" >&2; exit 1; }

echo "== python MCP server: $calls calls" >&2
(cd "$work/project" && HOME="$work/home" ALLOW_COMMANDS=true \
    "$work/venv/bin/python" "$repo/bench/mcp/client.py" \
    --tool shell_execute --args '{"command": ["true"]}' --n "$calls" \
    -- "$work/venv/bin/mcp-shell-server") >"$work/python.json"

echo "== hyperfine: whole processes, $runs runs" >&2
(
    cd "$work/project"
    export HOME="$work/home"
    "$toolgate" call bash '{"command":"true"}' >/dev/null # warm the probe cache
    hyperfine -N --warmup 10 --runs "$runs" --export-json "$work/hyperfine.json" \
        -n "toolgate call bash" "$toolgate call bash '{\"command\":\"true\"}'" \
        -n "bash -c true" "bash -c true" >/dev/null
)

python3 - "$work" "$target/criterion" "$versions" "$calls" <<'PY'
import json, os, pathlib, sys
work, criterion, versions, calls = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
py = json.loads((work / "python.json").read_text())
est = {}
for bench in criterion.glob("*/*/new/benchmark.json"):
    meta = json.loads(bench.read_text())
    if meta.get("group_id") == "bash true":
        mean = json.loads((bench.parent / "estimates.json").read_text())["mean"]["point_estimate"]
        est[meta["function_id"]] = mean / 1e9
hf = {r["command"]: r["mean"] for r in json.loads((work / "hyperfine.json").read_text())["results"]}
base = py["mean"]
rows = [
    ("PER CALL, inside one long-running process", None, None),
    (f"python mcp-shell-server, MCP stdio, exec `true` NO SANDBOX ({calls} calls)", py["mean"], "client.py"),
    ("toolgate bash tool `true`, in process, sandboxed, no MCP transport", est.get("bash tool true"), "criterion"),
    ("  its parts: Sandbox::run sh -c true (bwrap + stage 2)", est.get("sandbox sh -c true"), "criterion"),
    ("  floor: bash -c true, no sandbox (tokio::process)", est.get("no sandbox bash -c true"), "criterion"),
    ("  floor: sh -c true, no sandbox", est.get("no sandbox sh -c true"), "criterion"),
    ("  floor: true exec'd directly, no sandbox", est.get("no sandbox true"), "criterion"),
    ("WHOLE PROCESSES, start to exit, one call each", None, None),
    ("toolgate call bash '{\"command\":\"true\"}' (sandboxed)", hf["toolgate call bash"], "hyperfine"),
    ("bash -c true, no sandbox", hf["bash -c true"], "hyperfine"),
    ("python mcp-shell-server start-up to initialized (no call)", py["server_start"], "client.py, once"),
]
print(f"{versions}; ratios are to the Python MCP server's mean per-call latency")
print(f"{os.cpu_count()} cores, load average now {os.getloadavg()[0]:.2f} (other work on the machine skews every number)")
print(f"{'':76} {'mean':>10} {'vs python':>10}  source")
for name, mean, source in rows:
    if source is None:
        print(name)
    elif mean is None:
        print(f"{name:76} {'missing':>10}")
    else:
        print(f"{name:76} {mean * 1e3:8.2f}ms {mean / base:9.2f}x  {source}")
print("The Python server runs commands WITHOUT a sandbox (and refuses shells, so it execs `true`);")
print("toolgate runs `bash -c true` in bubblewrap + stage 2 (seccomp, Landlock). The Python number")
print("includes the MCP JSON-RPC round trip over stdio; toolgate's in-process number does not.")
PY
