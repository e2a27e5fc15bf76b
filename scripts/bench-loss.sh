#!/usr/bin/env bash
# Goodput under random loss (issue 14), for make bench: SlimTCP <-> Linux over a TAP beside
# Linux <-> Linux over veth pairs, through the same router namespace and the same nftables rule
# (`numgen random mod 10000 < N drop` on the forwarding hop, the same rate each way) at 0%,
# 0.1%, 1% and 5%; the median of LOSS_BENCH_RUNS (default 3) transfers of LOSS_BENCH_BYTES
# (default 32 MiB) each, and the ratios to Linux <-> Linux:
#   -> target/bench/loss.md, loss.json.
# The harness is the ignored test `loss_goodput_table` of stack/tests/interop_loss.rs (root and
# network namespaces needed; the namespaces are slimt-* and cleaned up even on failure).
# SLIMTCP_LOSS_RATES (comma-separated, in 1/10000) overrides the rates.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT="$PWD/target/bench"
mkdir -p "$OUT"
status=0
LOSS_BENCH_OUT="$OUT" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" \
    cargo test --release -p slimtcp --test interop_loss -- --ignored --exact loss_goodput_table --nocapture \
    || status=$?
./scripts/cleanup-netns.sh >/dev/null
if ((status == 0)); then cat "$OUT/loss.md"; fi
exit $status
