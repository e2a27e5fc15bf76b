#!/usr/bin/env bash
# UNTESTED: cloud-hypervisor cannot boot guests on the machines this project is built and tested
# on (no hardware virtualisation: cloud-hypervisor needs KVM with vmx/svm, or MSHV, and has no TCG),
# and Debian 12 has no cloud-hypervisor package. No test or demo runs this file;
# tests/tests/vmm_configs.rs only checks its shell syntax, its usage text and this marker. The
# tested equivalent is vmm-configs/qemu/slimtcp-vm.sh (what `make demo-vm` runs).
#
# Boots a cloud-hypervisor VM attached to a slimtcp-vhost backend (one tenant's vhost-user
# socket). The options that matter for SlimTCP:
#   --memory size=S,shared=on   all guest RAM shared (memfd): the backend maps it and reads
#                               descriptors and send payload in place (zero copy);
#                               hugepages=on backs it with host hugepages (reserve them first)
#   --net vhost_user=true,socket=PATH,num_queues=2N,vhost_mode=client
#                               the vhost-user-net device: cloud-hypervisor connects to the
#                               backend's socket (slimtcp-vhost listens); num_queues counts
#                               queues, not pairs: 2 x slimtcp-vhost's --queues. cloud-hypervisor
#                               answers the control queue itself (MQ pairs) and presents a modern
#                               virtio-net PCI function (1af4:1041), as the guest library needs.
#   --cmdline "... hugepages=N" the guest library keeps its rings and buffers in guest hugepages.
# cloud-hypervisor boots the uncompressed vmlinux of scripts/build-guest-image.sh directly (PVH).
# It has no isa-debug-exit: that image's /init falls back to `poweroff -f`, so the exit code does
# not carry the guest's result as it does under QEMU.
set -euo pipefail

prog=$(basename "$0")

usage() {
    cat <<EOF
Usage: $prog --socket PATH --kernel VMLINUX [--initramfs FILE] [OPTIONS]   (UNTESTED, see the file)

Options (environment variable, default):
  --socket PATH       slimtcp-vhost's vhost-user socket             [SLIMTCP_CH_SOCKET]
  --kernel FILE       guest kernel, uncompressed vmlinux (PVH)      [SLIMTCP_CH_KERNEL]
  --initramfs FILE    initramfs                                     [SLIMTCP_CH_INITRAMFS]
  --cmdline TEXT      extra kernel command line                     [SLIMTCP_CH_CMDLINE]
  --queues N          queue pairs; match slimtcp-vhost --queues     [SLIMTCP_CH_QUEUES, 1]
  --memory SIZE       guest RAM, all of it shared with the backend  [SLIMTCP_CH_MEMORY, 1G]
  --cpus N            virtual CPUs                                  [SLIMTCP_CH_CPUS, 1]
  --guest-hugepages N 2 MiB hugepages for the guest library         [SLIMTCP_CH_GUEST_HUGEPAGES, 64]
  -h, --help          this text
EOF
}

die() {
    echo "$prog: error: $1 (see --help)" >&2
    exit 2
}

socket=${SLIMTCP_CH_SOCKET:-}
kernel=${SLIMTCP_CH_KERNEL:-}
initramfs=${SLIMTCP_CH_INITRAMFS:-}
cmdline=${SLIMTCP_CH_CMDLINE:-}
queues=${SLIMTCP_CH_QUEUES:-1}
memory=${SLIMTCP_CH_MEMORY:-1G}
cpus=${SLIMTCP_CH_CPUS:-1}
guest_hugepages=${SLIMTCP_CH_GUEST_HUGEPAGES:-64}

while (($# > 0)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --socket | --kernel | --initramfs | --cmdline | --queues | --memory | --cpus | --guest-hugepages)
            (($# >= 2)) || die "$1 needs a value"
            case $1 in
                --socket) socket=$2 ;;
                --kernel) kernel=$2 ;;
                --initramfs) initramfs=$2 ;;
                --cmdline) cmdline=$2 ;;
                --queues) queues=$2 ;;
                --memory) memory=$2 ;;
                --cpus) cpus=$2 ;;
                --guest-hugepages) guest_hugepages=$2 ;;
            esac
            shift 2
            ;;
        *) die "unknown argument '$1'" ;;
    esac
done

[[ -n $socket ]] || die "--socket is required"
[[ -n $kernel ]] || die "--kernel is required"
if ! [[ $queues =~ ^[0-9]+$ ]] || ((queues < 1 || queues > 64)); then
    die "--queues must be 1..=64"
fi

args=(
    --cpus "boot=$cpus"
    --memory "size=$memory,shared=on"
    --kernel "$kernel"
    --cmdline "console=ttyS0 panic=-1 hugepages=$guest_hugepages${cmdline:+ $cmdline}"
    --net "vhost_user=true,socket=$socket,num_queues=$((2 * queues)),vhost_mode=client"
    --serial tty --console off
)
[[ -n $initramfs ]] && args+=(--initramfs "$initramfs")
exec cloud-hypervisor "${args[@]}"
