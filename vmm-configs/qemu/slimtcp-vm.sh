#!/usr/bin/env bash
# Boots a QEMU VM attached to a slimtcp-vhost backend (one tenant's vhost-user socket). This is the
# command line `make demo-vm` (scripts/demo-vm.sh) runs; tests/tests/vmm_configs.rs checks its
# usage text, its option errors and the command line it prints with --dry-run.
#
# What matters for SlimTCP, in short (each option is explained where it is built, below):
#   - all guest RAM is one *shared* memory backend (memfd, share=on) that is the RAM of NUMA
#     node 0: the backend maps it and reads descriptors and send payload in place (zero copy);
#   - the device is vhost-user-net (the only vhost-user device stock QEMU can create), modern only
#     (1af4:1041), with multi-queue: one queue pair per guest thread;
#   - inside the guest, the guest library drives that PCI function from user space (uio_pci_generic)
#     with its rings in guest hugepages: give the guest kernel `hugepages=N`.
# Options can also come from the environment (SLIMTCP_VM_*); flags win. Run with --help.
set -euo pipefail

prog=$(basename "$0")

usage() {
    cat <<EOF
Usage: $prog --socket PATH (--kernel VMLINUX [--initrd FILE] | --disk IMAGE) [OPTIONS] [-- QEMU ARGS]

Boots a q35 VM whose virtio-net device is served by slimtcp-vhost over vhost-user. QEMU is the
vhost-user client: start slimtcp-vhost first (it listens on the socket).

Required:
  --socket PATH        slimtcp-vhost's vhost-user socket             [SLIMTCP_VM_SOCKET]
  --kernel FILE        guest kernel (vmlinux or bzImage)             [SLIMTCP_VM_KERNEL]
    or --disk FILE     bootable disk image (qcow2, or raw for .img/.raw) [SLIMTCP_VM_DISK]

Options (environment variable, default):
  --initrd FILE        initramfs for --kernel                        [SLIMTCP_VM_INITRD]
  --append TEXT        extra kernel command line for --kernel        [SLIMTCP_VM_APPEND]
                       (always given: console=ttyS0 panic=-1 hugepages=N)
  --guest-hugepages N  2 MiB hugepages the guest kernel reserves for
                       the guest library's rings and buffers         [SLIMTCP_VM_GUEST_HUGEPAGES, 64]
  --queues N           queue pairs; match slimtcp-vhost --queues     [SLIMTCP_VM_QUEUES, 1]
  --memory SIZE        guest RAM, all of it shared with the backend  [SLIMTCP_VM_MEMORY, 1G]
  --host-hugepages     back guest RAM with host hugepages (memfd
                       hugetlb=on; reserve them in
                       /proc/sys/vm/nr_hugepages first)              [SLIMTCP_VM_HOST_HUGEPAGES=1]
  --cpus N             virtual CPUs                                  [SLIMTCP_VM_CPUS, 1]
  --accel auto|tcg|kvm auto: KVM only if /proc/cpuinfo shows vmx or
                       svm and /dev/kvm is usable, else TCG          [SLIMTCP_VM_ACCEL, auto]
  --reconnect-ms MS    reconnect to a restarted backend after MS ms
                       (QEMU >= 9.2; 0 = do not)                     [SLIMTCP_VM_RECONNECT_MS, 1000]
  --mac MAC            the device's MAC address                      [SLIMTCP_VM_MAC, QEMU's]
  --share DIR          export DIR to the guest over 9p, tag "share"  [SLIMTCP_VM_SHARE]
  --serial SPEC        QEMU -serial: mon:stdio, file:PATH, ...       [SLIMTCP_VM_SERIAL, mon:stdio]
  --qmp PATH           QMP control socket (server)                   [SLIMTCP_VM_QMP]
  --debug-exit         add isa-debug-exit (port 0xf4): the guest can
                       end QEMU with exit code (value << 1) | 1      [SLIMTCP_VM_DEBUG_EXIT=1]
  --qemu BINARY        the QEMU binary                               [SLIMTCP_VM_QEMU, qemu-system-x86_64]
  --dry-run            print the command line (one argument a line), do not run it
  -h, --help           this text
Arguments after -- go to QEMU unchanged. QEMU replaces this script (exec): its exit code is ours.

