#!/usr/bin/env bash
# The paper's experiments, SlimTCP beside the Linux kernel, in one run (make bench):
#   experiment 1: MSS 64, 256, 512, 1460 over one connection;
#   experiment 2: MSS 1400 over 1, 1024, 2048, 4096 connections, every socket's buffers 64 MiB
#   split over the connections (16 KiB each at 4096; `--socket-buffer split`), and over the same
#   counts with each stack's own buffers (`--socket-buffer stack`: SlimTCP's 256 KiB within the
#   application's send budget, Linux's autotuning).
# SlimTCP: slimtcp-perf --nic memwire --runtime two-core (sender and receiver in one process).
# Linux:   slimtcp-perf --kernel, receiver and sender in two namespaces joined by a veth pair
#          with offloads off (tso gso gro lro tx rx) and MTU = MSS + 40.
# Writes target/bench/experiments.md (table with SlimTCP/Linux ratios) and experiments.json.
# Needs root (namespaces). BENCH_SECONDS (default 3) sets the measured time of each point;
# BENCH_RUNS (default 3) rounds are run (every point of both stacks per round), and the tables
# give each point's median and its range over the rounds, ratios taken within each round.
# Before each SlimTCP point, `core-link-probe` measures how fast the two cores pass data right now
# (the host moves the two vCPUs; docs/benchmarks.md, "The machine's placements"): its round trip
# is in the table beside the point.
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_POINT="${BENCH_SECONDS:-3}"
RUNS="${BENCH_RUNS:-3}"
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

# exp mss connections socket-buffer
EXP1=("1 64 1 split" "1 256 1 split" "1 512 1 split" "1 1460 1 split")
EXP2=("2 1400 1 split" "2 1400 1024 split" "2 1400 2048 split" "2 1400 4096 split"
      "2 1400 1 stack" "2 1400 1024 stack" "2 1400 2048 stack" "2 1400 4096 stack")

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

# One round of SlimTCP's points (round $1).
slimtcp_round() {
    echo "== SlimTCP over memwire, two-core runtime, ${SECONDS_PER_POINT} s per point, round $1 of $RUNS"
    for point in "${EXP1[@]}" "${EXP2[@]}"; do
        read -r exp mss conns buffer <<<"$point"
        probe=$("$PROBE" --json 2>/dev/null) || probe='{}'
        echo "probe $1 $exp $mss $conns $buffer $probe" >>"$RAW"
        json=$("$BIN" --nic memwire --runtime two-core --tcp --burst 32 --win-scale 3 --mss "$mss" \
            --connections "$conns" --socket-buffer "$buffer" --duration "$SECONDS_PER_POINT" --json 2>/dev/null)
        echo "slimtcp $1 $exp $mss $conns $buffer $json" | tee -a "$RAW"
    done
}

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
# One round of Linux's points (round $1).
linux_round() {
    echo "== Linux over veth (offloads off), ${SECONDS_PER_POINT} s per point, round $1 of $RUNS"
    for point in "${EXP1[@]}" "${EXP2[@]}"; do
        read -r exp mss conns buffer <<<"$point"
        port=$((port + 1))
        mtu=$((mss + 40))
        ip -n "$NS_RX" link set "$VETH_RX" mtu "$mtu"
        ip -n "$NS_TX" link set "$VETH_TX" mtu "$mtu"
        rx_out=$(mktemp)
        ip netns exec "$NS_RX" "$BIN" --kernel --tcp --mss "$mss" --listen --bind-port "$port" \
            --connections "$conns" --socket-buffer "$buffer" --duration "$SECONDS_PER_POINT" --json >"$rx_out" 2>/dev/null &
        rx_pid=$!
        # The receiver must listen before the sender connects.
        for _ in $(seq 1 500); do
            ip netns exec "$NS_RX" ss -ltnH "sport = :$port" | grep -q . && break
            sleep 0.01
        done
        ip netns exec "$NS_TX" "$BIN" --kernel --tcp --mss "$mss" --connect-ip "$RX_IP" --connect-port "$port" \
            --connections "$conns" --socket-buffer "$buffer" --duration "$SECONDS_PER_POINT" --json >/dev/null 2>&1 ||
            echo "linux sender $point failed" >&2
        wait "$rx_pid" || echo "linux receiver $point failed" >&2
        echo "linux $1 $exp $mss $conns $buffer $(cat "$rx_out")" | tee -a "$RAW"
        rm -f "$rx_out"
    done
}

for run in $(seq 1 "$RUNS"); do
    slimtcp_round "$run"
    linux_round "$run"
done

python3 - "$RAW" "$OUT" "$SECONDS_PER_POINT" "$RUNS" <<'PY'
import json, sys, platform, datetime, os, statistics
raw, out, secs, nruns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# runs[(exp, mss, conns, buffer)][kind][run] = data
runs = {}
for line in open(raw):
    kind, run, exp, mss, conns, buffer, js = line.split(" ", 6)
    try:
        data = json.loads(js)
    except ValueError:
        data = None
    runs.setdefault((int(exp), int(mss), int(conns), buffer), {}).setdefault(kind, {})[int(run)] = data

def goodput(d):
    return d.get("goodput_bps") if d else None

def spread(values):
    """Median, min and max of the values that exist (None when none does)."""
    v = [x for x in values if x is not None]
    return (statistics.median(v), min(v), max(v)) if v else (None, None, None)

