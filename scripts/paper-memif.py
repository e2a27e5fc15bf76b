#!/usr/bin/env python3
"""The judging and the report of scripts/bench-paper-memif.sh (the paper's method over memif).

  paper-memif.py disturbed SHARE < PAIR    exit 0 when the run in PAIR was disturbed (or gave no
                                           receiver figure), 1 when it counts
  paper-memif.py report RAW OUT SECS SHARE FAR_NS
                                           writes OUT/paper_memif.md and .json from RAW

PAIR is the receiver's and the sender's `slimtcp-perf --json` lines, one after the other, then
the `core-link-probe --json` lines taken just before and just after the run; RAW has one line per
attempt: "RUN MSS ATTEMPT PAIR". A run is disturbed when either process's pinned thread waited
for its core (`run_queue_wait_ms`) longer than SHARE of the measured window: something else ran
there, and the figure is the machine's, not the stack's. Each probe tells where the host ran
the two vCPUs at that moment: "far" (a cache line's round trip above FAR_NS: every line takes
~4x as long to cross, a ring of frames moves ~10x less) or "near"; a run is marked with its
probes' placements unless both were near. The host may move the vCPUs between a probe and the
run, so the marks record the machine's state around the run, not the run's own placement.
"""
import datetime
import json
import os
import statistics
import sys

# The seed's C stack, measured with the same method on this machine (issue 12).
SEED_GBPS = {64: 1.39, 1460: 11.7}


def objects(text):
    """The JSON objects in `text`, one after the other."""
    dec, rest, sides = json.JSONDecoder(), text.strip(), []
    while rest:
        try:
            obj, end = dec.raw_decode(rest)
        except ValueError:
            break
        sides.append(obj)
        rest = rest[end:].strip()
    return sides


def parse_pair(text):
    """(receiver, sender) summaries from the JSON objects in `text` (None where missing)."""
    return sides_of(objects(text))


def sides_of(sides):
    """(receiver, sender) among the JSON objects `sides` (None where missing)."""
    rx = next((o for o in sides if o.get("role") == "receiver"), None)
    tx = next((o for o in sides if o.get("role") == "sender"), None)
    return rx, tx


def judge(rx, tx, share):
    """(the longer wait for a CPU in ms or None, disturbed?) of one run."""
    waits = [o.get("run_queue_wait_ms") for o in (rx, tx) if o]
    wait_ms = max((w for w in waits if w is not None), default=None)
    disturbed = rx is None or (wait_ms is not None and wait_ms / 1e3 > share * rx["duration_s"])
    return wait_ms, disturbed


def placement(found, far_ns):
    """(the probes' round trips in ns, the run's placement) of one run's JSON objects `found`:
    "near" when both probes saw the near placement, else the probes' placements before/after
    ("near/far", ...), None without both probes."""
    trips = [o["round_trip_ns"] for o in found if "round_trip_ns" in o]
    if len(trips) < 2:
        return trips, None
    kinds = ["far" if t > far_ns else "near" for t in trips]
    return trips, "near" if set(kinds) == {"near"} else "/".join(kinds)


def stats(values):
    if not values:
        return {}
    return {"median_gbps": statistics.median(values), "min_gbps": min(values), "max_gbps": max(values),
            "spread": max(values) / min(values)}


