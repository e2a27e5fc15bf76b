#!/usr/bin/env bash
# Installs what building and testing SlimTCP needs on Debian 12. Idempotent: asks dpkg first and
# runs apt-get only for what is missing, so a second run installs nothing and takes a second.
set -euo pipefail

# The single list of Debian packages. Add yours here (one per line, with why).
PACKAGES=(
    iproute2        # ip netns, ip tuntap: the Linux peer lives in a namespace
    ethtool         # switch off veth/tap offloads so captures show real checksums
    iputils-ping    # ping across the TAP link
    tshark          # well-formedness checks on every capture
    tcpdump         # captures of lossy transfers (loss recovery analysis)
    nftables        # nft: random-loss and burst-drop rules in the loss tests and make bench's loss table
    python3         # Linux-side helpers in tests
    netcat-openbsd  # nc as a Linux-side client/server
    iperf3          # Linux-side throughput peer
    pkg-config      # dpdk-sys finds libdpdk through it
    libdpdk-dev     # DPDK 22.11 (Debian) for the dpdk feature
    valgrind        # callgrind: instructions per segment in benchmarks
    gnuplot-nox     # make bench's PNG plots (scripts/bench-plots.sh)
    kmod            # depmod/modprobe: the VM guest image's module closure (build-guest-image.sh)
    cpio            # packs the VM guest's initramfs
    xz-utils        # unpacks the guest kernel's vmlinux from vmlinuz
    libvirt-clients # virt-xml-validate (+ libvirt0's schemas): tests/tests/vmm_configs.rs checks vmm-configs/libvirt/*.xml
    strace          # deriving the backend's seccomp allow-lists (scripts/seccomp-syscalls.py, docs/operating.md)
    libxml2-utils   # xmllint, which virt-xml-validate runs (Debian 12's libvirt-clients does not depend on it)
    systemd         # systemd-analyze verify: tests/tests/vmm_configs.rs checks vmm-configs/daemon/*.service
    curl            # scrapes the daemon's Prometheus endpoint in tests/tests/cli_config.rs; preloaded in tests/tests/preload_apps.rs
    redis-server    # an unmodified app on the preload library (tests/tests/preload_apps.rs, make bench)
    redis-tools     # redis-benchmark, redis-cli: the same
    nginx-light     # an epoll server on the preload library (tests/tests/preload_apps.rs)
)

# Debian packages taken from bookworm-backports (Debian 12's own QEMU is 7.2; the VM tier uses 10).
BACKPORTS_PACKAGES=(
    qemu-system-x86 # the real VMM of the VM test tier (tests/tests/vm_*.rs)
)
BACKPORTS_SOURCE=/etc/apt/sources.list.d/bookworm-backports.sources

# Rust toolchain components required by `make lint`.
RUSTUP_COMPONENTS=(clippy rustfmt)

# Cargo-installed tools, pinned: cbindgen generates the C header (scripts/check-c-header.sh).
CBINDGEN_VERSION=0.29.4

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    installed "$pkg" || missing+=("$pkg")
done
missing_bpo=()
for pkg in "${BACKPORTS_PACKAGES[@]}"; do
    installed "$pkg" || missing_bpo+=("$pkg")
done

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

if ((${#missing_bpo[@]} > 0)) && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "install-deps: adding the bookworm-backports apt source ($BACKPORTS_SOURCE)"
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
        'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
        | "${sudo_cmd[@]}" tee "$BACKPORTS_SOURCE" >/dev/null
fi

if ((${#missing[@]} + ${#missing_bpo[@]} > 0)); then
    echo "install-deps: installing ${missing[*]} ${missing_bpo[*]}"
    # tshark asks whether non-root users may capture; answer "no" without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" \
        | "${sudo_cmd[@]}" debconf-set-selections
    export DEBIAN_FRONTEND=noninteractive
    # Several engineers share this machine: wait for the dpkg lock instead of failing.
    apt_opts=(-y -q -o DPkg::Lock::Timeout=600 --no-install-recommends)
    "${sudo_cmd[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update
    if ((${#missing[@]} > 0)); then
        "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install "${missing[@]}"
    fi
    if ((${#missing_bpo[@]} > 0)); then
        "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" \
            -t bookworm-backports install "${missing_bpo[@]}"
    fi
else
    echo "install-deps: all $((${#PACKAGES[@]} + ${#BACKPORTS_PACKAGES[@]})) Debian packages present"
fi

if command -v rustup >/dev/null 2>&1; then
    installed_components=$(rustup component list --installed 2>/dev/null || true)
    for comp in "${RUSTUP_COMPONENTS[@]}"; do
        if ! grep -q "^${comp}" <<<"$installed_components"; then
            echo "install-deps: rustup component add $comp"
            rustup component add "$comp"
        fi
    done
    # Nightly: libFuzzer (scripts/fuzz.sh) and AddressSanitizer (make asan) need it.
    if ! rustup run nightly rustc --version >/dev/null 2>&1; then
        echo "install-deps: rustup toolchain install nightly"
        rustup toolchain install nightly --profile minimal
    fi
else
    echo "install-deps: rustup not found; install clippy, rustfmt and the nightly toolchain yourself" >&2
fi

if command -v cargo >/dev/null 2>&1; then
    if [[ $(cbindgen --version 2>/dev/null) != "cbindgen $CBINDGEN_VERSION" ]]; then
        echo "install-deps: cargo install cbindgen $CBINDGEN_VERSION"
        cargo install --locked cbindgen --version "$CBINDGEN_VERSION"
    fi
else
    echo "install-deps: cargo not found; install cbindgen $CBINDGEN_VERSION yourself" >&2
fi
