#!/usr/bin/env bash
# A 100 MB download by a sandboxed curl, side by side in one hyperfine run:
#   host   `toolgate sandbox --network host`: the host's network, no proxy
#   proxy  `toolgate sandbox --network proxy`: through the stage-2 relay and
#          toolgate's egress proxy, with an allowlist naming the server
# Both pay the same sandbox start; the difference is the proxy path.
# Prints the means, the throughputs and the ratio.
# Needs hyperfine, curl and bubblewrap (apt-get install -y hyperfine curl bubblewrap).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-10}"
cargo build --release -q -p toolgate
toolgate="$PWD/target/release/toolgate"
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/root" "$work/home" "$work/www"
head -c 100000000 /dev/urandom > "$work/www/big"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$work/www" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
server=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
export HOME="$work/home"
cd "$work/root"
printf '[network]\nmode = "proxy"\nallow = ["localhost:%s"]\n' "$port" > toolgate.toml
fetch="curl -sS -o /dev/null --noproxy '' http://localhost:$port/big"
# Warm the probe cache, and check both paths really download.
"$toolgate" sandbox --network host -- sh -c "$fetch"
"$toolgate" sandbox --network proxy -- sh -c "curl -sS -o /dev/null --noproxy '' -x http://127.0.0.1:3128 http://localhost:$port/big" 2>/dev/null
hyperfine -N --warmup 2 --runs "$runs" --export-json "$work/result.json" \
    -n host "$toolgate sandbox --network host -- sh -c \"$fetch\"" \
    -n proxy "$toolgate sandbox --network proxy -- sh -c \"curl -sS -o /dev/null --noproxy '' -x http://127.0.0.1:3128 http://localhost:$port/big\"" >/dev/null
python3 - "$work/result.json" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
mb = 100
for name in ("host", "proxy"):
    print(f"{name:<6} {r[name]*1000:8.1f} ms  {mb / r[name]:7.1f} MB/s")
print(f"proxy throughput = {r['host'] / r['proxy']:.0%} of the host network's (same sandbox start on both sides)")
PY
