#!/usr/bin/env bash
# The VM demo (`make demo-vm`): the accelerator as a user first meets it, with a real VM.
# slimtcp-vhost serves one tenant over a TAP inside a network namespace made for the demo; QEMU
# (vmm-configs/qemu/slimtcp-vm.sh, TCG unless the CPU has vmx/svm) boots the guest of
# scripts/build-guest-image.sh attached to it, and inside the VM the guest apps drive the
# virtio-net PCI function from user space with the guest library (`pci` transport):
#   1. slimtcp-perf --nic pci sends to a Linux `slimtcp-perf --kernel --listen` for a few seconds
#      (its once-a-second pps/bps lines shown as the guest prints them);
#   2. slimtcp-vm-guest echo: 64-byte messages to a Linux echo server, every answer compared.
# Then a summary: the bytes the guest's stack accepted vs the bytes Linux read (equal, or the
# demo fails), the echo result and the backend's zero-copy counters. Exit 0 only if all of it
# succeeded. Everything (QEMU, backend, Linux peers, namespace, temp dir) is removed on exit,
# failure or Ctrl-C.
#
# Environment: DEMO_VM_SECONDS (sending time, default 5), DEMO_VM_LIMIT (seconds the VM may run,
# default 300), VM_DIR (the guest image, default target/vm), DEMO_VM_BACKEND and DEMO_VM_PERF
# (the host binaries, default target/release/...), SLIMTCP_VM_KEEP=1 (keep the logs).
# tests/tests/vmm_configs.rs runs this script too.
set -euo pipefail
cd "$(dirname "$0")/.."

BACKEND=${DEMO_VM_BACKEND:-target/release/slimtcp-vhost}
PERF=${DEMO_VM_PERF:-target/release/slimtcp-perf}
VM_DIR=${VM_DIR:-target/vm}
KERNEL=$VM_DIR/vmlinux
INITRD=$VM_DIR/initramfs-apps.cpio.gz
QEMU_SCRIPT=vmm-configs/qemu/slimtcp-vm.sh
SECONDS_SENDING=${DEMO_VM_SECONDS:-5}
VM_LIMIT=${DEMO_VM_LIMIT:-300}
for f in "$BACKEND" "$PERF" "$KERNEL" "$INITRD"; do
    if [[ ! -s $f ]]; then
        echo "demo-vm: $f is missing; run 'make demo-vm' (it builds it)" >&2
        exit 1
    fi
done
if ! command -v qemu-system-x86_64 >/dev/null; then
    echo "demo-vm: qemu-system-x86_64 is missing; run 'make deps'" >&2
    exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "demo-vm: needs root (network namespace and TAP device)" >&2
    exit 1
fi

NS="slimt-demovm-$$"
TAP="slimtvm$(( $$ % 10000 ))"
GUEST_IP=10.98.0.2
LINUX_IP=10.98.0.1
PERF_PORT=5201
ECHO_PORT=7000
QUEUES=2
DIR=$(mktemp -d -t slimtcp-demo-vm.XXXXXX)
SOCK="$DIR/vhost.sock"
SHARE="$DIR/share"
SERIAL="$DIR/serial.log"
BACKEND_PID=""
SERVER_PID=""
RECEIVER_PID=""
QEMU_PID=""
FOLLOW_PID=""

cleanup() {
    trap - EXIT INT TERM
    # QEMU first (it holds the backend's socket), then the peers, the backend, the follower.
    for pid in $QEMU_PID $RECEIVER_PID $SERVER_PID $BACKEND_PID $FOLLOW_PID; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    ip netns del "$NS" 2>/dev/null || true
    if [[ ${SLIMTCP_VM_KEEP:-0} != 0 ]]; then
        echo "demo-vm: logs kept in $DIR"
    else
        rm -rf "$DIR"
    fi
}
trap cleanup EXIT
trap 'echo; echo "demo-vm: interrupted"; exit 130' INT TERM

