#!/usr/bin/env python3
"""The judging and the report of scripts/bench-paper-memif.sh (the paper's method over memif).

  paper-memif.py disturbed SHARE < PAIR    exit 0 when the run in PAIR was disturbed (or gave no
                                           receiver figure), 1 when it counts
  paper-memif.py report RAW OUT SECS SHARE writes OUT/paper_memif.md and .json from RAW

PAIR is the receiver's and the sender's `slimtcp-perf --json` lines, one after the other; RAW
has one line per attempt: "RUN MSS ATTEMPT PAIR". A run is disturbed when either process's
pinned thread waited for its core (`run_queue_wait_ms`) longer than SHARE of the measured
window: something else ran there, and the figure is the machine's, not the stack's.
"""
import datetime
import json
import os
import statistics
import sys

# The seed's C stack, measured with the same method on this machine (issue 12).
SEED_GBPS = {64: 1.39, 1460: 11.7}


def parse_pair(text):
    """(receiver, sender) summaries from the two JSON objects in `text` (None where missing)."""
    dec, rest, sides = json.JSONDecoder(), text.strip(), []
    while rest:
        try:
            obj, end = dec.raw_decode(rest)
        except ValueError:
            break
        sides.append(obj)
        rest = rest[end:].strip()
    rx = next((o for o in sides if o.get("role") == "receiver"), None)
    tx = next((o for o in sides if o.get("role") == "sender"), None)
    return rx, tx


def judge(rx, tx, share):
    """(the longer wait for a CPU in ms or None, disturbed?) of one run."""
    waits = [o.get("run_queue_wait_ms") for o in (rx, tx) if o]
    wait_ms = max((w for w in waits if w is not None), default=None)
    disturbed = rx is None or (wait_ms is not None and wait_ms / 1e3 > share * rx["duration_s"])
    return wait_ms, disturbed


def stats(values):
    if not values:
        return {}
    return {"median_gbps": statistics.median(values), "min_gbps": min(values), "max_gbps": max(values),
            "spread": max(values) / min(values)}


def report(raw, out, secs, share):
    runs = {}
    for line in open(raw):
        run, mss, attempt, rest = line.split(" ", 3)
        rx, tx = parse_pair(rest)
        wait_ms, disturbed = judge(rx, tx, share)
        point = {"run": int(run), "attempt": int(attempt), "gbps": rx["goodput_bps"] / 1e9 if rx else None,
                 "wait_ms": wait_ms, "disturbed": disturbed}
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
            "seconds_per_run": secs, "disturbed_share": share,
            "method": "two slimtcp-perf processes over DPDK net_memif, one pinned lcore each, runtime single, "
                      "one connection",
            "seed": "the seed's C stack measured the same way on this machine (issue 12)"}
    json.dump({"meta": meta, "rows": rows}, open(f"{out}/paper_memif.json", "w"), indent=1)

    def f2(x):
        return "-" if x is None else f"{x:.2f}"

    def run_text(p):
        return "failed" if p["gbps"] is None else f"{p['gbps']:.2f}" + ("*" if p["disturbed"] else "")

    lines = [f"Paper method over DPDK memif, {meta['date']}, {meta['cores']} cores, {secs:g} s per run: "
             f"{meta['method']}.",
             f"A run marked * was disturbed: a pinned thread waited for its core more than {share:.0%} of the "
             "window (another task ran on it); such a run is tried again, and every attempt is listed.",
             "", "| MSS | runs (Gb/s) | median | spread (max/min) | undisturbed: median, spread | seed | "
             "median/seed | min/seed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        quiet = r["quiet"]
        quiet_txt = f"{quiet['median_gbps']:.2f}, {quiet['spread']:.2f} ({r['quiet_runs']} runs)" if quiet else "-"
        lines.append(f"| {r['mss']} | {', '.join(run_text(p) for p in r['runs'])} | {f2(r.get('median_gbps'))} | "
                     f"{f2(r.get('spread'))} | {quiet_txt} | {f2(r.get('seed_gbps'))} | {f2(r.get('ratio_median'))} | "
                     f"{f2(r.get('ratio_min'))} |")
    open(f"{out}/paper_memif.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv):
    if len(argv) == 3 and argv[1] == "disturbed":
        rx, tx = parse_pair(sys.stdin.read())
        return 0 if judge(rx, tx, float(argv[2]))[1] else 1
    if len(argv) == 6 and argv[1] == "report":
        report(argv[2], argv[3], float(argv[4]), float(argv[5]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
