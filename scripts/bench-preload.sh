#!/usr/bin/env bash
# Unmodified applications on SlimTCP (make bench): Debian's iperf3 and redis-benchmark/redis-server
# through the preload library (libslimtcp_preload.so -> slimtcp-vhost -> TAP -> the kernel's
# peer), side by side in one run with the same tools over the kernel alone (two namespaces
# joined by a veth pair, default offloads):
#   -> target/bench/preload.md, preload.json.
# Each row is one run of DURATION seconds (iperf3) or REQUESTS requests (redis-benchmark).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=target/bench
mkdir -p "$OUT"
DURATION=${DURATION:-5}
REQUESTS=${REQUESTS:-100000}
for tool in iperf3 redis-server redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "bench-preload: $tool missing (scripts/install-deps.sh)" >&2; exit 0; }
done
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build --release -p slimtcp-vhost -p slimtcp-preload >&2
LIB=$PWD/target/release/libslimtcp_preload.so
BACKEND=$PWD/target/release/slimtcp-vhost

tag=$$
NS_A=pbka$tag NS_B=pbkb$tag NS_S=pbks$tag
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$NS_A" "$NS_B" "$NS_S"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# The kernel path: A (clients) -- veth -- B (servers).
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "va$tag" netns "$NS_A" type veth peer name "vb$tag" netns "$NS_B"
ip -n "$NS_A" addr add 10.88.0.1/24 dev "va$tag"
ip -n "$NS_B" addr add 10.88.0.2/24 dev "vb$tag"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "va$tag" up
ip -n "$NS_B" link set "vb$tag" up

# The SlimTCP path: the backend's tenant (10.89.0.2) on a TAP whose kernel side is 10.89.0.1.
ip netns add "$NS_S"
ip -n "$NS_S" link set lo up
ip netns exec "$NS_S" "$BACKEND" --socket "$tmp/t.sock" --tap "pbt$tag" --ip 10.89.0.2/24 \
    --host-ip 10.89.0.1/24 2>"$tmp/backend.log" &
pids+=($!)
for _ in $(seq 100); do [[ -S $tmp/t.sock ]] && break; sleep 0.1; done
[[ -S $tmp/t.sock ]] || { cat "$tmp/backend.log" >&2; exit 1; }
pre() { ip netns exec "$NS_S" env LD_PRELOAD="$LIB" SLIMTCP_DEVICE="vhost-user:$tmp/t.sock" "$@"; }
# A server in the background, its pid in $! being the server's own (ip and env exec it).
pre_bg() {
    ip netns exec "$NS_S" env LD_PRELOAD="$LIB" SLIMTCP_DEVICE="vhost-user:$tmp/t.sock" "$@" >/dev/null 2>&1 &
    pids+=($!)
}
kernel_bg() {
    ip netns exec "$@" >/dev/null 2>&1 &
    pids+=($!)
}

wait_port() { # ns port
    for _ in $(seq 100); do
        [[ -n $(ip netns exec "$1" ss -Htln "sport = :$2") ]] && return 0
        sleep 0.1
    done
    echo "bench-preload: nothing listens on $2 in $1" >&2
    exit 1
}

# iperf3 row: name, server ns, server prefix ("pre" or ""), client ns, client prefix, target, extra.
iperf() {
    local name=$1 sns=$2 spre=$3 cns=$4 cpre=$5 target=$6
    shift 6
    if [[ $spre == pre ]]; then
        pre_bg iperf3 -s -4 -1
        sleep 1.5
    else
        kernel_bg "$sns" iperf3 -s -4 -1 -B "$target"
        wait_port "$sns" 5201
    fi
    local json
    if [[ $cpre == pre ]]; then
        json=$(pre iperf3 -c "$target" -t "$DURATION" -J "$@" 2>/dev/null)
    else
        json=$(ip netns exec "$cns" iperf3 -c "$target" -t "$DURATION" -J "$@")
    fi
    wait "${pids[-1]}" 2>/dev/null || true
    echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sys.argv[1], d["end"]["sum_received"]["bits_per_second"] / 1e9)' "$name" \
        >>"$tmp/rows"
}