Example: the guest image of scripts/build-guest-image.sh + build-guest-apps.sh, whose /init runs
the host-written share/run.sh with slimvm.run=1 (what scripts/demo-vm.sh does):
  slimtcp-vhost --socket /tmp/t0.sock --tap slimt0 --ip 10.0.0.2/24 --host-ip 10.0.0.1/24 --queues 2 &
  mkdir share; echo '/bin/slimtcp-perf --nic pci --connect-ip 10.0.0.1 --connect-port 5201' >share/run.sh
  $prog --socket /tmp/t0.sock --queues 2 --kernel target/vm/vmlinux \\
      --initrd target/vm/initramfs-apps.cpio.gz --share share --append slimvm.run=1
EOF
}

die() { # message: an argument error, exit 2 (as slimtcp-perf and clap do)
    echo "$prog: error: $1 (see --help)" >&2
    exit 2
}

socket=${SLIMTCP_VM_SOCKET:-}
kernel=${SLIMTCP_VM_KERNEL:-}
initrd=${SLIMTCP_VM_INITRD:-}
disk=${SLIMTCP_VM_DISK:-}
append=${SLIMTCP_VM_APPEND:-}
guest_hugepages=${SLIMTCP_VM_GUEST_HUGEPAGES:-64}
queues=${SLIMTCP_VM_QUEUES:-1}
memory=${SLIMTCP_VM_MEMORY:-1G}
host_hugepages=${SLIMTCP_VM_HOST_HUGEPAGES:-0}
cpus=${SLIMTCP_VM_CPUS:-1}
accel=${SLIMTCP_VM_ACCEL:-auto}
reconnect_ms=${SLIMTCP_VM_RECONNECT_MS:-1000}
mac=${SLIMTCP_VM_MAC:-}
share=${SLIMTCP_VM_SHARE:-}
serial=${SLIMTCP_VM_SERIAL:-mon:stdio}
qmp=${SLIMTCP_VM_QMP:-}
debug_exit=${SLIMTCP_VM_DEBUG_EXIT:-0}
qemu=${SLIMTCP_VM_QEMU:-qemu-system-x86_64}
dry_run=0
extra=()

while (($# > 0)); do
    opt=$1
    case $opt in
        -h | --help) usage; exit 0 ;;
        --dry-run) dry_run=1; shift; continue ;;
        --host-hugepages) host_hugepages=1; shift; continue ;;
        --debug-exit) debug_exit=1; shift; continue ;;
        --) shift; extra=("$@"); break ;;
        --socket | --kernel | --initrd | --disk | --append | --guest-hugepages | --queues | --memory \
            | --cpus | --accel | --reconnect-ms | --mac | --share | --serial | --qmp | --qemu)
            (($# >= 2)) || die "$opt needs a value"
            val=$2
            shift 2
            ;;
        *) die "unknown argument '$opt'" ;;
    esac
    case $opt in
        --socket) socket=$val ;;
        --kernel) kernel=$val ;;
        --initrd) initrd=$val ;;
        --disk) disk=$val ;;
        --append) append=$val ;;
        --guest-hugepages) guest_hugepages=$val ;;
        --queues) queues=$val ;;
        --memory) memory=$val ;;
        --cpus) cpus=$val ;;
        --accel) accel=$val ;;
        --reconnect-ms) reconnect_ms=$val ;;
        --mac) mac=$val ;;
        --share) share=$val ;;
        --serial) serial=$val ;;
        --qmp) qmp=$val ;;
        --qemu) qemu=$val ;;
    esac
done

# Validation, before anything starts.
[[ -n $socket ]] || die "--socket is required"
[[ -n $kernel || -n $disk ]] || die "give --kernel (and --initrd) or --disk"
[[ -n $kernel && -n $disk ]] && die "--kernel and --disk exclude each other"
[[ -n $initrd && -z $kernel ]] && die "--initrd needs --kernel"
[[ -n $disk && -n $append ]] && die "--append needs --kernel (a disk image boots its own command line)"
if ! [[ $queues =~ ^[0-9]+$ ]] || ((queues < 1 || queues > 64)); then
    die "--queues must be 1..=64 (as slimtcp-vhost's)"
fi
if ! [[ $cpus =~ ^[0-9]+$ ]] || ((cpus < 1)); then
    die "--cpus must be a positive number"
fi
[[ $guest_hugepages =~ ^[0-9]+$ ]] || die "--guest-hugepages must be a number"
[[ $reconnect_ms =~ ^[0-9]+$ ]] || die "--reconnect-ms must be a number of milliseconds"
[[ $memory =~ ^[0-9]+[MGT]$ ]] || die "--memory must be a size like 512M or 2G"
case $accel in auto | tcg | kvm) ;; *) die "--accel must be auto, tcg or kvm" ;; esac
for f in ${kernel:+"$kernel"} ${initrd:+"$initrd"} ${disk:+"$disk"}; do
    [[ -r $f ]] || die "cannot read $f"
