#!/usr/bin/env bash
# The demo: SlimTCP's tap_echo example serving the Linux kernel's TCP inside a network namespace
# made for the demo. Shows ping, an echo round-trip latency run, a bulk transfer with live
# progress and a verified echo transfer, then a summary; cleans up on exit or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=target/release/examples/tap_echo
if [[ ! -x $BIN ]]; then
    echo "demo: $BIN is missing; run 'make demo' (it builds it)" >&2
    exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "demo: needs root (network namespace and TAP device)" >&2
    exit 1
fi

NS="slimt-demo-$$"
TAP="slimtdemo$(( $$ % 10000 ))"
STACK_IP=10.99.0.2
HOST_IP=10.99.0.1
LOG=$(mktemp -t slimtcp-demo.XXXXXX)
PID=""

cleanup() {
    trap - EXIT INT TERM
    if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    ip netns del "$NS" 2>/dev/null || true
    rm -f "$LOG"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

ip netns add "$NS"
ip netns exec "$NS" ip link set lo up

echo "== SlimTCP demo: the Linux kernel's TCP talks to SlimTCP over TAP $TAP in namespace $NS"
ip netns exec "$NS" "$BIN" --tap "$TAP" --ip "$STACK_IP/24" --host-ip "$HOST_IP/24" >"$LOG" 2>&1 &
PID=$!

for _ in $(seq 1 100); do
    grep -q "ready" "$LOG" && break
    kill -0 "$PID" 2>/dev/null || { cat "$LOG"; echo "demo: tap_echo exited early" >&2; exit 1; }
    sleep 0.1
done
grep -q "ready" "$LOG" || { cat "$LOG"; echo "demo: tap_echo did not come up" >&2; exit 1; }
sed -n '/ready/p' "$LOG"

echo
echo "== ping (ICMP echo and ARP answered by SlimTCP)"
ip netns exec "$NS" ping -c 3 -i 0.2 -W 2 "$STACK_IP"

echo
ip netns exec "$NS" python3 scripts/demo_client.py "$STACK_IP"

echo
echo "== stopping tap_echo (SIGTERM); its per-connection log:"
kill -TERM "$PID"
wait "$PID" && status=0 || status=$?
PID=""
grep -E "closed|bytes" "$LOG" | tail -n 8 || true
echo "demo: tap_echo exited with status $status"
exit "$status"
