#!/usr/bin/env bash
# What a catalogue run adds over the same binary run by plain bubblewrap,
# whole processes, side by side in one run (hyperfine):
#   bare      jq --version
#   bwrap     a plain bubblewrap line with the same namespaces and system
#             mounts, running jq --version
#   sandbox   `toolgate sandbox -- jq --version`: toolgate's sandbox alone
#   catalog   `toolgate catalog run jq -- --version`: the CLI, the store
#             (SQLite), the execute gate (allow_safe: no person asked), the
#             sandbox, and the run's record in the store
# Prints the mean of each and the ratios to the plain bubblewrap line.
# Needs hyperfine, bubblewrap and jq (apt-get install -y hyperfine bubblewrap jq).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-100}"
for tool in hyperfine bwrap jq; do
    command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y hyperfine bubblewrap jq" >&2; exit 1; }
done
toolgate="${TOOLGATE:-}"
if [[ -z "$toolgate" ]]; then
    cargo build --release -q -p toolgate
    toolgate="$PWD/target/release/toolgate"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root" "$work/home"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config"

version="$(dpkg-query --show --showformat='${Version}' jq)"
cat >"$work/jq.toml" <<TOML
id = "jq"
description = "Command-line JSON processor"
source_kind = "apt-package"
apt_package = "jq"
apt_version = "$version"
risk = "low"
[[bins]]
name = "jq"
bin = "/usr/bin/jq"
health_check_args = ["--version"]
TOML
cd "$work/root"
"$toolgate" catalog add "$work/jq.toml" >/dev/null
"$toolgate" catalog policy --install allow_all --execute allow_safe >/dev/null
"$toolgate" catalog install jq >/dev/null 2>&1
[[ "$("$toolgate" catalog run jq -- --version)" == jq-* ]] || { echo "the catalogue run failed" >&2; exit 1; }

system=()
for p in /usr /etc /opt /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [ -L "$p" ]; then system+=(--symlink "$(readlink "$p")" "$p")
    elif [ -d "$p" ]; then system+=(--ro-bind "$p" "$p"); fi
done
bwrap_cmd="bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net --die-with-parent --new-session --cap-drop ALL --clearenv ${system[*]} --proc /proc --dev /dev --tmpfs /tmp --bind $work/root $work/root --chdir $work/root -- /usr/bin/jq --version"

hyperfine -N --warmup 10 --runs "$runs" --export-json "$work/result.json" \
    -n bare "/usr/bin/jq --version" \
    -n bwrap "$bwrap_cmd" \
    -n sandbox "$toolgate sandbox -- /usr/bin/jq --version" \
    -n catalog "$toolgate catalog run jq -- --version" >/dev/null

python3 - "$work/result.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["bwrap"]["mean"]
print("| run | mean | median | vs plain bubblewrap |")
print("|---|---:|---:|---:|")
for name in ["bare", "bwrap", "sandbox", "catalog"]:
    r = results[name]
    print(f"| {name} | {r['mean'] * 1000:.1f} ms | {r['median'] * 1000:.1f} ms | {r['mean'] / base:.2f}x |")
added = results["catalog"]["mean"] - results["sandbox"]["mean"]
print(f"\nthe catalogue's own share (gate, store, record) over toolgate's sandbox: {added * 1000:+.1f} ms")
PY
