#!/usr/bin/env bash
# Runs every cargo-fuzz target under fuzz/ with libFuzzer on the machine's nightly toolchain,
# seeded from the committed corpus fuzz/corpus/<target>/, and ends with a table of executions
# per target. Installs cargo-fuzz from crates.io when missing. A crash stops the run with its
# reproducer under fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh [SECONDS]          each target for SECONDS (default 60)
#
# Environment:
#   FUZZ_RUNS=N          run each target to N executions instead (libFuzzer -runs=N; SECONDS,
#                        when given too, still caps the time)
#   FUZZ_TARGETS="a b"   only these targets
#   FUZZ_SANITIZER=S     address (default) or none (no ASan: several times faster, for long
#                        runs of targets without unsafe code of their own; its own build dir)
#   FUZZ_MERGE=1         afterwards, merge what each run found into fuzz/corpus/<target>/,
#                        minimised (libFuzzer -merge=1): the corpus to commit
#   FUZZ_TIMEOUT=S       an input running longer than S seconds is a finding (default 20)
#   FUZZ_FORK=N          N fuzzing processes at once (libFuzzer -fork=N; executions are summed;
#                        a crash, timeout or OOM in any of them still stops the run)
#   FUZZ_CORE=1          a crashing signal (SEGV, BUS, ABRT, ILL, FPE) dumps core instead of going
#                        to libFuzzer's handler (-handle_*=0, ulimit -c unlimited): the core names
#                        the place (gdb TARGET CORE, then bt), but libFuzzer saves no reproducer
#                        for it. For crashes that need the state of earlier inputs.
#
# New inputs go to fuzz/target/corpus-work/<target>/ (not committed), so a short run (make
# test) leaves the work tree clean. Long runs: see docs/operating.md, "Fuzzing".
set -euo pipefail
secs=${1:-}
runs=${FUZZ_RUNS:-}
if [ -z "$secs" ] && [ -z "$runs" ]; then
    secs=60
fi
san=${FUZZ_SANITIZER:-address}
timeout=${FUZZ_TIMEOUT:-20}
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
build=(--release -s "$san")
if [ "$san" != address ]; then
    # Another sanitizer means other compiler flags: keep its build apart from the default one.
    build+=(--target-dir "target-$san")
fi
targets=${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}
# Leak checks off: descriptor_chain and tcp_input keep their world across inputs on purpose.
limits=(-rss_limit_mb=4096 -timeout="$timeout" -max_len=4096 -detect_leaks=0 -print_final_stats=1)
# glibc would give the heap back after every input and fault it in again for the next.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.trim_threshold=268435456:glibc.malloc.mmap_threshold=268435456}
[ -n "$secs" ] && limits+=(-max_total_time="$secs")
[ -n "$runs" ] && limits+=(-runs="$runs")
[ -n "${FUZZ_FORK:-}" ] && limits+=(-fork="$FUZZ_FORK" -ignore_crashes=0 -ignore_timeouts=0 -ignore_ooms=0)
if [ "${FUZZ_CORE:-0}" = 1 ]; then
    limits+=(-handle_segv=0 -handle_bus=0 -handle_abrt=0 -handle_ill=0 -handle_fpe=0)
    ulimit -c unlimited
    echo "fuzz: core dumps on (kernel.core_pattern: $(cat /proc/sys/kernel/core_pattern))"
fi
summary=()
status=0
stat() { { grep -E "^stat::$1:" "$2" || true; } | tail -1 | awk '{print $2}'; }
# Fork mode prints no final stats: its last progress line "#RUNS: cov: ..." has the
# executions of all its processes.
fork_runs() { { grep -E '^#[0-9]+: cov:' "$1" || true; } | tail -1 | sed -E 's/^#([0-9]+):.*/\1/'; }
for target in $targets; do
    work="target/corpus-work/$target"
    mkdir -p "corpus/$target" "$work"
    log="target-fuzz-$target.log"
    echo "fuzz: $target (${secs:+${secs}s}${secs:+${runs:+, }}${runs:+$runs runs}, sanitizer $san)"
    start=$(date +%s)
    if cargo +nightly fuzz run "${build[@]}" "$target" "$work" "corpus/$target" -- "${limits[@]}" >"$log" 2>&1
    then
        result=ok
    else
        tail -40 "$log" >&2
        echo "fuzz: $target FAILED; reproducer in fuzz/artifacts/$target/" >&2
        result=FAILED
        status=1
    fi
    took=$(($(date +%s) - start))
    if [ "$result" = ok ] && [ "${FUZZ_MERGE:-0}" = 1 ]; then
        merged="target/corpus-merged/$target"
        rm -rf "$merged" && mkdir -p "$merged"
        cargo +nightly fuzz run "${build[@]}" "$target" "$merged" "corpus/$target" "$work" -- \
            -merge=1 -rss_limit_mb=4096 -timeout="$timeout" -max_len=4096 -detect_leaks=0 \
            >"target-fuzz-$target-merge.log" 2>&1
        rm -rf "corpus/$target" && mv "$merged" "corpus/$target"
    fi
    units=$(ls "corpus/$target" | wc -l)
    executed=$(stat number_of_executed_units "$log")
    rate=$(stat average_exec_per_sec "$log")
    if [ -n "${FUZZ_FORK:-}" ]; then
        executed=$(fork_runs "$log")
        rate="$((${executed:-0} / (took > 0 ? took : 1))) (${FUZZ_FORK} procs)"
    fi
    summary+=("$(printf '| %-16s | %14s | %9s | %8s | %6s | %-6s |' "$target" \
        "$executed" "$rate" "$took" "$units" "$result")")
    [ "$result" = ok ] || break
done
echo
echo "fuzz: executions per target (sanitizer $san, $(date -u +%Y-%m-%d), $(nproc) cores)"
printf '| %-16s | %14s | %9s | %8s | %6s | %-6s |\n' target executions 'exec/s' seconds corpus result
echo '|------------------|----------------|-----------|----------|--------|--------|'
printf '%s\n' "${summary[@]}"
exit $status
