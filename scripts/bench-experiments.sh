#!/usr/bin/env bash
# The paper's experiments, SlimTCP beside the Linux kernel, in one run (make bench):
#   experiment 1: MSS 64, 256, 512, 1460 over one connection;
#   experiment 2: MSS 1400 over 1, 1024, 2048, 4096 connections.
# SlimTCP: slimtcp-perf --nic memwire --runtime two-core (sender and receiver in one process).
# Linux:   slimtcp-perf --kernel, receiver and sender in two namespaces joined by a veth pair
#          with offloads off (tso gso gro lro tx rx) and MTU = MSS + 40.
# Writes target/bench/experiments.md (table with SlimTCP/Linux ratios) and experiments.json.
# Needs root (namespaces). BENCH_SECONDS (default 3) sets the measured time of each point.
# Before each SlimTCP point, `core-link-probe` measures how fast the two cores pass data right now
# (the host moves the two vCPUs; docs/benchmarks.md, "The machine's placements"): its round trip
# is in the table beside the point.
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_POINT="${BENCH_SECONDS:-3}"
OUT=target/bench
BIN=target/release/slimtcp-perf
PROBE=target/release/core-link-probe
RAW="$OUT/experiments.raw"
NS_RX="slimt-bench-rx-$$"
NS_TX="slimt-bench-tx-$$"
VETH_RX="slimtbrx$$"
VETH_TX="slimtbtx$$"
RX_IP=10.99.0.1
TX_IP=10.99.0.2

EXP1=("1 64 1" "1 256 1" "1 512 1" "1 1460 1")
EXP2=("2 1400 1" "2 1400 1024" "2 1400 2048" "2 1400 4096")

cleanup() {
    ip netns del "$NS_RX" 2>/dev/null || true
    ip netns del "$NS_TX" 2>/dev/null || true
}
trap cleanup EXIT

mkdir -p "$OUT"
: >"$RAW"
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build --release -p slimtcp-perf
# 4096 connections need more than the default 1024 descriptors on the Linux side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

echo "== SlimTCP over memwire, two-core runtime, ${SECONDS_PER_POINT} s per point"
for point in "${EXP1[@]}" "${EXP2[@]}"; do
    read -r exp mss conns <<<"$point"
    probe=$("$PROBE" --json 2>/dev/null) || probe='{}'
    echo "probe $exp $mss $conns $probe" >>"$RAW"
    json=$("$BIN" --nic memwire --runtime two-core --tcp --burst 32 --win-scale 3 --mss "$mss" \
        --connections "$conns" --duration "$SECONDS_PER_POINT" --json 2>/dev/null)
    echo "slimtcp $exp $mss $conns $json" | tee -a "$RAW"
done

echo "== Linux over veth (offloads off), ${SECONDS_PER_POINT} s per point"
ip netns add "$NS_RX"
ip netns add "$NS_TX"
ip link add "$VETH_RX" netns "$NS_RX" type veth peer name "$VETH_TX" netns "$NS_TX"
ip -n "$NS_RX" addr add "$RX_IP/24" dev "$VETH_RX"
ip -n "$NS_TX" addr add "$TX_IP/24" dev "$VETH_TX"
for ns_dev in "$NS_RX $VETH_RX" "$NS_TX $VETH_TX"; do
    read -r ns dev <<<"$ns_dev"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$dev" up
    ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off lro off tx off rx off >/dev/null 2>&1 ||
        ip netns exec "$ns" ethtool -K "$dev" tso off gso off gro off >/dev/null
done

port=6000
for point in "${EXP1[@]}" "${EXP2[@]}"; do
    read -r exp mss conns <<<"$point"
    port=$((port + 1))
    mtu=$((mss + 40))
    ip -n "$NS_RX" link set "$VETH_RX" mtu "$mtu"
    ip -n "$NS_TX" link set "$VETH_TX" mtu "$mtu"
    rx_out=$(mktemp)
    ip netns exec "$NS_RX" "$BIN" --kernel --tcp --mss "$mss" --listen --bind-port "$port" \
        --connections "$conns" --duration "$SECONDS_PER_POINT" --json >"$rx_out" 2>/dev/null &
    rx_pid=$!
    # The receiver must listen before the sender connects.
    for _ in $(seq 1 500); do
        ip netns exec "$NS_RX" ss -ltnH "sport = :$port" | grep -q . && break
        sleep 0.01
    done
    ip netns exec "$NS_TX" "$BIN" --kernel --tcp --mss "$mss" --connect-ip "$RX_IP" --connect-port "$port" \
        --connections "$conns" --duration "$SECONDS_PER_POINT" --json >/dev/null 2>&1 || echo "linux sender $point failed" >&2
    wait "$rx_pid" || echo "linux receiver $point failed" >&2
    echo "linux $exp $mss $conns $(cat "$rx_out")" | tee -a "$RAW"
    rm -f "$rx_out"
done

python3 - "$RAW" "$OUT" "$SECONDS_PER_POINT" <<'PY'
import json, sys, platform, datetime, os
raw, out, secs = sys.argv[1], sys.argv[2], sys.argv[3]
points = {}
for line in open(raw):
    kind, exp, mss, conns, js = line.split(" ", 4)
    try:
        data = json.loads(js)
    except ValueError:
        data = None
    points.setdefault((int(exp), int(mss), int(conns)), {})[kind] = data
rows = []
for key in sorted(points, key=lambda k: (k[0], k[1] if k[0] == 1 else k[2])):
    exp, mss, conns = key
    s, l = points[key].get("slimtcp"), points[key].get("linux")
    sg = s["goodput_bps"] if s else None
    lg = l["goodput_bps"] if l else None
    ratio = sg / lg if sg and lg else None
    rows.append({"experiment": exp, "mss": mss, "connections": conns,
                 "slimtcp": s, "linux": l, "ratio": ratio, "core_link": points[key].get("probe")})
meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
        "cores": os.cpu_count(), "seconds_per_point": float(secs),
        "slimtcp": "memwire, two-core runtime, copy API", "linux": "veth pair between namespaces, offloads off, MTU = MSS + 40"}
json.dump({"meta": meta, "points": rows}, open(f"{out}/experiments.json", "w"), indent=1)
def gb(x):
    return "-" if x is None else f"{x/1e9:.2f}"
def mseg(d):
    return "-" if not d else f"{d['segments_per_s']/1e6:.2f}"
lines = [f"Paper experiments, {meta['date']}, {meta['cores']} cores, {secs} s per point.",
         f"SlimTCP: {meta['slimtcp']}. Linux: {meta['linux']}.",
         "cores' RT: a cache line's round trip between the two vCPUs just before the SlimTCP point "
         "(`core-link-probe`): about 100 ns where the host ran them near each other, 400-550 ns far apart.", "",
         "| exp | MSS | conns | SlimTCP Gb/s | SlimTCP Mseg/s | cores' RT (ns) | Linux Gb/s | Linux Mseg/s | SlimTCP/Linux |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
def rt(d):
    return "-" if not d or "round_trip_ns" not in d else f"{d['round_trip_ns']:.0f}"
for r in rows:
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
    lines.append(f"| {r['experiment']} | {r['mss']} | {r['connections']} | {gb(r['slimtcp'] and r['slimtcp']['goodput_bps'])} | "
                 f"{mseg(r['slimtcp'])} | {rt(r['core_link'])} | {gb(r['linux'] and r['linux']['goodput_bps'])} | "
                 f"{mseg(r['linux'])} | {ratio} |")
open(f"{out}/experiments.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
