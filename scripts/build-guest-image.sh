#!/usr/bin/env bash
# Builds the minimal guest of the VM test tier (tests/tests/vm_*.rs): a stock Debian kernel
# (whatever `linux-image-amd64` points to) booted as uncompressed vmlinux (PVH entry, fastest
# under TCG) plus an initramfs of busybox-static, the module closure of virtio_pci, virtio_net,
# uio, uio_pci_generic, 9p and 9pnet_virtio, and an /init that drives the vhost-user net device
# with the stock virtio-net driver (see the comments in the /init below).
#
# Output, cached under target/vm/ (VM_DIR overrides):
#   vmlinux           the kernel, PVH entry
#   initramfs.cpio.gz busybox + modules + /init
#   kernel-version    e.g. 6.1.0-57-amd64
#   debs/             the downloaded packages, kept between runs
# Idempotent: when the kernel package, busybox and this script are unchanged, it only checks and
# exits. Needs apt-get, dpkg-deb, kmod (depmod, modprobe), cpio, gzip, xz (scripts/install-deps.sh).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
vm_dir=${VM_DIR:-$repo/target/vm}
mkdir -p "$vm_dir/debs"
vm_dir=$(cd "$vm_dir" && pwd)

log() { echo "build-guest-image: $*" >&2; }
die() { log "error: $*"; exit 1; }

for tool in apt-get apt-cache dpkg-deb depmod modprobe cpio gzip xz; do
    command -v "$tool" >/dev/null || die "$tool is missing (run scripts/install-deps.sh)"
done

# Fast path: nothing can have changed when the image is newer than apt's package lists (the
# candidate versions) and than this script.
if [[ -s $vm_dir/vmlinux && -s $vm_dir/initramfs.cpio.gz && -f $vm_dir/image.key \
    && $vm_dir/image.key -nt /var/lib/apt/lists && $vm_dir/image.key -nt ${BASH_SOURCE[0]} ]]; then
    log "up to date ($(cat "$vm_dir/image.key"))"
    exit 0
fi

# What linux-image-amd64's candidate depends on: the versioned image package.
candidate_depends() {
    apt-cache show --no-all-versions linux-image-amd64 2>/dev/null \
        | sed -n 's/^Depends: *//p' | tr ',' '\n' | sed 's/^ *//; s/ .*//' \
        | grep -m1 '^linux-image-[0-9].*-amd64$' || true
}
kernel_pkg=$(candidate_depends)
if [[ -z $kernel_pkg ]]; then
    log "apt knows no linux-image-amd64; running apt-get update"
    apt-get -q -o DPkg::Lock::Timeout=600 update >&2
    kernel_pkg=$(candidate_depends)
    [[ -n $kernel_pkg ]] || die "linux-image-amd64 has no candidate in the apt sources"
