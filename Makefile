# SlimTCP developer entry points. `make demo` and `make test` are the two that matter.
SHELL := /bin/bash
CARGO ?= cargo
# One compiler job per core (CI and `make test` have the machine to themselves); a session that
# shares the machine with another heavy job sets CARGO_BUILD_JOBS=1.
export CARGO_BUILD_JOBS ?= $(shell nproc)
# Under `make test`, namespace tests must run: a missing privilege fails instead of skipping.
export SLIMTCP_REQUIRE_NETNS ?= 1

.PHONY: all deps build test lint asan bench demo demo-vm demo-stack fuzz clean vm-image soak

all: build

deps:
	./scripts/install-deps.sh

build: deps
	$(CARGO) build --release --workspace --all-targets

# The guest of the real-VM tier (tests/tests/vm_*.rs): Debian kernel + busybox initramfs, cached
# under target/vm (a re-run only checks it), plus the static guest apps (slimtcp-vm-guest,
# slimtcp-perf) as an overlay.
vm-image: deps
	./scripts/build-guest-image.sh
	./scripts/build-guest-apps.sh

# Release: the simulations are heavy. Leftover namespaces are cleaned up even when tests fail.
# The guest image and its static apps are built first, so the VM tests (QEMU from deps) run for real. --no-fail-fast:
# one failing test binary does not hide the results of the others.
# The DPDK tests (feature `dpdk`, one EAL per test binary) run in a second pass.
test: deps
	@status=0; \
	./scripts/build-guest-image.sh && \
	$(CARGO) build --release --workspace --all-targets && \
	./scripts/build-guest-apps.sh && \
	$(CARGO) test --release --workspace --no-fail-fast && \
	$(CARGO) build --release -p slimtcp --features dpdk --example tap_echo && $(CARGO) test --release -p slimtcp --features dpdk --test 'dpdk_*' --test 'interop_dpdk_*' && \
	$(CARGO) build --release -p slimtcp-vhost --features dpdk --bin slimtcp-vhost && \
	$(CARGO) test --release -p slimtcp-system-tests --features dpdk --test e2e_guest_dpdk_tap --test cli_dpdk --test sandbox && \
	$(CARGO) test --release -p slimtcp-perf --features dpdk --test 'dpdk_*' && \
	./scripts/fuzz.sh 20 || status=$$?; \
	./scripts/cleanup-netns.sh; \
	exit $$status

# The backend's, the guest library's and the ABI's tests under AddressSanitizer (with
# LeakSanitizer; doctests are not instrumented): nightly, a debug build in its own target
# directory. About 5 minutes; CI runs it after `make test`.
asan: deps
	CARGO_TARGET_DIR=target/asan RUSTFLAGS="-Zsanitizer=address" $(CARGO) +nightly test \
		--target x86_64-unknown-linux-gnu --lib --bins --tests -p slimtcp-vhost -p slimtcp-guest -p slimtcp-abi

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	./scripts/check-c-header.sh

# Criterion benchmarks of the stack and of the backend's chain access (beside virtio-queue's
# Reader/Writer): target/bench/bench.txt; then the paper's experiments 1 and 2 (SlimTCP over memwire,
# two-core runtime, beside Linux over a veth pair): target/bench/experiments.{md,json}; SlimTCP
# beside smoltcp over memwire (experiment 1, 64 B round trips, callgrind instructions per
# segment): target/bench/peers.{md,json}, callgrind.{md,json}; the guest path's instructions per
# segment (engine_cost: guest driver, tenant engine, both stacks, one thread):
# target/bench/guest_cost.{md,json}; the host runtime's end to end (slimtcp-perf --runtime single,
# MSS 64/1460, copy and zero-copy): target/bench/runtime_cost.{md,json}; the paper's method over DPDK
# memif (two processes, one pinned core each, 5 runs per MSS, spread, beside the seed's C stack):
# target/bench/paper_memif.{md,json}; then the guest-library path beside
# the host runtime over memwire, TAP and DPDK memif: target/bench/guest_path.{md,json}
# (GUEST_PATH_LINKS=memif for one link); goodput under random loss (0.1/1/5% each way, nftables)
# SlimTCP <-> Linux over TAP beside Linux <-> Linux over veth: target/bench/loss.{md,json}; the
# TAP's checksum offload beside software checksums: target/bench/tap_offload.{md,json}; last,
# PNG plots of all of it: target/bench/*.png.
bench: deps
	mkdir -p target/bench
	set -o pipefail; $(CARGO) bench -p slimtcp 2>&1 | tee target/bench/bench.txt
	set -o pipefail; $(CARGO) bench -p slimtcp-vhost --bench chain_access 2>&1 | tee -a target/bench/bench.txt
	./scripts/bench-experiments.sh
	./scripts/bench-peers.sh
	./scripts/bench-guest-cost.sh
	./scripts/bench-runtime-cost.sh
	./scripts/bench-paper-memif.sh
	set -o pipefail; $(CARGO) bench -p slimtcp-perf --features dpdk --bench guest_path 2>&1 | tee target/bench/guest_path.txt
	set -o pipefail; $(CARGO) bench -p slimtcp-perf --features dpdk --bench guest_path_fair 2>&1 | tee target/bench/guest_path_fair.txt
	./scripts/bench-loss.sh
	./scripts/bench-tap-offload.sh
	./scripts/bench-preload.sh
	./scripts/bench-plots.sh

demo: deps
	$(CARGO) build --release -p slimtcp-vhost --bin slimtcp-vhost
	$(CARGO) build --release -p slimtcp-guest --example guest_demo
	./scripts/demo.sh

# The accelerator with a real VM: QEMU (vmm-configs/qemu/slimtcp-vm.sh, TCG here) boots the
# guest image with the static guest apps; inside it slimtcp-perf --nic pci sends to a Linux
# receiver and slimtcp-vm-guest runs a verified echo, through slimtcp-vhost. About a minute.
demo-vm: deps
	$(CARGO) build --release -p slimtcp-vhost --bin slimtcp-vhost -p slimtcp-perf --bin slimtcp-perf
	./scripts/build-guest-image.sh
	./scripts/build-guest-apps.sh
	./scripts/demo-vm.sh

# The stack alone (no backend): SlimTCP's tap_echo example serving Linux clients over TAP.
demo-stack: deps
	$(CARGO) build --release -p slimtcp --example tap_echo
	./scripts/demo_stack.sh

# The soak (docs/operating.md, "Soak"): three tenants of the backend in one process, 4,096
# churning connections over memwire (faults on one link, hostile chains on a second queue pair),
# a hostile VMM on the third tenant; exact data, no growth, everything released at the end.
# SOAK_SECONDS (default 1200) of load; summary in target/soak/summary.json, log in
# target/soak/soak.log. A 60 s version is tools/soak/tests/soak.rs (in make test).
SOAK_SECONDS ?= 1200
soak: deps
	$(CARGO) build --release -p slimtcp-soak --bin slimtcp-soak
	SOAK_SECONDS=$(SOAK_SECONDS) ./target/release/slimtcp-soak

# Long fuzzing runs: FUZZ_SECONDS per target (default 300), or FUZZ_RUNS executions per target
# (no time cap unless FUZZ_SECONDS is given too); a table of executions per target at the end.
# `make test` runs each target briefly. See docs/operating.md, "Fuzzing".
FUZZ_SECONDS ?= $(if $(FUZZ_RUNS),,300)
fuzz:
	./scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	$(CARGO) clean
	./scripts/cleanup-netns.sh
