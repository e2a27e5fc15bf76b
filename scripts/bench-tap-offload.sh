#!/usr/bin/env bash
# The TAP's checksum offload (virtio-net header) against software checksums, in one run:
# slimtcp-perf over a TAP with the Linux kernel as the peer, inside a namespace this script
# makes (slimt-bench-tapcsum-PID, removed on exit; traffic stays on 10.77.99.0/24 there).
#   1. instructions per segment of the SlimTCP process under callgrind: the stack sends for 2 s
#      and 8 s (MSS 64 and 1460), and receives 32 and 128 MiB from a Linux sender (MSS 1460); the
#      difference of the two totals over the difference of the segments leaves out start-up.
#      The idle loop's polls depend on the kernel's timing, so the median of CALLGRIND_REPS
#      (default 3) repetitions is reported. User-space instructions only: the kernel's side is
#      in 2.
#   2. wall clock (noisy on a shared machine: treat as indicative): the stack sends for
#      TAP_SECONDS (default 5) at MSS 1460, TAP_ROUNDS (default 5) alternating rounds; goodput and
#      CPU seconds per GB of the SlimTCP process (user, system) and of the Linux sink.
#   -> target/bench/tap_offload.md, tap_offload.json.
# Needs root and /dev/net/tun. GLIBC_TUNABLES as in scripts/bench-peers.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
OUT=target/bench
BIN=target/release/slimtcp-perf
NS="slimt-bench-tapcsum-$$"
IF=slimtbcsum0
HOST=10.77.99.1
STACK=10.77.99.2
mkdir -p "$OUT"
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build --release -p slimtcp-perf --bin slimtcp-perf

tmp=$(mktemp -d)
sink_pid=""
cleanup() {
    [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" tuntap add dev "$IF" mode tap
ip -n "$NS" addr add "$HOST/24" dev "$IF"
ip -n "$NS" link set "$IF" up

# A Linux sink on HOST:5001 (every connection read to its end) and a Linux source (BYTES to
# STACK:5002, retrying until the listener is up).
cat >"$tmp/sink.py" <<'PY'
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(8)
def drain(c):
    while c.recv(1 << 20): pass
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=drain, args=(c,), daemon=True).start()
PY
cat >"$tmp/source.py" <<'PY'
import socket, sys, time
total, buf = int(sys.argv[2]), bytes(1 << 20)
for _ in range(600):
    try:
        s = socket.create_connection((sys.argv[1], 5002)); break
    except OSError:
        time.sleep(0.05)
while total > 0:
    n = s.send(buf[:min(total, len(buf))]); total -= n
s.shutdown(socket.SHUT_WR); s.recv(1); s.close()
PY
ip netns exec "$NS" python3 "$tmp/sink.py" "$HOST" &
sink_pid=$!

perf_args() { # mode role mss duration
    local flag=""
    [ "$1" = software ] && flag="--no-checksum-offload"
    local common=(--nic "tap:$IF" --bind-ip "$STACK" --bind-eth 02:00:00:77:99:02 --tcp --mss "$3"
        --runtime single --json $flag)
    if [ "$2" = send ]; then
        echo "${common[@]} --connect-ip $HOST --connect-port 5001 --connections 1 --duration $4"
    else
        echo "${common[@]} --listen --bind-port 5002 --connections 1 --duration 600"
    fi
}

RAW="$OUT/tap_offload.raw"
: >"$RAW"
if command -v valgrind >/dev/null 2>&1; then
    echo "== instructions per segment (callgrind), ${CALLGRIND_REPS:-3} repetitions"
    for rep in $(seq "${CALLGRIND_REPS:-3}"); do
    for mode in software offload; do
        for point in "send 64 2" "send 64 8" "send 1460 2" "send 1460 8" "recv 1460 33554432" "recv 1460 134217728"; do
            set -- $point
            role=$1 mss=$2 size=$3
            source_pid=""
            if [ "$role" = recv ]; then
                ip netns exec "$NS" python3 "$tmp/source.py" "$STACK" "$size" &
                source_pid=$!
                args=$(perf_args "$mode" recv "$mss" 0)
            else
                args=$(perf_args "$mode" send "$mss" "$size")
            fi
            # shellcheck disable=SC2086
            GLIBC_TUNABLES="$CALLGRIND_TUNABLES" ip netns exec "$NS" valgrind --tool=callgrind \
                --callgrind-out-file="$tmp/cg.out" "$BIN" $args >"$tmp/stdout" 2>"$tmp/stderr" \
                || { cat "$tmp/stderr" >&2; exit 1; }
            [ -n "$source_pid" ] && wait "$source_pid"
            ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/stderr")
            echo "callgrind $rep $mode $role $mss $size $ir $(tail -n 1 "$tmp/stdout")" | tee -a "$RAW"
        done
    done
    done
fi

echo "== wall clock: goodput and CPU seconds per GB (send, MSS 1460)"
# CPU time of the SlimTCP process (user; system, which holds most of the kernel's receive path:
# the TAP write runs it inline) and of the Linux sink (its recv), not of the whole machine: this
# one may be busy with other work.
sink_cpu() { awk '{print $14 + $15}' "/proc/$sink_pid/stat"; }
for round in $(seq "${TAP_ROUNDS:-5}"); do
    for mode in software offload; do
        s0=$(sink_cpu)
        # shellcheck disable=SC2086
        ip netns exec "$NS" /usr/bin/time -f "%U %S" -o "$tmp/time" "$BIN" \
            $(perf_args "$mode" send 1460 "${TAP_SECONDS:-5}") >"$tmp/stdout" 2>/dev/null
        s1=$(sink_cpu)
        echo "wall $mode $round $(cat "$tmp/time") $((s1 - s0)) $(getconf CLK_TCK) $(tail -n 1 "$tmp/stdout")" \
            | tee -a "$RAW"
    done
done

python3 - "$RAW" "$OUT" <<'PY'
import json, sys, datetime, statistics
raw, out = sys.argv[1], sys.argv[2]
cg, wall = {}, {}
for line in open(raw):
    kind, rest = line.split(" ", 1)
    if kind == "callgrind":
        rep, mode, role, mss, size, ir, js = rest.split(" ", 6)
        m = json.loads(js)
        cg.setdefault((role, int(mss), mode), {}).setdefault(rep, []).append(
            (int(size), int(ir), m["total_bytes"] / int(mss)))
    else:
        mode, rnd, user, system, sink, hz, js = rest.split(" ", 6)
        m = json.loads(js)
        gb = m["total_bytes"] / 1e9
        wall.setdefault(mode, []).append({
            "gbps": m["goodput_bps"] / 1e9, "stack_user_s_per_gb": float(user) / gb,
            "stack_system_s_per_gb": float(system) / gb, "sink_s_per_gb": int(sink) / int(hz) / gb})
rows = []
for (role, mss, mode), reps in sorted(cg.items()):
    per_rep = []
    for pts in reps.values():
        (_, ir1, s1), (_, ir2, s2) = sorted(pts)
        per_rep.append((ir2 - ir1) / (s2 - s1))
    rows.append({"role": role, "mss": mss, "checksums": mode,
                 "instructions_per_segment": statistics.median(per_rep), "repetitions": per_rep})
KEYS = ("gbps", "stack_user_s_per_gb", "stack_system_s_per_gb", "sink_s_per_gb")
walls = {mode: dict({k: statistics.median(r[k] for r in runs) for k in KEYS}, runs=runs)
         for mode, runs in wall.items()}
meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "what": "slimtcp-perf --nic tap (single runtime) with the Linux kernel as the peer; checksums in "
                "software (--no-checksum-offload) or left to the kernel (virtio-net header)"}
