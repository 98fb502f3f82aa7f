#!/usr/bin/env bash
# grep: toolgate against ripgrep, whole processes, side by side in one
# hyperfine run per pattern, on the tree of bench/gen-tree.py (4000 files,
# about 36 MB, .gitignore'd directories, a few binaries):
#   rg            rg -n PATTERN: every matching line, written to a pipe
#   toolgate      toolgate call grep: the whole CLI process (config, workspace,
#                 the pipeline, the parallel search) giving the first 100
#                 matching lines, sorted by path, with exact totals
#   toolgate-all  the same with every matching line (limit 10000000)
# Prints the mean of each and the ratio to rg.
# Needs hyperfine and ripgrep (apt-get install -y hyperfine ripgrep).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-15}"
command -v hyperfine >/dev/null && command -v rg >/dev/null || apt-get install -y hyperfine ripgrep >/dev/null

cargo build --release -q -p toolgate
toolgate="$PWD/target/release/toolgate"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 bench/gen-tree.py "$work/tree" >/dev/null
mkdir -p "$work/home"
export HOME="$work/home"
cd "$work/tree"
"$toolgate" call grep '{"pattern": "warm"}' >/dev/null || true

run() { # name, rg flags, pattern, extra JSON fields
    local name="$1" flags="$2" pattern="$3" extra="$4"
    local args all
    args=$(python3 -c 'import json,sys; d={"pattern": sys.argv[1]}; d.update(json.loads(sys.argv[2])); print(json.dumps(d))' "$pattern" "$extra")
    all=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["limit"]=10000000; print(json.dumps(d))' "$args")
    hyperfine -N --output=pipe --warmup 3 --runs "$runs" --export-json "$work/$name.json" \
        -n rg "rg -n $flags '$pattern' ." \
        -n toolgate "$toolgate call grep '$args'" \
        -n toolgate-all "$toolgate call grep '$all'" >/dev/null
    python3 - "$work/$name.json" "$name" <<'PY'
import json, sys
r = {x["command"]: x["mean"] * 1000 for x in json.load(open(sys.argv[1]))["results"]}
base = r["rg"]
print(f"{sys.argv[2]:<18}" + "".join(f"  {k} {v:7.1f} ms ({v / base:.2f}x)" for k, v in r.items()))
PY
}
echo "matches: $(rg -n needle_XYZZY_rare . | wc -l) rare, $(rg -n '(self|value) [a-z]+t\b' . | wc -l) many, $(rg -n -i todo . | wc -l) case-insensitive"
run literal-few "" needle_XYZZY_rare '{}'
run regex-many "" '(self|value) [a-z]+t\b' '{}'
run case-insensitive "-i" todo '{"case": "insensitive"}'
