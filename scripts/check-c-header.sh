#!/usr/bin/env bash
# Checks that the checked-in C header (guest-lib/include/slimtcp.h) is what cbindgen generates
# from guest-lib/src/capi/ now. Exit 1, with the difference, when it is stale.
# Regenerate with: scripts/check-c-header.sh --update
set -euo pipefail
cd "$(dirname "$0")/.."

HEADER=guest-lib/include/slimtcp.h
CONFIG=guest-lib/cbindgen.toml
SOURCE=guest-lib/src/capi/mod.rs

if ! command -v cbindgen >/dev/null 2>&1; then
    echo "check-c-header: cbindgen not found; run scripts/install-deps.sh" >&2
    exit 1
fi

generate() {
    cbindgen --quiet --config "$CONFIG" --output "$1" "$SOURCE"
}

if [[ ${1:-} == --update ]]; then
    generate "$HEADER"
    echo "check-c-header: wrote $HEADER"
    exit 0
fi

fresh=$(mktemp --suffix=.h)
trap 'rm -f "$fresh"' EXIT
generate "$fresh"
if ! diff -u "$HEADER" "$fresh"; then
    echo "check-c-header: $HEADER is stale: the C API changed. Run scripts/check-c-header.sh --update and commit the header." >&2
    exit 1
fi
echo "check-c-header: $HEADER is current"
