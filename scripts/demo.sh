#!/usr/bin/env bash
# The demo: the accelerator end to end. slimtcp-vhost (the vhost-user backend running SlimTCP)
# serves one tenant over TAP inside a network namespace made for the demo; a demo application
# linked with slimtcp-guest attaches to it over vhost-user, as a VM's guest library would, and
# talks to a Linux server in that namespace: echo round trips, a bulk transfer with live
# progress, a verified echo, then a summary. Cleans up on exit or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

BACKEND=target/release/slimtcp-vhost
APP=target/release/examples/guest_demo
for b in "$BACKEND" "$APP"; do
    if [[ ! -x $b ]]; then
        echo "demo: $b is missing; run 'make demo' (it builds it)" >&2
        exit 1
    fi
done
if [[ $(id -u) -ne 0 ]]; then
    echo "demo: needs root (network namespace and TAP device)" >&2
    exit 1
fi

NS="slimt-demo-$$"
TAP="slimtdemo$(( $$ % 10000 ))"
GUEST_IP=10.99.0.2
LINUX_IP=10.99.0.1
DIR=$(mktemp -d -t slimtcp-demo.XXXXXX)
SOCK="$DIR/vhost.sock"
BACKEND_PID=""
SERVER_PID=""

cleanup() {
    trap - EXIT INT TERM
    for pid in $BACKEND_PID $SERVER_PID; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

wait_for() { # wait_for WHAT CMD...: up to 10 s
    local what=$1; shift
    for _ in $(seq 1 100); do
        "$@" && return 0
        sleep 0.1
    done
    echo "demo: $what did not come up" >&2
    return 1
}

ip netns add "$NS"
ip netns exec "$NS" ip link set lo up

echo "== SlimTCP accelerator demo"
echo "   backend : slimtcp-vhost on $SOCK, TAP $TAP in namespace $NS, guest address $GUEST_IP"
echo "   peer    : Linux kernel TCP at $LINUX_IP (echo :7000, discard :9000)"
ip netns exec "$NS" env RUST_LOG=info "$BACKEND" --socket "$SOCK" --tap "$TAP" \
    --ip "$GUEST_IP/24" --host-ip "$LINUX_IP/24" >"$DIR/backend.log" 2>&1 &
BACKEND_PID=$!
wait_for "slimtcp-vhost" test -S "$SOCK" || { cat "$DIR/backend.log"; exit 1; }

ip netns exec "$NS" python3 scripts/demo_linux_server.py 0.0.0.0 >"$DIR/server.log" 2>&1 &
SERVER_PID=$!
wait_for "the Linux server" grep -q ready "$DIR/server.log" || { cat "$DIR/server.log"; exit 1; }

echo
"$APP" --socket "$SOCK" --server "$LINUX_IP" --bulk-mb "${DEMO_BULK_MB:-200}"
status=$?

echo
echo "== backend log (last lines)"
tail -n 6 "$DIR/backend.log" | sed 's/^/   /'
exit "$status"
