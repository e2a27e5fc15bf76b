#!/usr/bin/env bash
# The guest path's instructions per segment under callgrind (make bench): the bench binary
# `engine_cost` of slimtcp-vhost (a minimal guest driver over the guest library's own split
# rings, the tenant engine and a SlimTCP peer, one thread, virtual clock) moves a small and a
# four-times-larger amount at MSS 64 and 1460, the guest sending and the guest receiving;
# (Ir(large) - Ir(small)) / (segments(large) - segments(small)) leaves out start-up and set-up:
#   -> target/bench/guest_cost.md, guest_cost.json.
# GLIBC_TUNABLES: scripts/callgrind-lib.sh (memset/memcpy counted as their vector loops).
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
OUT=target/bench
mkdir -p "$OUT"
have_valgrind bench-guest-cost || exit 0
BIN=$(CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo bench -p slimtcp-vhost --bench engine_cost --no-run \
    --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine_cost" and m.get("executable"):
        print(m["executable"])')
RAW="$OUT/guest_cost.raw"
: >"$RAW"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== guest path: instructions per segment (callgrind)"
for direction in send receive; do
    for offload in 0 1; do
        for point in "64 2000000" "64 8000000" "1460 33554432" "1460 134217728"; do
            set -- $point
            ir=$(ENGINE_COST_DIRECTION=$direction ENGINE_COST_OFFLOAD=$offload ENGINE_COST_MSS=$1 \
                ENGINE_COST_BYTES=$2 callgrind_ir "$tmp" "$BIN")
            segs=$(sed -n 's/.* segments \([0-9]*\) .*/\1/p' "$tmp/stdout")
            echo "$direction $offload $1 $2 $ir $segs" | tee -a "$RAW"
        done
    done
done

python3 - "$RAW" "$OUT" <<'PY'
import json, sys, datetime
raw, out = sys.argv[1], sys.argv[2]
runs = {}
for line in open(raw):
    direction, *fields = line.split()
    offload, mss, size, ir, segs = map(int, fields)
    runs.setdefault((direction, offload, mss), []).append((size, ir, segs))
rows = []
# The guest sending first, then receiving; software checksums before offload.
for (direction, offload, mss), pts in sorted(runs.items(), key=lambda kv: (kv[0][0] != "send", kv[0][1:])):
    (_, ir1, s1), (_, ir2, s2) = sorted(pts)
    rows.append({"direction": direction, "mss": mss, "checksums": "offload" if offload else "software",
                 "instructions_per_segment": (ir2 - ir1) / (s2 - s1), "ir": [ir1, ir2], "segments": [s1, s2]})
meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "what": "callgrind total Ir of engine_cost (guest driver, tenant engine, both stacks, memwire), "
                "difference of two transfer sizes over the difference of the peer's received segments"}
json.dump({"meta": meta, "points": rows}, open(f"{out}/guest_cost.json", "w"), indent=1)
lines = [f"Guest path, instructions per segment (callgrind), {meta['date']}: one connection, one thread "
         "(`engine_cost`, its guest side the guest library's split rings over guest memory reached by "
         "pointer); the guest sends (quiet 16 KiB sends) or receives (8 KiB receive buffers, each "
         "message parsed in place and a data message's payload copied into the application's buffer, "
         "credit returned half the receive buffer at a time); checksums in software, or filled and "
         "verified by the link (offload, as a PS225 port).", "",
         "| direction | checksums | MSS | Ir/segment |", "| --- | --- | --- | --- |"]
lines += [f"| guest {r['direction']}s | {r['checksums']} | {r['mss']} | {r['instructions_per_segment']:.0f} |"
          for r in rows]
open(f"{out}/guest_cost.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