json.dump({"meta": meta, "callgrind": rows, "wall": walls}, open(f"{out}/tap_offload.json", "w"), indent=1)
ips = {(r["role"], r["mss"], r["checksums"]): r["instructions_per_segment"] for r in rows}
lines = [f"TAP checksum offload, {meta['date']}: {meta['what']}.", "",
         "Instructions per segment of the SlimTCP process (callgrind, median of the repetitions):", "",
         "| SlimTCP | MSS | Ir/segment, software | Ir/segment, offload | offload/software |",
         "| --- | ---: | ---: | ---: | ---: |"]
for role, mss in sorted({(r, m) for (r, m, _) in ips}):
    sw, off = ips.get((role, mss, "software")), ips.get((role, mss, "offload"))
    if sw and off:
        lines.append(f"| {'sends' if role == 'send' else 'receives'} | {mss} | {sw:,.0f} | {off:,.0f} | {off / sw:.2f} |")
lines += ["", f"Wall clock, SlimTCP sends at MSS 1460, medians of {len(wall.get('offload', []))} alternating runs; "
          "CPU seconds per GB moved:", "",
          "| checksums | goodput | SlimTCP user | SlimTCP system (with the kernel's receive) | Linux sink |",
          "| --- | ---: | ---: | ---: | ---: |"]
for mode in ("software", "offload"):
    if mode in walls:
        w = walls[mode]
        lines.append(f"| {mode} | {w['gbps']:.2f} Gb/s | {w['stack_user_s_per_gb']:.3f} | "
                     f"{w['stack_system_s_per_gb']:.3f} | {w['sink_s_per_gb']:.3f} |")
open(f"{out}/tap_offload.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