fi
kernel_ver=${kernel_pkg#linux-image-}
kernel_pkg_ver=$(apt-cache show --no-all-versions "$kernel_pkg" | sed -n 's/^Version: *//p' | head -1)
busybox_ver=$(apt-cache show --no-all-versions busybox-static | sed -n 's/^Version: *//p' | head -1)
[[ -n $kernel_pkg_ver && -n $busybox_ver ]] || die "apt has no $kernel_pkg or busybox-static"
script_sum=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
key="$kernel_pkg=$kernel_pkg_ver busybox-static=$busybox_ver script=$script_sum"

if [[ -f $vm_dir/image.key && $(cat "$vm_dir/image.key") == "$key" \
    && -s $vm_dir/vmlinux && -s $vm_dir/initramfs.cpio.gz ]]; then
    touch "$vm_dir/image.key" # newer than the lists again: the next run takes the fast path
    log "up to date ($key)"
    exit 0
fi
log "building for $key"

# The .debs: reused when present (old kernel versions vanish from the mirror after updates).
deb_of() { # package version -> the file name apt-get download writes (epoch colon as %3a)
    echo "${1}_${2//:/%3a}_amd64.deb"
}
fetch_deb() { # package version
    local file
    file=$(deb_of "$1" "$2")
    if [[ ! -s $vm_dir/debs/$file ]]; then
        log "downloading $1 $2"
        (cd "$vm_dir/debs" && apt-get -q -o APT::Sandbox::User=root download "$1=$2" >&2) || {
            log "download failed; running apt-get update and retrying"
            apt-get -q -o DPkg::Lock::Timeout=600 update >&2
            (cd "$vm_dir/debs" && apt-get -q -o APT::Sandbox::User=root download "$1=$2" >&2)
        }
    fi
    [[ -s $vm_dir/debs/$file ]] || die "apt-get download did not produce $file"
    echo "$vm_dir/debs/$file"
}
kernel_deb=$(fetch_deb "$kernel_pkg" "$kernel_pkg_ver")
busybox_deb=$(fetch_deb busybox-static "$busybox_ver")

work=$vm_dir/build.tmp
rm -rf "$work"
mkdir -p "$work/kernel" "$work/busybox" "$work/root"
dpkg-deb -x "$kernel_deb" "$work/kernel"
dpkg-deb -x "$busybox_deb" "$work/busybox"

# vmlinux: the xz stream inside vmlinuz, decompressed.
vmlinuz=$work/kernel/boot/vmlinuz-$kernel_ver
[[ -f $vmlinuz ]] || die "$kernel_deb has no boot/vmlinuz-$kernel_ver"
offset=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -1 | cut -d: -f1)
[[ -n $offset ]] || die "no xz stream in $vmlinuz"
tail -c +$((offset + 1)) "$vmlinuz" >"$work/vmlinux.xz" # a file: xz stops reading early
xz -dc --single-stream <"$work/vmlinux.xz" >"$work/vmlinux"
[[ $(head -c 4 "$work/vmlinux" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] \
    || die "the xz stream in $vmlinuz is not an ELF kernel"

# Modules: depmod (the .deb has no modules.dep), then each wanted module's closure in load order.
depmod -b "$work/kernel" "$kernel_ver"
modules=(virtio_pci virtio_net uio uio_pci_generic 9p 9pnet_virtio)
root=$work/root
mod_dir=lib/modules/$kernel_ver
mkdir -p "$root/$mod_dir"
: >"$root/$mod_dir/load-order"
for m in "${modules[@]}"; do
    while read -r kind path _; do
        [[ $kind == insmod ]] || continue # "builtin NAME": nothing to load
        rel=${path#"$work/kernel/"}
        name=$(basename "$rel")
        case $name in
            *.ko.xz) target=${name%.xz}; xz -dc "$path" >"$root/$mod_dir/$target" ;;
            *.ko.zst) die "zstd-compressed modules are not handled ($name)" ;;
            *) target=$name; cp "$path" "$root/$mod_dir/$target" ;;
        esac
        grep -qx "$target" "$root/$mod_dir/load-order" || echo "$target" >>"$root/$mod_dir/load-order"
    done < <(modprobe -d "$work/kernel" -S "$kernel_ver" --show-depends "$m")
done
grep -q '^virtio_net.ko$' "$root/$mod_dir/load-order" || die "virtio_net not found in $kernel_pkg"

# Busybox and the directory skeleton.
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,share,etc}
cp "$work/busybox/bin/busybox" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [[ $applet == busybox ]] || ln -sf busybox "$root/bin/$applet"
done
echo "$kernel_ver" >"$root/etc/kernel-version"

# /init. Kernel command line parameters (all optional):
#   slimvm.ip=A/P     address for the virtio-net interface (default 10.99.0.3/24)
#   slimvm.peer=A     address to ping, so the driver transmits ARP requests (default 10.99.0.1)
#   slimvm.wait=S     seconds to wait for /share/go (default 60)
#   slimvm.run=1      application mode instead: run the host-written /share/run.sh (the guest apps
#                     of scripts/build-guest-apps.sh are in /bin), its output on the console and
#                     in /share/run.log; exit status 0 = success, else 0x20 | (status & 0x1f)
# Steps: load the modules; check the vhost-user net device (1af4:1041) is there; bring its
# interface up (the driver posts receive buffers) and ping (the driver transmits ARP frames, which
# are not protocol requests: the backend must give them back without harm); report the
# interface's counters in /share/phase1 (9p, tag "share"), wait for /share/go (the host stops and
# continues the VM meanwhile), ping again, check the driver got its transmit buffers back after
# the restart, write /share/result and leave through isa-debug-exit (port 0xf4): QEMU's exit
# code is (status << 1) | 1, status 0x10 = success (QEMU exit 33).
cat >"$root/init" <<'INIT'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