def median_run(by_run):
    """The run whose goodput is the median (the lower one of an even count): its whole record."""
    ok = sorted((goodput(d), r) for r, d in by_run.items() if goodput(d) is not None)
    return by_run[ok[(len(ok) - 1) // 2][1]] if ok else None

rows = []
for key in sorted(runs, key=lambda k: (k[0], k[3] != "split", k[1] if k[0] == 1 else k[2])):
    exp, mss, conns, buffer = key
    s_runs, l_runs, probes = (runs[key].get(k, {}) for k in ("slimtcp", "linux", "probe"))
    ratios = [goodput(s_runs.get(r)) / goodput(l_runs.get(r))
              if goodput(s_runs.get(r)) and goodput(l_runs.get(r)) else None for r in range(1, nruns + 1)]
    s, l = median_run(s_runs), median_run(l_runs)
    run_of_s = next((r for r, d in s_runs.items() if d is s), None)
    rows.append({"experiment": exp, "mss": mss, "connections": conns, "socket_buffer": buffer,
                 "slimtcp": s, "linux": l, "ratio": spread(ratios)[0], "core_link": probes.get(run_of_s),
                 "runs": {"slimtcp_bps": [goodput(s_runs.get(r)) for r in range(1, nruns + 1)],
                          "linux_bps": [goodput(l_runs.get(r)) for r in range(1, nruns + 1)],
                          "ratio": ratios}})
# Goodput at N connections over one connection's, within each run (experiment 2), for each way of
# sizing the socket buffers.
scaling = []
for buffer in ("split", "stack"):
    exp2 = {r["connections"]: r["runs"] for r in rows if r["experiment"] == 2 and r["socket_buffer"] == buffer}
    for conns in sorted(c for c in exp2 if c != 1):
        if 1 not in exp2:
            break
        entry = {"connections": conns, "socket_buffer": buffer}
        for kind in ("slimtcp", "linux"):
            per_run = [n / one if n and one else None
                       for n, one in zip(exp2[conns][f"{kind}_bps"], exp2[1][f"{kind}_bps"])]
            entry[kind] = {"median": spread(per_run)[0], "min": spread(per_run)[1], "max": spread(per_run)[2],
                           "runs": per_run}
        scaling.append(entry)
meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
        "cores": os.cpu_count(), "seconds_per_point": float(secs), "runs": nruns,
        "slimtcp": "memwire, two-core runtime, copy API", "linux": "veth pair between namespaces, offloads off, MTU = MSS + 40",
        "rows": "slimtcp / linux: the record of the run with the median goodput; ratio: the median of the "
                "per-run ratios; runs: every run's goodput and ratio",
        "socket_buffer": "split: 64 MiB over the connections, 16..=256 KiB per socket buffer (16 KiB at 4096); "
                         "stack: none set, each stack's own (SlimTCP 256 KiB within the application's send "
                         "budget, Linux autotuning)"}
json.dump({"meta": meta, "points": rows, "scaling": scaling}, open(f"{out}/experiments.json", "w"), indent=1)

def gb(x):
    return "-" if x is None else f"{x/1e9:.2f}"
def ranged(values, fmt):
    med, lo, hi = spread(values)
    return "-" if med is None else f"{fmt(med)} ({fmt(lo)}-{fmt(hi)})"
def mseg(d):
    return "-" if not d else f"{d['segments_per_s']/1e6:.2f}"
def rt(d):
    return "-" if not d or "round_trip_ns" not in d else f"{d['round_trip_ns']:.0f}"
lines = [f"Paper experiments, {meta['date']}, {meta['cores']} cores, {secs} s per point, {nruns} rounds.",
         f"SlimTCP: {meta['slimtcp']}. Linux: {meta['linux']}.",
         "Each cell: the median over the rounds (range); ratios are taken within each round. Mseg/s and "
         "cores' RT are those of SlimTCP's median run; cores' RT: a cache line's round trip between the two "
         "vCPUs just before that point (`core-link-probe`): about 100 ns where the host ran them near each "
         "other, 400-550 ns far apart. Buffers: every socket's send and receive buffers, " + meta["socket_buffer"] + ".", "",
         "| exp | MSS | conns | buffers | SlimTCP Gb/s | SlimTCP Mseg/s | cores' RT (ns) | Linux Gb/s | Linux Mseg/s | SlimTCP/Linux |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for r in rows:
    g = lambda x: gb(x)
    lines.append(f"| {r['experiment']} | {r['mss']} | {r['connections']} | {r['socket_buffer']} | {ranged(r['runs']['slimtcp_bps'], g)} | "
                 f"{mseg(r['slimtcp'])} | {rt(r['core_link'])} | {ranged(r['runs']['linux_bps'], g)} | "
                 f"{mseg(r['linux'])} | {ranged(r['runs']['ratio'], lambda x: f'{x:.2f}')} |")
if scaling:
    lines += ["", "Experiment 2, goodput at N connections / at one connection (within each round):", "",
              "| conns | buffers | SlimTCP N/1 | Linux N/1 |", "| --- | --- | --- | --- |"]
    for e in scaling:
        f2 = lambda x: f"{x:.2f}"
        lines.append(f"| {e['connections']} | {e['socket_buffer']} | {ranged(e['slimtcp']['runs'], f2)} | "
                     f"{ranged(e['linux']['runs'], f2)} |")
open(f"{out}/experiments.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