done
[[ -z $share || -d $share ]] || die "--share $share is not a directory"

# KVM only where it really is hardware virtualisation: a /dev/kvm without vmx/svm flags (e.g. a
# software hypervisor such as kvm-pvm) cannot run stock guest kernels. TCG works everywhere.
if [[ $accel == auto ]]; then
    if grep -qwE 'vmx|svm' /proc/cpuinfo 2>/dev/null && [[ -r /dev/kvm && -w /dev/kvm ]]; then
        accel=kvm
    else
        accel=tcg
    fi
fi
if [[ $accel == kvm ]]; then
    cpu=host # the host's CPU model: the guest library's hot loop gets every instruction set
else
    cpu=max # everything TCG can emulate
fi

args=(
    -machine q35 # PCIe machine: the device is a modern (virtio 1.x) PCI function
    -accel "$accel" -cpu "$cpu" -smp "$cpus"
    -m "$memory"
    -nodefaults -no-user-config -display none -no-reboot
)

# Guest RAM: a vhost-user backend maps all of guest memory (the descriptors carry guest-physical
# addresses anywhere in RAM), so the memory must be a shareable file descriptor (memfd,
# share=on) and must BE the guest's RAM: `-numa node,memdev=mem` makes the backend node 0's RAM.
# The same size as -m. hugetlb=on backs it with host hugepages (fewer IOTLB/TLB misses on the
# backend's worker core; they must be reserved on the host first).
mem_object="memory-backend-memfd,id=mem,size=$memory,share=on"
if [[ $host_hugepages == 1 ]]; then
    mem_object+=",hugetlb=on,hugetlbsize=2M"
fi
args+=(-object "$mem_object" -numa "node,memdev=mem")

# The vhost-user connection: QEMU is the client of slimtcp-vhost's socket. With reconnect-ms
# (QEMU 9.2+; older ones spell it reconnect=SECONDS) QEMU reattaches when the backend restarts,
# and the backend gives the VM a fresh device on the tenant's NIC.
chardev="socket,id=slimtcp0,path=$socket"
if ((reconnect_ms > 0)); then
    chardev+=",reconnect-ms=$reconnect_ms"
fi
args+=(-chardev "$chardev")

# The net device: vhost-user netdev with N queue pairs (each a guest thread's pair; the backend's
# --queues must be the same), presented as virtio-net-pci with mq=on (QEMU sizes the MSI-X
# vectors itself) and disable-legacy=on: the guest library speaks virtio 1.x only (1af4:1041).
args+=(-netdev "vhost-user,id=slimtcp0,chardev=slimtcp0,queues=$queues")
device="virtio-net-pci,netdev=slimtcp0,mq=on,disable-legacy=on"
[[ -n $mac ]] && device+=",mac=$mac"
args+=(-device "$device")

# Boot: a kernel (+ initramfs) with our command line, or a disk image with its own. The guest
# library needs hugepages inside the guest (rings and buffers at guest-physical addresses).
if [[ -n $kernel ]]; then
    args+=(-kernel "$kernel")
    [[ -n $initrd ]] && args+=(-initrd "$initrd")
    args+=(-append "console=ttyS0 panic=-1 hugepages=$guest_hugepages${append:+ $append}")
else
    format=qcow2
    case $disk in *.img | *.raw) format=raw ;; esac
    args+=(-drive "file=$disk,if=virtio,format=$format")
fi

# Console, an optional 9p share (how the demo hands the guest its script and gets its log), QMP
# and isa-debug-exit (how a guest reports success: the demo's /init writes 0x10 -> exit 33).
args+=(-serial "$serial")
if [[ -n $share ]]; then
    args+=(-virtfs "local,path=$share,mount_tag=share,security_model=none,id=share0")
fi
[[ -n $qmp ]] && args+=(-qmp "unix:$qmp,server=on,wait=off")
[[ $debug_exit == 1 ]] && args+=(-device "isa-debug-exit,iobase=0xf4,iosize=0x04")
args+=("${extra[@]}")

if ((dry_run)); then
    printf '%s\n' "$qemu" "${args[@]}"
    exit 0
fi
exec "$qemu" "${args[@]}"
