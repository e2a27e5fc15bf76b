#!/usr/bin/env bash
# Runs every cargo-fuzz target under fuzz/ for SECONDS each (default 60), with libFuzzer on the
# machine's nightly toolchain. Installs cargo-fuzz from crates.io when missing. A crash stops the
# run with its reproducer under fuzz/artifacts/<target>/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
secs=${1:-60}
cd "$(dirname "$0")/.."
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz: the nightly toolchain is missing (libFuzzer needs it); install it with rustup" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
cd fuzz
for target in $(cargo +nightly fuzz list); do
    echo "fuzz: $target for ${secs}s"
    mkdir -p "corpus/$target"
    log="target-fuzz-$target.log"
    if cargo +nightly fuzz run --release "$target" "corpus/$target" -- \
        -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
        grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" || true
    else
        tail -40 "$log" >&2
        echo "fuzz: $target FAILED; reproducer in fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
