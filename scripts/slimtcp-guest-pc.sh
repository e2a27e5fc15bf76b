#!/usr/bin/env bash
# Writes target/<profile>/pkgconfig/slimtcp-guest.pc from guest-lib/slimtcp-guest.pc.in, for C
# applications built against this checkout: the header in guest-lib/include, the libraries
# (libslimtcp_guest.a and .so) that cargo built in target/<profile>.
#   scripts/slimtcp-guest-pc.sh [release|debug]     (default: release; prints the file's path)
# Linking: docs/guest-lib.md, "The C API".
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${1:-release}
root=$(pwd)
libdir="${CARGO_TARGET_DIR:-$root/target}/$profile"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' guest-lib/Cargo.toml | head -n1)
mkdir -p "$libdir/pkgconfig"
sed -e "s|@prefix@|$root|" -e "s|@libdir@|$libdir|" -e "s|@includedir@|$root/guest-lib/include|" \
    -e "s|@version@|$version|" guest-lib/slimtcp-guest.pc.in >"$libdir/pkgconfig/slimtcp-guest.pc"
echo "$libdir/pkgconfig/slimtcp-guest.pc"