wait_for() { # wait_for WHAT CMD...: up to 10 s
    local what=$1; shift
    for _ in $(seq 1 100); do
        "$@" && return 0
        sleep 0.1
    done
    echo "demo-vm: $what did not come up" >&2
    return 1
}
listening() { # port: a TCP listener in the namespace
    [[ -n $(ip netns exec "$NS" ss -Hltn "sport = :$1") ]]
}
json_field() { # name file: the value after "name": in the file's last JSON line (or nothing)
    { grep -h '^{' "$2" 2>/dev/null || true; } | tail -n 1 | sed -n "s/.*\"$1\":\([0-9.a-z]*\).*/\1/p"
}

ip netns add "$NS"
ip netns exec "$NS" ip link set lo up

echo "== SlimTCP accelerator demo with a real VM"
echo "   backend : slimtcp-vhost on $SOCK ($QUEUES queue pairs), TAP $TAP in namespace $NS"
echo "   guest   : QEMU via $QEMU_SCRIPT, the guest library on the virtio-net PCI function, $GUEST_IP"
echo "   Linux   : kernel TCP at $LINUX_IP (slimtcp-perf --kernel --listen :$PERF_PORT, echo :$ECHO_PORT)"
ip netns exec "$NS" env RUST_LOG=info "$BACKEND" --socket "$SOCK" --tap "$TAP" \
    --ip "$GUEST_IP/24" --host-ip "$LINUX_IP/24" --queues "$QUEUES" >"$DIR/backend.log" 2>&1 &
BACKEND_PID=$!
wait_for "slimtcp-vhost" test -S "$SOCK" || { cat "$DIR/backend.log"; exit 1; }

ip netns exec "$NS" python3 scripts/demo_linux_server.py 0.0.0.0 >"$DIR/server.log" 2>&1 &
SERVER_PID=$!
wait_for "the Linux echo server" grep -q ready "$DIR/server.log" || { cat "$DIR/server.log"; exit 1; }

# The receiver: one connection, read to its end (it gives up if none comes within 60 s); --json for the whole run's byte count
# (total_bytes; its human line counts only the measured window).
ip netns exec "$NS" "$PERF" --kernel --listen --bind-port "$PERF_PORT" --connections 1 --json \
    >"$DIR/receiver.json" 2>"$DIR/receiver.log" &
RECEIVER_PID=$!
wait_for "the Linux receiver" listening "$PERF_PORT" || { cat "$DIR/receiver.log"; exit 1; }

# What the guest's /init runs (slimvm.run=1): the sender, then the verified echo. --json: the
# progress lines go to stderr (on the console all the same) and the summary is one JSON object
# whose total_bytes counts every byte the stack accepted, setup and drain included.
mkdir -p "$SHARE"
cat >"$SHARE/run.sh" <<EOF
set -e
echo "guest: slimtcp-perf --nic pci -> $LINUX_IP:$PERF_PORT for ${SECONDS_SENDING}s"
/bin/slimtcp-perf --nic pci --connect-ip $LINUX_IP --connect-port $PERF_PORT --connections 1 \
    --duration $SECONDS_SENDING --json
echo "guest: slimtcp-vm-guest echo -> $LINUX_IP:$ECHO_PORT"
/bin/slimtcp-vm-guest --device pci echo --server $LINUX_IP:$ECHO_PORT --count 200 --size 64
EOF

echo
echo "== booting the VM (QEMU, the guest's console filtered)"
started=$(date +%s)
: >"$SERIAL"
timeout -k 5 "$VM_LIMIT" "$QEMU_SCRIPT" --socket "$SOCK" --queues "$QUEUES" --memory 512M \
    --kernel "$KERNEL" --initrd "$INITRD" --append "loglevel=4 slimvm.run=1" \
    --share "$SHARE" --serial "file:$SERIAL" --debug-exit </dev/null >"$DIR/qemu.log" 2>&1 &
QEMU_PID=$!
# The guest's console as it comes: /init's milestones, the guest apps' lines, the result.
# (sed -u: unbuffered, each line shown as soon as the guest prints it.)
tail -n +1 -s 0.2 -F --pid="$QEMU_PID" "$SERIAL" 2>/dev/null \
    | sed -un -E 's/\r$//; /^(SLIMVM (modules|running|RESULT)|guest:|pps=|vm-guest:|slimtcp-perf:|\{)/s/^/   /p' &
