#!/usr/bin/env bash
# PNG plots of make bench's results, with gnuplot (gnuplot-nox, from scripts/install-deps.sh):
#   target/bench/goodput_vs_mss.png          experiment 1: goodput against MSS, one connection:
#       SlimTCP (two-core runtime) and Linux (veth) from experiments.json, SlimTCP and smoltcp
#       (one thread per pair) from peers.json;
#   target/bench/goodput_vs_connections.png  experiment 2: goodput against connections, MSS 1400,
#       SlimTCP and Linux from experiments.json;
#   target/bench/instructions_per_segment.png  callgrind: SlimTCP and smoltcp at MSS 64 and 1460;
#   target/bench/paper_memif.png             the paper's method over DPDK memif: median and
#       min-max of every MSS's runs, beside the seed's C stack (paper_memif.json).
# smoltcp appears twice: polled until idle (the comparison) and with one poll per step.
# A plot whose input file is missing is skipped (with a note), so this runs after any subset of
# scripts/bench-experiments.sh and scripts/bench-peers.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=target/bench
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "bench-plots: gnuplot missing (scripts/install-deps.sh installs gnuplot-nox); no plots" >&2
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# JSON -> whitespace-separated columns gnuplot reads ("-" where a value is missing).
python3 - "$OUT" "$tmp" <<'PY'
import json, os, sys
out, tmp = sys.argv[1], sys.argv[2]
def load(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
def gb(d, key="goodput_bps"):
    return f"{d[key] / 1e9:.3f}" if d and d.get(key) else "-"
exp, peers, cg = load("experiments.json"), load("peers.json"), load("callgrind.json")
memif = load("paper_memif.json")
if exp or peers:
    e1 = {p["mss"]: p for p in (exp or {}).get("points", []) if p["experiment"] == 1}
    pr = {p["mss"]: p for p in (peers or {}).get("bulk", [])}
    with open(f"{tmp}/mss.dat", "w") as f:
        f.write("# mss slimtcp_two_core linux slimtcp_one_thread smoltcp_one_thread smoltcp_one_poll\n")
        for mss in sorted(set(e1) | set(pr)):
            e, p = e1.get(mss, {}), pr.get(mss, {})
            f.write(f"{mss} {gb(e.get('slimtcp'))} {gb(e.get('linux'))} {gb(p.get('slimtcp'))} {gb(p.get('smoltcp'))} "
                    f"{gb(p.get('smoltcp_one_poll'))}\n")
if exp:
    with open(f"{tmp}/conns.dat", "w") as f:
        f.write("# connections, then for split and stack socket buffers: slimtcp linux slimtcp_min slimtcp_max "
                "linux_min linux_max (over the rounds)\n")
        def extent(p, kind):
            v = [x for x in p.get("runs", {}).get(f"{kind}_bps", []) if x]
            return (f"{min(v) / 1e9:.3f}", f"{max(v) / 1e9:.3f}") if v else ("-", "-")
        def cells(p):
            if p is None:
                return "- - - - - -"
            return (f"{gb(p.get('slimtcp'))} {gb(p.get('linux'))} "
                    f"{' '.join(extent(p, 'slimtcp'))} {' '.join(extent(p, 'linux'))}")
        e2 = {(p["connections"], p.get("socket_buffer", "split")): p for p in exp["points"] if p["experiment"] == 2}
        for conns in sorted({c for c, _ in e2}):
            f.write(f"{conns} {cells(e2.get((conns, 'split')))} {cells(e2.get((conns, 'stack')))}\n")
if cg:
    with open(f"{tmp}/cg.dat", "w") as f:
        f.write("# mss slimtcp smoltcp smoltcp_one_poll\n")
        for p in cg["points"]:
            label = f"MSS {p['mss']}" + (" offload" if p.get("checksums") == "offload" else "")
            f.write(f"\"{label}\" {p['slimtcp']['instructions_per_segment']:.0f} "
                    f"{p['smoltcp']['instructions_per_segment']:.0f} "
                    f"{p.get('smoltcp-one-poll', {}).get('instructions_per_segment', float('nan')):.0f}\n")
if memif:
    with open(f"{tmp}/memif.dat", "w") as f:
        f.write("# mss median min max seed\n")
        num = lambda x: "-" if x is None else f"{x:.3f}"
        for r in memif["rows"]:
            f.write(f"{r['mss']} {num(r.get('median_gbps'))} {num(r.get('min_gbps'))} {num(r.get('max_gbps'))} "
                    f"{num(r.get('seed_gbps'))}\n")
PY

common='set terminal pngcairo size 900,560 font ",11"; set grid; set key top left; set datafile missing "-"'
if [[ -f $tmp/mss.dat ]]; then
    gnuplot -e "$common; set output '$OUT/goodput_vs_mss.png';
        set title 'Experiment 1: one connection, goodput against MSS';
        set xlabel 'MSS (bytes)'; set ylabel 'goodput (Gb/s)'; set xrange [0:1540]; set xtics (64, 256, 512, 1460);
        plot '$tmp/mss.dat' using 1:2 with linespoints lw 2 title 'SlimTCP, memwire, two-core runtime',
             '' using 1:3 with linespoints lw 2 title 'Linux, veth, offloads off',
             '' using 1:4 with linespoints lw 2 dt 2 title 'SlimTCP, memwire, one thread (vs smoltcp)',
             '' using 1:5 with linespoints lw 2 dt 2 title 'smoltcp, memwire, one thread (polled until idle)',
             '' using 1:6 with linespoints lw 2 dt 3 lc rgb 'gray30' title 'smoltcp, memwire, one thread (one poll per step)'"
    echo "bench-plots: $OUT/goodput_vs_mss.png"
else
    echo "bench-plots: no experiments.json or peers.json: goodput_vs_mss.png skipped" >&2
fi
if [[ -f $tmp/conns.dat ]]; then
    gnuplot -e "$common; set output '$OUT/goodput_vs_connections.png';
        set title 'Experiment 2: MSS 1400, goodput against connections'; set key outside below;
        set xlabel 'connections'; set ylabel 'goodput (Gb/s)'; set yrange [0:*];
        plot '$tmp/conns.dat' using 0:2:4:5:xtic(1) with yerrorlines lw 2 title 'SlimTCP, memwire, two-core runtime, 64 MiB split over the sockets (median run, range)',
             '' using 0:3:6:7 with yerrorlines lw 2 title 'Linux, veth, offloads off, 64 MiB split',
             '' using 0:8:10:11 with yerrorlines lw 2 dt 2 title 'SlimTCP, each stack its own buffers',
             '' using 0:9:12:13 with yerrorlines lw 2 dt 2 title 'Linux, each stack its own buffers (autotuning)'"
    echo "bench-plots: $OUT/goodput_vs_connections.png"
else
    echo "bench-plots: no experiments.json: goodput_vs_connections.png skipped" >&2
fi
if [[ -f $tmp/cg.dat ]]; then
    gnuplot -e "$common; set output '$OUT/instructions_per_segment.png';
        set title 'Instructions per segment (callgrind; both stacks of a pair, link, copies)';
        set ylabel 'instructions per segment'; set yrange [0:*]; set xrange [-0.6:*]; set style data histograms;
        set style histogram clustered gap 1; set style fill solid 0.8 border -1; set boxwidth 0.9;
        plot '$tmp/cg.dat' using 2:xtic(1) title 'SlimTCP', '' using 3 title 'smoltcp (polled until idle)',
             '' using 4 title 'smoltcp (one poll per step)'"
    echo "bench-plots: $OUT/instructions_per_segment.png"
else
    echo "bench-plots: no callgrind.json: instructions_per_segment.png skipped" >&2
fi
if [[ -f $tmp/memif.dat ]]; then
    gnuplot -e "$common; set output '$OUT/paper_memif.png';
        set title 'Paper method over DPDK memif: two processes, one pinned core each';
        set xlabel 'MSS (bytes)'; set ylabel 'goodput (Gb/s)'; set yrange [0:*]; set xrange [0:1540];
        set xtics (64, 256, 512, 1460);
        plot '$tmp/memif.dat' using 1:2:3:4 with yerrorlines lw 2 title 'SlimTCP: median, min-max of the runs',
             '' using 1:5 with points pt 7 ps 1.8 title 'seed C stack, same method (issue 12)'"
    echo "bench-plots: $OUT/paper_memif.png"
else
    echo "bench-plots: no paper_memif.json: paper_memif.png skipped" >&2
fi
