#!/usr/bin/env bash
# The demo: SlimTCP's tap_echo example answering the Linux kernel's TCP inside a namespace.
# Placeholder until the tap_echo example exists; then this script sets up the namespace, runs
# the example and talks to it from Linux.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=target/release/examples/tap_echo
if [[ ! -x $BIN ]]; then
    echo "demo: $BIN is missing: the demo needs the tap_echo example of crate slimtcp (not written yet)" >&2
    exit 1
fi
echo "demo: tap_echo is built, but the demo script is not written yet" >&2
exit 1