FOLLOW_PID=$!
vm_status=0
wait "$QEMU_PID" || vm_status=$?
QEMU_PID=""
wait "$FOLLOW_PID" 2>/dev/null || true
FOLLOW_PID=""
elapsed=$(( $(date +%s) - started ))

# The receiver ends when the guest's connection ends (at most its 20 s linger after that); after
# a failed VM there is nothing to wait for.
receiver_ok=1
tenths=250
[[ $vm_status == 33 ]] || tenths=10
for _ in $(seq 1 "$tenths"); do
    kill -0 "$RECEIVER_PID" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$RECEIVER_PID" 2>/dev/null; then
    receiver_ok=0
    kill -TERM "$RECEIVER_PID" 2>/dev/null || true
fi
wait "$RECEIVER_PID" 2>/dev/null || receiver_ok=0
RECEIVER_PID=""

run_log="$SHARE/run.log"
[[ -f $run_log ]] || run_log="$SERIAL"
sent=$(json_field total_bytes "$run_log")
sent_drained=$(json_field drained "$run_log")
window_bytes=$(json_field bytes "$run_log")
window_s=$(json_field duration_s "$run_log")
goodput=$(json_field goodput_bps "$run_log")
received=$(json_field total_bytes "$DIR/receiver.json")
received_drained=$(json_field drained "$DIR/receiver.json")
echo_line=$(grep -h '^vm-guest: echo' "$run_log" | tr -d '\r' | tail -n 1 || true)

echo
echo "== summary"
ok=1
if [[ $vm_status == 33 ]]; then
    echo "   VM            : ok in ${elapsed} s (the guest's /init reported success: QEMU exit 33)"
elif [[ $vm_status == 124 ]]; then
    echo "   VM            : FAILED: still running after ${VM_LIMIT} s"; ok=0
else
    echo "   VM            : FAILED: QEMU exit $vm_status (33 = success)"; ok=0
fi
if [[ -n $sent ]]; then
    gbps=$(awk -v b="$goodput" 'BEGIN { printf "%.3f", b / 1e9 }')
    echo "   guest sent    : $sent B accepted by the guest's stack (measured window: $window_bytes B in ${window_s} s, $gbps Gb/s; drained: $sent_drained)"
else
    echo "   guest sent    : FAILED: no summary from the guest's slimtcp-perf"; ok=0
fi
if [[ -n $received && $receiver_ok == 1 ]]; then
    echo "   Linux received: $received B (slimtcp-perf --kernel --listen; connection ended: $received_drained)"
else
    echo "   Linux received: FAILED: the receiver did not finish (see below)"; ok=0
fi
if [[ -n $sent && -n $received && $sent == "$received" && $sent_drained == true ]]; then
    echo "   bytes         : equal: every byte the guest's stack accepted reached Linux"
else
    echo "   bytes         : FAILED: sent ${sent:-?} B (drained ${sent_drained:-?}) vs received ${received:-?} B"; ok=0
fi
if [[ $echo_line == *" ok "* ]]; then
    echo "   echo          : ${echo_line#vm-guest: }"
else
    echo "   echo          : FAILED: ${echo_line:-no result from slimtcp-vm-guest}"; ok=0
fi
counters=$(grep -h 'session counters:' "$DIR/backend.log" | tail -n 1 | sed 's/.*session counters: //' || true)
if [[ -n $counters ]]; then
    echo "   backend       : $(tr ',' '\n' <<<"$counters" | grep -E 'tx by reference|tx copied by backend|NIC copied guest payload' \
        | sed 's/^ *//' | paste -sd ',' - | sed 's/,/, /g')"
fi

if ((!ok)); then
    echo
    echo "== what went wrong: guest console (last lines)"
    tail -n 25 "$SERIAL" | tr -d '\r' | sed 's/^/   /'
    echo "== QEMU"
    tail -n 5 "$DIR/qemu.log" | sed 's/^/   /'
    echo "== Linux receiver"
    tail -n 5 "$DIR/receiver.log" "$DIR/receiver.json" 2>/dev/null | sed 's/^/   /'
    echo "== backend log (last lines)"
    tail -n 10 "$DIR/backend.log" | sed 's/^/   /'
    exit 1
fi
echo
echo "== backend log (last lines)"
tail -n 4 "$DIR/backend.log" | sed 's/^/   /'
