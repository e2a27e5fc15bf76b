# Sourced by the benches that count instructions with callgrind (bench-peers, bench-guest-cost,
# bench-runtime-cost, bench-tap-offload), so they count the same way.

# glibc's memset/memcpy switch to `rep stosb` / `rep movsb` above a size, which callgrind counts
# as one instruction per byte; these tunables keep them on their vector loops.
CALLGRIND_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=0x7fffffff:glibc.cpu.x86_rep_movsb_threshold=0x7fffffff

# have_valgrind NAME: true when valgrind is installed; otherwise says so for script NAME.
have_valgrind() {
    if command -v valgrind >/dev/null 2>&1; then
        return 0
    fi
    echo "$1: valgrind missing (scripts/install-deps.sh installs it); no instruction counts" >&2
    return 1
}

# callgrind_ir DIR COMMAND...: runs COMMAND under callgrind (its stdout in DIR/stdout, stderr in
# DIR/stderr) and prints the total instruction count; on failure shows its stderr and fails.
callgrind_ir() {
    local dir=$1
    shift
    GLIBC_TUNABLES="$CALLGRIND_TUNABLES" valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
        "$@" >"$dir/stdout" 2>"$dir/stderr" || { cat "$dir/stderr" >&2; return 1; }
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$dir/stderr"
}