finish() { # status message
    echo "SLIMVM RESULT $2 (status $1)"
    [ -f /share/mounted ] && echo "$2 (status $1)" >/share/result
    sync
    printf "\\$(printf %03o "$1")" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
    echo "SLIMVM isa-debug-exit did not end the VM"
    poweroff -f
}

ip_addr=10.99.0.3/24; peer=10.99.0.1; wait_s=60; run=0
for arg in $(cat /proc/cmdline); do
    case $arg in
        slimvm.run=*) run=${arg#*=} ;;
        slimvm.ip=*) ip_addr=${arg#*=} ;;
        slimvm.peer=*) peer=${arg#*=} ;;
        slimvm.wait=*) wait_s=${arg#*=} ;;
    esac
done

mods=/lib/modules/$(cat /etc/kernel-version)
for m in $(cat "$mods/load-order"); do
    insmod "$mods/$m" || finish 21 "insmod $m failed"
done
echo "SLIMVM modules loaded"

if mount -t 9p -o trans=virtio,version=9p2000.L share /share 2>/dev/null; then
    touch /share/mounted
else
    echo "SLIMVM no 9p share"
fi

if [ "$run" = 1 ]; then
    [ -f /share/run.sh ] || finish 24 "slimvm.run=1 but no /share/run.sh"
    echo "SLIMVM running /share/run.sh"
    set -o pipefail
    sh /share/run.sh 2>&1 | tee /share/run.log
    status=$?
    [ "$status" = 0 ] && finish 16 "ok run.sh"
    finish $((32 | (status & 31))) "run.sh failed with status $status"
fi

dev=
for d in /sys/bus/pci/devices/*; do
    if [ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x1041 ]; then dev=$d; fi
done
[ -n "$dev" ] || finish 17 "no virtio-net device 1af4:1041"
echo "SLIMVM device ${dev##*/} 1af4:1041"

ifname=
for n in "$dev"/virtio*/net/*; do [ -e "$n" ] && ifname=${n##*/}; done
[ -n "$ifname" ] || finish 18 "virtio_net made no interface for ${dev##*/}"
stats=/sys/class/net/$ifname/statistics
ip link set "$ifname" up || finish 19 "ip link set $ifname up failed"
ip addr add "$ip_addr" dev "$ifname" || finish 19 "ip addr add $ip_addr failed"
echo "SLIMVM $ifname up as $ip_addr"

ping -c 3 -i 0.2 -W 1 "$peer" >/dev/null 2>&1
tx1=$(cat $stats/tx_packets); rx1=$(cat $stats/rx_packets)
echo "SLIMVM phase1 tx_packets=$tx1 rx_packets=$rx1"
[ -f /share/mounted ] || finish 20 "no 9p share to wait on"
echo "tx_packets=$tx1 rx_packets=$rx1" >/share/phase1.tmp && mv /share/phase1.tmp /share/phase1

# Polling a file on the share: the host creates it after `stop` and `cont`.
tries=$((wait_s * 10))
while [ ! -e /share/go ]; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || finish 22 "no /share/go within ${wait_s}s"
    sleep 0.1
done
echo "SLIMVM go"

# The driver reclaims finished transmit buffers when it transmits again and on its transmit
# interrupt: after a few more frames the count must have grown past phase 1's.
ping -c 5 -i 0.2 -W 1 "$peer" >/dev/null 2>&1
tx2=$(cat $stats/tx_packets); rx2=$(cat $stats/rx_packets)
echo "SLIMVM phase2 tx_packets=$tx2 rx_packets=$rx2"
[ "$tx2" -gt "$tx1" ] || finish 23 "no transmit completed after cont (tx_packets $tx1 -> $tx2)"
finish 16 "ok tx_packets=$tx1->$tx2 rx_packets=$rx2"
INIT
chmod +x "$root/init"

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) \
    | gzip -9 -n >"$work/initramfs.cpio.gz"

mv -f "$work/vmlinux" "$vm_dir/vmlinux"
mv -f "$work/initramfs.cpio.gz" "$vm_dir/initramfs.cpio.gz"
echo "$kernel_ver" >"$vm_dir/kernel-version"
echo "$key" >"$vm_dir/image.key"
rm -rf "$work"
log "done: $vm_dir/vmlinux ($(du -h "$vm_dir/vmlinux" | cut -f1)), initramfs.cpio.gz ($(du -h "$vm_dir/initramfs.cpio.gz" | cut -f1)), kernel $kernel_ver"