# redis row: name, server ns, server prefix, client ns, client prefix, target.
redis() {
    local name=$1 sns=$2 spre=$3 cns=$4 cpre=$5 target=$6
    local args=(redis-server --port 6379 --bind "$target" --protected-mode no --save "" --appendonly no)
    if [[ $spre == pre ]]; then
        args[4]=0.0.0.0
        pre_bg "${args[@]}"
    else
        kernel_bg "$sns" "${args[@]}"
    fi
    local spid=${pids[-1]}
    if [[ $spre == pre ]]; then sleep 1.5; else wait_port "$sns" 6379; fi
    local bench=(redis-benchmark -h "$target" -p 6379 -c 50 -n "$REQUESTS" -t set,get --csv)
    local csv
    if [[ $cpre == pre ]]; then csv=$(pre "${bench[@]}" 2>/dev/null); else csv=$(ip netns exec "$cns" "${bench[@]}"); fi
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    echo "$csv" | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    if row and row[0] in ("SET", "GET"):
        print(sys.argv[1] + "-" + row[0].lower(), float(row[1]))' "$name" >>"$tmp/rows"
}

: >"$tmp/rows"
echo "== unmodified apps: kernel (veth) vs preloaded (SlimTCP)" >&2
iperf kernel-iperf3-1 "$NS_B" "" "$NS_A" "" 10.88.0.2
iperf preload-client-iperf3-1 "$NS_S" "" "$NS_S" pre 10.89.0.1
iperf preload-server-iperf3-1 "$NS_S" pre "$NS_S" "" 10.89.0.2
iperf kernel-iperf3-4 "$NS_B" "" "$NS_A" "" 10.88.0.2 -P 4
iperf preload-client-iperf3-4 "$NS_S" "" "$NS_S" pre 10.89.0.1 -P 4
redis kernel-redis "$NS_B" "" "$NS_A" "" 10.88.0.2
redis preload-server-redis "$NS_S" pre "$NS_S" "" 10.89.0.2
redis preload-client-redis "$NS_S" "" "$NS_S" pre 10.89.0.1
cat "$tmp/rows" >&2

python3 - "$tmp/rows" "$OUT" "$DURATION" "$REQUESTS" <<'PY'
import datetime, json, sys
rows = dict((k, float(v)) for k, v in (l.split() for l in open(sys.argv[1])))
out, duration, requests = sys.argv[2], sys.argv[3], sys.argv[4]
table = [
    ("iperf3 TCP, 1 stream, Gbit/s", "kernel-iperf3-1", [("preloaded client", "preload-client-iperf3-1"), ("preloaded server", "preload-server-iperf3-1")]),
    ("iperf3 TCP, 4 streams, Gbit/s", "kernel-iperf3-4", [("preloaded client", "preload-client-iperf3-4")]),
    ("redis SET, requests/s (50 clients)", "kernel-redis-set", [("preloaded server", "preload-server-redis-set"), ("preloaded benchmark", "preload-client-redis-set")]),
    ("redis GET, requests/s (50 clients)", "kernel-redis-get", [("preloaded server", "preload-server-redis-get"), ("preloaded benchmark", "preload-client-redis-get")]),
]
lines = [
    "| tool | kernel (veth) | preloaded (SlimTCP) | preloaded / kernel |",
    "|---|---|---|---|",
]
for what, base, others in table:
    for label, key in others:
        b, v = rows.get(base), rows.get(key)
        ratio = f"{v / b:.2f}" if b and v is not None else "n/a"
        fmt = (lambda x: f"{x:.2f}") if "Gbit" in what else (lambda x: f"{x:,.0f}")
        lines.append(f"| {what}: {label} | {fmt(b) if b else 'n/a'} | {fmt(v) if v is not None else 'n/a'} | {ratio} |")
md = "\n".join(lines) + "\n"
open(f"{out}/preload.md", "w").write(md)
json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "duration_s": int(duration),
           "redis_requests": int(requests), "rows": rows}, open(f"{out}/preload.json", "w"), indent=1)
print(md)
PY
