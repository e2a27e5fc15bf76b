#!/usr/bin/env bash
# SlimTCP beside smoltcp over the same in-memory link (memwire), in one run (make bench):
#   1. the paper's experiment 1 (one connection, MSS 64, 256, 512, 1460; goodput and segments/s,
#      every byte checked) and 64-byte round trips (p50/p99):
#      -> target/bench/peers.md, peers.json;
#   2. instructions per segment under callgrind (repeatable on a noisy machine): each stack moves
#      N and 2N segments of MSS 64 and 1460 (sender and receiver in one thread); the difference of
#      the two totals divided by N leaves out start-up and connection set-up:
#      -> target/bench/callgrind.md, callgrind.json.
#      with checksums in software (both stacks compute and verify them) and with the link's
#      checksum offload (memwire fills and verifies them where needed, nothing here needs them;
#      both stacks leave them to it);
#      glibc's memset/memcpy use `rep stosb`/`rep movsb` from 2 KiB on, which callgrind counts as
#      one instruction per byte; GLIBC_TUNABLES moves those thresholds out of reach, so the
#      vector loops (a few instructions per 32 bytes, as on the hardware) are counted instead.
# The harness is the example `stack_peers` of slimtcp-perf (smoltcp is a dev-dependency there,
# never of the stack). PEERS_SECONDS (default 2) per bulk run, PEERS_RUNS (default 3) runs per
# point, PEERS_ROUND_TRIPS (default 20000), CALLGRIND_SEGMENTS (default 20000) = N.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
OUT=target/bench
BIN=target/release/examples/stack_peers
N="${CALLGRIND_SEGMENTS:-20000}"

mkdir -p "$OUT"
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build --release -p slimtcp-perf --example stack_peers

echo "== SlimTCP vs smoltcp over memwire: experiment 1 and 64-byte round trips"
"$BIN" compare --seconds "${PEERS_SECONDS:-2}" --runs "${PEERS_RUNS:-3}" \
    --round-trips "${PEERS_ROUND_TRIPS:-20000}" --out "$OUT"

have_valgrind bench-peers || exit 0
echo "== instructions per segment (callgrind), N = $N and 2N segments"
RAW="$OUT/callgrind.raw"
: >"$RAW"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for checksums in software offload; do
    flag=""
    [ "$checksums" = offload ] && flag="--offload"
    for stack in slimtcp smoltcp smoltcp-one-poll; do
        for mss in 64 1460; do
            for count in "$N" "$((2 * N))"; do
                ir=$(callgrind_ir "$tmp" "$BIN" segments --stack "$stack" --mss "$mss" --count "$count" $flag)
                echo "$checksums $stack $mss $count $ir $(cat "$tmp/stdout")" | tee -a "$RAW"
            done
        done
    done
done

python3 - "$RAW" "$OUT" "$N" <<'PY'
import json, sys, datetime, os
raw, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ir = {}
for line in open(raw):
    checksums, stack, mss, count, total, js = line.split(" ", 5)
    moved = json.loads(js)
    assert moved["segments"] == int(count) and moved["bytes"] == int(count) * int(mss), line
    ir[(checksums, stack, int(mss), int(count))] = (int(total), moved)
STACKS = ("slimtcp", "smoltcp", "smoltcp-one-poll")
rows = []
for checksums, mss in [(c, m) for c in ("software", "offload") for m in (64, 1460)]:
    row = {"mss": mss, "checksums": checksums}
    for stack in STACKS:
        (t1, m1), (t2, m2) = ir[(checksums, stack, mss, n)], ir[(checksums, stack, mss, 2 * n)]
        row[stack] = {"instructions_per_segment": (t2 - t1) / n, "ir_n": t1, "ir_2n": t2,
                      "frames_a_to_b_per_segment": (m2["frames_a_to_b"] - m1["frames_a_to_b"]) / n,
                      "frames_b_to_a_per_segment": (m2["frames_b_to_a"] - m1["frames_b_to_a"]) / n}
    ips = {s: row[s]["instructions_per_segment"] for s in STACKS}
    row["ratio"] = ips["slimtcp"] / ips["smoltcp"]
    row["ratio_one_poll"] = ips["slimtcp"] / ips["smoltcp-one-poll"]
    rows.append(row)
meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "n": n,
        "cores": os.cpu_count(),
        "what": "valgrind --tool=callgrind total Ir of the whole process (both stacks, the memwire link, "
                "the application's copies into and out of the sockets), (Ir(2N) - Ir(N)) / N; "
                "GLIBC_TUNABLES keeps memset/memcpy off rep stosb/movsb"}
state = next(m["slimtcp_connection_state_bytes"] for (_, m) in ir.values())
meta["slimtcp_connection_state_bytes"] = state
json.dump({"meta": meta, "points": rows}, open(f"{out}/callgrind.json", "w"), indent=1)
lines = [f"Instructions per segment (callgrind), {meta['date']}: (Ir(2N) - Ir(N)) / N with N = {n}; "
         "sender and receiver stacks, link and application copies, one thread. smoltcp: polled until idle; "
         "one poll: one `poll` per step.", "",
         "| checksums | MSS | SlimTCP Ir/segment | smoltcp Ir/segment | SlimTCP/smoltcp | smoltcp one poll Ir/segment | "
         "SlimTCP/smoltcp one poll | frames B->A per segment (SlimTCP / smoltcp / one poll) |",
         "| --- | --- | --- | --- | --- | --- | --- | --- |"]
for r in rows:
    s, m, o = r["slimtcp"], r["smoltcp"], r["smoltcp-one-poll"]
    lines.append(f"| {r['checksums']} | {r['mss']} | {s['instructions_per_segment']:.0f} | {m['instructions_per_segment']:.0f} | "
                 f"{r['ratio']:.2f} | {o['instructions_per_segment']:.0f} | {r['ratio_one_poll']:.2f} | "
                 f"{s['frames_b_to_a_per_segment']:.3f} / {m['frames_b_to_a_per_segment']:.3f} / "
                 f"{o['frames_b_to_a_per_segment']:.3f} |")
lines += ["", f"SlimTCP per-connection state: {state} bytes (the TCB and its socket-table slot, "
          "without buffer contents)."]
open(f"{out}/callgrind.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
