//! End to end over DPDK: an application linked with slimtcp-guest (vhost-user transport) ->
//! slimtcp-vhost -> DPDK `net_tap` -> the Linux kernel in a namespace made by each test. One EAL
//! serves this binary; each test adds its own `net_tap` port from inside its namespace.
//!
//! The tenant's worker runs under the DPDK worker's seccomp filter, as in `slimtcp-vhost`
//! (docs/operating.md, "Sandboxing"): every test ends by checking that no filtered thread of
//! this process was refused a system call, and `the_worker_runs_under_the_dpdk_filter` checks
//! that the worker is filtered at all.

#![cfg(feature = "dpdk")]

mod e2e;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use e2e::{Tenant, LINUX_IP};
use slimtcp::nic::dpdk::{create_vdev, DpdkNic, Eal, PortConfig};
use slimtcp::nic::tap::configure_host_side;
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;
use slimtcp_vhost::engine::SessionReport;
use slimtcp_vhost::sandbox::trap;

const EAL_ARGS: &[&str] =
    &["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "0", "--log-level=warning"];

static NEXT_VDEV: AtomicU32 = AtomicU32::new(1);

/// A DPDK tenant ([`Tenant`]) whose `finish` also checks that the sandbox refused nothing.
struct Filtered(Tenant);

impl std::ops::Deref for Filtered {
    type Target = Tenant;

    fn deref(&self) -> &Tenant {
        &self.0
    }
}

impl Filtered {
    /// [`Tenant::finish`], then: no filtered thread of this process (every test here runs a
    /// DPDK tenant) made a system call its filter forbids (the refusal would also be a line
    /// `slimtcp-vhost: sandbox: thread ... forbids` on stderr).
    fn finish(self) -> SessionReport {
        let report = self.0.finish();
        assert_eq!(trap::refused(), 0, "a seccomp filter refused a call the DPDK tenant needs (see stderr)");
        report
    }
}

/// A tenant whose NIC is a fresh `net_tap` port, created by the backend thread inside the
/// tenant's namespace (so the kernel interface appears there).
fn tenant(tag: &str) -> Filtered {
    let iface = Netns::unique_ifname("e2ed");
    let vdev = format!("net_tap{}", NEXT_VDEV.fetch_add(1, Ordering::Relaxed));
    Filtered(Tenant::start_dpdk(tag, move || {
        let eal = Eal::init(EAL_ARGS.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .map_err(|e| e.to_string())?;
        create_vdev(eal, &vdev, &format!("iface={iface}")).map_err(|e| e.to_string())?;
        let mut port = PortConfig::new(&vdev);
        port.promiscuous = true;
        let nic = DpdkNic::open(eal, &port).map_err(|e| e.to_string())?.pop().ok_or("no queue")?;
        configure_host_side(&iface, LINUX_IP, 24).map_err(|e| e.to_string())?;
        Ok(nic)
    }))
}

e2e_tests!(tenant);

/// The seccomp mode (0 none, 2 filter) of this process's thread named `name` (as the kernel
/// keeps it: at most 15 bytes).
fn seccomp_mode_of_thread(name: &str) -> Option<u32> {
    std::fs::read_dir("/proc/self/task").expect("this process's threads").flatten().find_map(|task| {
        let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
        if comm.trim() != name {
            return None;
        }
        let status = std::fs::read_to_string(task.path().join("status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix("Seccomp:")).and_then(|v| v.trim().parse().ok())
    })
}

#[test]
fn the_worker_runs_under_the_dpdk_filter() {
    slimtcp_testkit::require_netns!();
    let t = tenant("sbx");
    let mut api = t.guest();
    let (bound, server) =
        linux_peer::spawn_tcp_echo_server(&t.ns, SocketAddr::from((LINUX_IP, 7000)), 1, e2e::LIMIT)
            .expect("echo server");
    let SocketAddr::V4(bound) = bound else { unreachable!("IPv4") };
    e2e::echo_messages(&mut api, bound, 5, 64, 4096);
    server.join().expect("echo server");
    // The worker is there while the guest is attached; its name is the tenant's (e2e-sbx).
    assert_eq!(seccomp_mode_of_thread("e2e-sbx-worker"), Some(2), "the DPDK worker is filtered");
    assert_eq!(seccomp_mode_of_thread("e2e-sbx-ctl"), Some(2), "its control thread too");
    drop(api);
    t.finish();
}
