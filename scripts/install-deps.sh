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
    python3         # Linux-side helpers in tests
    netcat-openbsd  # nc as a Linux-side client/server
    iperf3          # Linux-side throughput peer
    pkg-config      # dpdk-sys finds libdpdk through it
    libdpdk-dev     # DPDK 22.11 (Debian) for the dpdk feature
    valgrind        # callgrind: instructions per segment in benchmarks
    gnuplot-nox     # make bench's PNG plots (scripts/bench-plots.sh)
)

# Rust toolchain components required by `make lint`.
RUSTUP_COMPONENTS=(clippy rustfmt)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} > 0)); then
    echo "install-deps: installing ${missing[*]}"
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
    # tshark asks whether non-root users may capture; answer "no" without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" \
        | "${sudo_cmd[@]}" debconf-set-selections
    export DEBIAN_FRONTEND=noninteractive
    # Several engineers share this machine: wait for the dpkg lock instead of failing.
    apt_opts=(-y -q -o DPkg::Lock::Timeout=600 --no-install-recommends)
    "${sudo_cmd[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install "${missing[@]}"
else
    echo "install-deps: all ${#PACKAGES[@]} Debian packages present"
fi

if command -v rustup >/dev/null 2>&1; then
    installed_components=$(rustup component list --installed 2>/dev/null || true)
    for comp in "${RUSTUP_COMPONENTS[@]}"; do
        if ! grep -q "^${comp}" <<<"$installed_components"; then
            echo "install-deps: rustup component add $comp"
            rustup component add "$comp"
        fi
    done
else
    echo "install-deps: rustup not found; install clippy and rustfmt yourself" >&2
fi
