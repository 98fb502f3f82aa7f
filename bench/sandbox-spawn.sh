#!/usr/bin/env bash
# Whole-process cost of one sandboxed `sh -c true`, side by side in one run:
#   bare            sh -c true
#   bwrap           a plain bubblewrap with the same namespaces and mounts
#   toolgate        `toolgate sandbox -- sh -c true`: the CLI process, config,
#                   the cached probe, the plan, bubblewrap and stage 2
#                   (no_new_privs, capabilities, Landlock, seccomp)
#   baseline        the same through BASELINE, another toolgate binary (e.g.
#                   an older release build), when set: old and new side by
#                   side in one run
# Prints the mean of each and the ratios to the plain bubblewrap spawn.
# Then the same for a command that creates 2,000 files (each creation is
# performed by stage 2's keeper where it guards absent protected names).
# RUNS runs of `true` (default 200), CREATE_RUNS of the loop (default 20).
# Needs hyperfine and bubblewrap (apt-get install -y hyperfine bubblewrap).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-200}"
# The 2,000-file loop takes 0.2 to 2.5 s a run: fewer of them (CREATE_RUNS).
create_runs="${CREATE_RUNS:-20}"

cargo build --release -q -p toolgate
toolgate="$PWD/target/release/toolgate"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root" "$work/home"
export HOME="$work/home"

system=()
for p in /usr /etc /opt /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [ -L "$p" ]; then system+=(--symlink "$(readlink "$p")" "$p")
    elif [ -d "$p" ]; then system+=(--ro-bind "$p" "$p"); fi
done
bwrap_cmd="bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net --die-with-parent --new-session --cap-drop ALL --clearenv ${system[*]} --proc /proc --dev /dev --tmpfs /tmp --bind $work/root $work/root --chdir $work/root -- sh -c true"

# Warm the probe cache the way a first run would.
(cd "$work/root" && "$toolgate" sandbox -- true)
names=(bare bwrap toolgate)
if [[ -n "${BASELINE:-}" ]]; then
    (cd "$work/root" && "$BASELINE" sandbox -- true)
    names+=(baseline)
fi

cd "$work/root"
create='i=0; while [ $i -lt 2000 ]; do : > f$i; i=$((i+1)); done; rm -f f*'
for workload in true create; do
    script="true" count="$runs" warmup=10
    [[ "$workload" == create ]] && script="$create" count="$create_runs" warmup=2
    echo "sh -c '$script':"
    baseline=()
    if [[ -n "${BASELINE:-}" ]]; then
        baseline=(-n baseline "$BASELINE sandbox -- sh -c '$script'")
    fi
    hyperfine -N --warmup "$warmup" --runs "$count" --export-json "$work/result.json" \
        -n bare "sh -c '$script'" \
        -n bwrap "${bwrap_cmd%sh -c true}sh -c '$script'" \
        -n toolgate "$toolgate sandbox -- sh -c '$script'" "${baseline[@]}" >/dev/null

    python3 - "$work/result.json" "${names[@]}" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["bwrap"]["mean"]
print(f"{'':10} {'mean':>10} {'stddev':>10} {'vs bwrap':>9}")
for name in sys.argv[2:]:
    r = results[name]
    print(f"{name:10} {r['mean']*1e3:8.2f}ms {r['stddev']*1e3:8.2f}ms {r['mean']/base:8.2f}x")
PY
done