def report(raw, out, secs, share, far_ns):
    runs = {}
    for line in open(raw):
        run, mss, attempt, rest = line.split(" ", 3)
        found = objects(rest)
        rx, tx = sides_of(found)
        wait_ms, disturbed = judge(rx, tx, share)
        trips, where = placement(found, far_ns)
        rings = [o["ring_gbps"] for o in found if "ring_gbps" in o]
        point = {"run": int(run), "attempt": int(attempt), "gbps": rx["goodput_bps"] / 1e9 if rx else None,
                 "wait_ms": wait_ms, "disturbed": disturbed, "round_trips_ns": trips, "ring_gbps": rings,
                 "placement": where}
        runs.setdefault(int(mss), []).append(point)
    rows = []
    for mss in sorted(runs):
        got = [p["gbps"] for p in runs[mss] if p["gbps"]]
        quiet = [p["gbps"] for p in runs[mss] if p["gbps"] and not p["disturbed"]]
        row = {"mss": mss, "runs": runs[mss], "failed": len(runs[mss]) - len(got), **stats(got),
               "quiet": stats(quiet), "quiet_runs": len(quiet)}
        seed = SEED_GBPS.get(mss)
        if seed and got:
            row.update(seed_gbps=seed, ratio_median=row["median_gbps"] / seed, ratio_min=row["min_gbps"] / seed)
        rows.append(row)
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "cores": os.cpu_count(),
            "seconds_per_run": secs, "disturbed_share": share, "far_round_trip_ns": far_ns,
            "method": "two slimtcp-perf processes over DPDK net_memif, one pinned lcore each, runtime single, "
                      "one connection",
            "seed": "the seed's C stack measured the same way on this machine (issue 12)"}
    json.dump({"meta": meta, "rows": rows}, open(f"{out}/paper_memif.json", "w"), indent=1)

    def f2(x):
        return "-" if x is None else f"{x:.2f}"

    def run_text(p):
        mark = "" if p["placement"] == "near" else f" ({p['placement'] or '?'})"
        return "failed" if p["gbps"] is None else f"{p['gbps']:.2f}" + ("*" if p["disturbed"] else "") + mark

    def probe_text(p):
        trips = "/".join(f"{t:.0f}" for t in p["round_trips_ns"]) or "-"
        rings = "/".join(f"{g:.1f}" for g in p["ring_gbps"]) or "-"
        return f"{trips} ns, {rings} Gb/s"

    lines = [f"Paper method over DPDK memif, {meta['date']}, {meta['cores']} cores, {secs:g} s per run: "
             f"{meta['method']}.",
             f"A run marked * was disturbed: a pinned thread waited for its core more than {share:.0%} of the "
             "window (another task ran on it); such a run is tried again, and every attempt is listed.",
             f"A run marked (before/after) had a probe just before or after it (`core-link-probe`, no stack "
             f"involved) that saw a cache line's round trip between the two vCPUs above {far_ns:g} ns (far); (?) "
             "means a probe failed. The host may move the vCPUs between a probe and the run (while the processes "
             "start): the probes record the machine's state around a run, not the run's own placement.",
             "", "| MSS | runs (Gb/s) | median | spread (max/min) | undisturbed: median, spread | seed | "
             "median/seed | min/seed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def group_text(g, n):
        return f"{g['median_gbps']:.2f}, {g['spread']:.2f} ({n} runs)" if g else "-"
    for r in rows:
        lines.append(f"| {r['mss']} | {', '.join(run_text(p) for p in r['runs'])} | {f2(r.get('median_gbps'))} | "
                     f"{f2(r.get('spread'))} | {group_text(r['quiet'], r['quiet_runs'])} | {f2(r.get('seed_gbps'))} | "
                     f"{f2(r.get('ratio_median'))} | {f2(r.get('ratio_min'))} |")
    lines += ["", "The two cores' link around each run (`core-link-probe --from 1 --to 0`, before/after: "
              "a cache line's round trip, a ring of 1514-byte frames):", "",
              "| MSS | run | Gb/s | round trip, ring |", "| --- | --- | --- | --- |"]
    for r in rows:
        for p in r["runs"]:
            lines.append(f"| {r['mss']} | {p['run']}.{p['attempt']} | {run_text(p)} | {probe_text(p)} |")
    open(f"{out}/paper_memif.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv):
    if len(argv) == 3 and argv[1] == "disturbed":
        rx, tx = parse_pair(sys.stdin.read())
        return 0 if judge(rx, tx, float(argv[2]))[1] else 1
    if len(argv) == 7 and argv[1] == "report":
        report(argv[2], argv[3], float(argv[4]), float(argv[5]), float(argv[6]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
