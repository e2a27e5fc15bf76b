#!/usr/bin/env bash
# Builds the applications the VM test tier runs inside the QEMU guest, statically linked (the
# guest is busybox only), and packs them as an initramfs overlay appended to the base image of
# scripts/build-guest-image.sh:
#   target/vm/apps/bin/slimtcp-vm-guest   the guest test app (tests/src/bin/vm_guest)
#   target/vm/apps/bin/slimtcp-perf       the benchmark tool (--nic pci)
#   target/vm/apps/bin/c-echo             the C example (guest-lib/examples/c/echo.c) linked
#                                         statically against libslimtcp_guest.a
#   target/vm/apps/usr/bin/iperf3         Debian's iperf3, unmodified (dynamically linked), and
#   target/vm/apps/lib/libslimtcp_preload.so  the preload library (target/release, built by
#                                         `cargo build --release -p slimtcp-preload` when missing),
#                                         with the shared libraries both need (ldd), program
#                                         interpreter included, at the host's paths
#   target/vm/initramfs-apps.cpio.gz      base initramfs + the overlay (what QEMU boots)
# The static build has its own target directory (target/guest-static), so it never invalidates
# the workspace's normal build; cargo makes a re-run incremental.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
vm_dir=${VM_DIR:-$repo/target/vm}
log() { echo "build-guest-apps: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ -s $vm_dir/initramfs.cpio.gz ]] || die "no $vm_dir/initramfs.cpio.gz: run scripts/build-guest-image.sh first"
host=$(rustc -vV | sed -n 's/^host: //p')
[[ $host == x86_64-unknown-linux-gnu ]] || die "the guest is x86_64 Linux; this host is $host"

static_dir=$repo/target/guest-static
(cd "$repo" && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=$static_dir \
    cargo build --release --target "$host" -p slimtcp-system-tests --bin slimtcp-vm-guest \
    -p slimtcp-perf --bin slimtcp-perf -p slimtcp-guest --lib) >&2
out=$static_dir/$host/release

apps=$vm_dir/apps
rm -rf "$apps.tmp"
mkdir -p "$apps.tmp/bin"
for bin in slimtcp-vm-guest slimtcp-perf; do
    readelf -l "$out/$bin" | grep -q INTERP && die "$bin is not static (it names a program interpreter)"
    cp "$out/$bin" "$apps.tmp/bin/$bin"
    strip --strip-debug "$apps.tmp/bin/$bin"
done
# The C example, as a C developer links it (docs/guest-lib.md), but fully static (glibc's
# warnings about getpwuid/getaddrinfo in static programs concern std code the library never
# calls; cargo's "dropping unsupported crate type cdylib" above is the crt-static build).
${CC:-cc} -O2 -static -std=c11 -Wall -Wextra -Werror -I"$repo/guest-lib/include" \
    "$repo/guest-lib/examples/c/echo.c" "$out/libslimtcp_guest.a" -lpthread -lm -ldl -lrt -lutil \
    -o "$apps.tmp/bin/c-echo" 2>&1 \
    | { grep -v -e 'statically linked applications requires at runtime' -e ': in function `' >&2 || true; }
[[ -x $apps.tmp/bin/c-echo ]] || die "the C example did not link"

# Unmodified applications on the preload library (tests/tests/vm_preload.rs; docs/guest-lib.md,
# "Unmodified applications inside the VM"): the host's own iperf3 and libslimtcp_preload.so, both
# dynamically linked against the host's glibc, so the guest gets the closure of their shared
# libraries at the same paths (symlinks resolved), /lib64/ld-linux-x86-64.so.2 included. The .so
# comes from the workspace build (`make test` builds the workspace first); it is built here only
# when missing, since the VM tests run this script while cargo holds target/release.
preload=$repo/target/release/libslimtcp_preload.so
if [[ ! -s $preload ]]; then
    log "no $preload: building it"
    (cd "$repo" && cargo build --release -p slimtcp-preload) >&2
    [[ -s $preload ]] || die "cargo build --release -p slimtcp-preload left no $preload"
elif [[ -n $(find "$repo/guest-lib" "$repo/stack/api" -name '*.rs' -newer "$preload" -print -quit) ]]; then
    log "warning: $preload is older than its sources (cargo build --release -p slimtcp-preload)"
fi
iperf3=/usr/bin/iperf3
[[ -x $iperf3 ]] || die "no $iperf3 (run scripts/install-deps.sh)"
add_host_file() { # absolute host path -> the same path in the overlay
    mkdir -p "$apps.tmp$(dirname "$1")"
    cp -L "$1" "$apps.tmp$1"
}
shared_libs() { # ELF -> its shared libraries (the whole closure, as ldd resolves it), one a line
    local out
    out=$(ldd "$1") || die "ldd $1 failed"
    grep -q 'not found' <<<"$out" && die "ldd $1: a library is missing: $(grep 'not found' <<<"$out")"
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out"
}
libs=$( { shared_libs "$iperf3"; shared_libs "$preload"; } | LC_ALL=C sort -u)
grep -qx /lib64/ld-linux-x86-64.so.2 <<<"$libs" || die "ldd names no /lib64/ld-linux-x86-64.so.2"
while read -r lib; do
    add_host_file "$lib"
done <<<"$libs"
add_host_file "$iperf3"
cp "$preload" "$apps.tmp/lib/libslimtcp_preload.so"
strip --strip-debug "$apps.tmp/lib/libslimtcp_preload.so"
rm -rf "$apps"
mv "$apps.tmp" "$apps"

# The overlay: a second gzip'd cpio after the base (the kernel unpacks them in order; the base
# is padded to 512 bytes first as the initramfs format asks).
overlay=$vm_dir/apps.cpio.gz
(cd "$apps" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | gzip -1 -n >"$overlay"
combined=$vm_dir/initramfs-apps.cpio.gz
cp "$vm_dir/initramfs.cpio.gz" "$combined.tmp"
size=$(stat -c %s "$combined.tmp")
pad=$(( (512 - size % 512) % 512 ))
head -c "$pad" /dev/zero >>"$combined.tmp"
cat "$overlay" >>"$combined.tmp"
mv -f "$combined.tmp" "$combined"
log "done: $combined ($(du -h "$combined" | cut -f1)) with $(ls "$apps/bin" | tr '\n' ' ')\
usr/bin/iperf3, lib/libslimtcp_preload.so and $(wc -l <<<"$libs") shared libraries"
