//! End to end over DPDK: an application linked with slimtcp-guest (vhost-user transport) ->
//! slimtcp-vhost -> DPDK `net_tap` -> the Linux kernel in a namespace made by each test. One EAL
//! serves this binary; each test adds its own `net_tap` port from inside its namespace.

#![cfg(feature = "dpdk")]

mod e2e;

use std::sync::atomic::{AtomicU32, Ordering};

use e2e::{Tenant, LINUX_IP};
use slimtcp::nic::dpdk::{create_vdev, DpdkNic, Eal, PortConfig};
use slimtcp::nic::tap::configure_host_side;
use slimtcp_testkit::netns::Netns;

const EAL_ARGS: &[&str] =
    &["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "0", "--log-level=warning"];

static NEXT_VDEV: AtomicU32 = AtomicU32::new(1);

/// A tenant whose NIC is a fresh `net_tap` port, created by the backend thread inside the
/// tenant's namespace (so the kernel interface appears there).
fn tenant(tag: &str) -> Tenant {
    let iface = Netns::unique_ifname("e2ed");
    let vdev = format!("net_tap{}", NEXT_VDEV.fetch_add(1, Ordering::Relaxed));
    Tenant::start_dpdk(tag, move || {
        let eal = Eal::init(EAL_ARGS.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .map_err(|e| e.to_string())?;
        create_vdev(eal, &vdev, &format!("iface={iface}")).map_err(|e| e.to_string())?;
        let mut port = PortConfig::new(&vdev);
        port.promiscuous = true;
        let nic = DpdkNic::open(eal, &port).map_err(|e| e.to_string())?.pop().ok_or("no queue")?;
        configure_host_side(&iface, LINUX_IP, 24).map_err(|e| e.to_string())?;
        Ok(nic)
    })
}

e2e_tests!(tenant);
