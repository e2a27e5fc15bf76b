#!/usr/bin/env bash
# Instructions per segment of the host runtime end to end (issue 12's tracked cost): callgrind
# runs `slimtcp-perf --nic memwire --runtime single` (sender and receiver applications, the
# runtime, both SlimTCP stacks, one thread) for a short and a long duration; the difference of
# their instruction counts over the difference of the segments the receiver got is the cost of
# one segment, start-up and drain cancelled out. MSS 64 and 1460, the copy and the zero-copy
# API, checksums in software and with the link's offload. Writes target/bench/runtime_cost.md
# and .json. Durations are wall time under valgrind (RUNTIME_COST_SHORT / _LONG seconds, 2 / 6).
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
OUT=target/bench
mkdir -p "$OUT"
have_valgrind bench-runtime-cost || exit 0
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build --release -p slimtcp-perf --bin slimtcp-perf
BIN=target/release/slimtcp-perf
SHORT="${RUNTIME_COST_SHORT:-2}"
LONG="${RUNTIME_COST_LONG:-6}"
RAW="$OUT/runtime_cost.raw"
: >"$RAW"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== host runtime end to end: instructions per segment (callgrind), $SHORT s and $LONG s"
for checksums in software offload; do
    for api in copy zero-copy; do
        for mss in 64 1460; do
            flags=(--nic memwire --runtime single --mss "$mss" --json)
            [ "$checksums" = offload ] && flags+=(--checksum-offload)
            [ "$api" = zero-copy ] && flags+=(--zero-copy)
            for seconds in "$SHORT" "$LONG"; do
                ir=$(callgrind_ir "$tmp" "$BIN" "${flags[@]}" --duration "$seconds")
                echo "$checksums $api $mss $seconds $ir $(tr -d '\n' <"$tmp/stdout")" | tee -a "$RAW"
            done
        done
    done
done

python3 - "$RAW" "$OUT" <<'PY'
import json, sys, datetime
raw, out = sys.argv[1], sys.argv[2]
runs = {}
for line in open(raw):
    checksums, api, mss, seconds, ir, js = line.split(" ", 5)
    m = json.loads(js)
    assert m["drained"], f"a run did not drain: {line}"
    runs.setdefault((checksums, api, int(mss)), []).append((float(seconds), int(ir), m["total_bytes"]))
rows = []
for (checksums, api, mss), pts in sorted(runs.items()):
    (_, ir1, b1), (_, ir2, b2) = sorted(pts)
    segments = (b2 - b1) / mss
    rows.append({"checksums": checksums, "api": api, "mss": mss,
                 "instructions_per_segment": (ir2 - ir1) / segments if segments > 0 else None,
                 "ir": [ir1, ir2], "bytes": [b1, b2]})
meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "what": "callgrind total Ir of slimtcp-perf --nic memwire --runtime single (both applications, "
                "the runtime, both stacks, one thread), difference of two durations over the difference "
                "of the bytes the receiver read, divided by the MSS"}
json.dump({"meta": meta, "points": rows}, open(f"{out}/runtime_cost.json", "w"), indent=1)
lines = [f"Host runtime end to end, instructions per segment (callgrind), {meta['date']}: one connection, "
         "`slimtcp-perf --nic memwire --runtime single`, sender and receiver applications, the runtime and both "
         "stacks on one thread; checksums in software or left to the link (`--checksum-offload`).", "",
         "| checksums | API | MSS | Ir/segment |", "| --- | --- | ---: | ---: |"]
for r in rows:
    cost = "n/a" if r["instructions_per_segment"] is None else f"{r['instructions_per_segment']:.0f}"
    lines.append(f"| {r['checksums']} | {r['api']} | {r['mss']} | {cost} |")
open(f"{out}/runtime_cost.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
