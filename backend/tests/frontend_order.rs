//! The daemon driven by the vhost crate's frontend in the message orders QEMU and
//! cloud-hypervisor use (features re-sent per queue pair, rings enabled late, the memory table
//! replaced), then a reconnect to the same socket path. Each session ends with a hello answered
//! over the real rings.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::vmm::{connect, memfd_memory, negotiate, regions, setup_ring, QSIZE};
use common::PairDriver;
use slimtcp::iface::InterfaceConfig;
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{Request, RequestBody, RxMessage, SocketId, Version};
use slimtcp_vhost::device::DEVICE_FEATURES;
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant, StopHandle, TenantConfig};
use vhost::vhost_user::message::VhostUserVirtioFeatures;
use vhost::vhost_user::VhostUserFrontend;
use vhost::VhostBackend;
use vmm_sys_util::eventfd::EventFd;

const PAIRS: usize = 2;

/// A hello on pair 0, answered over the rings.
fn hello_round_trip(pair: &mut PairDriver<'_>, kick_rx: &EventFd, kick_tx: &EventFd, cookie: u64) {
    pair.post(4, 1024);
    pair.request(
        &Request::new(cookie, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT }),
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = kick_rx.write(1);
        let _ = kick_tx.write(1);
        let msgs = pair.messages();
        if let Some((m, _)) = msgs.first() {
            assert!(
                matches!(m, RxMessage::HelloDone { cookie: c, result: Ok(_), .. } if *c == cookie),
                "{m:?}"
            );
            return;
        }
        assert!(Instant::now() < deadline, "no hello_done");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn start_daemon(path: &Path, connections: usize) -> (StopHandle, std::thread::JoinHandle<()>) {
    let stop = StopHandle::default();
    let cfg = TenantConfig {
        socket: path.to_path_buf(),
        iface: InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1".parse().expect("ip"), 24),
        pairs: PAIRS,
        core: None,
        name: "test".into(),
        sandbox: Sandbox::default(),
        limits: Default::default(),
    };
    let s = stop.clone();
    let t = std::thread::spawn(move || {
        // The peer end is dropped: frames go nowhere, which this test does not need.
        let make = || -> Result<MemwireNic, String> {
            Ok(link(LinkConfig::default()).map_err(|e| e.to_string())?.0)
        };
        serve_tenant(&cfg, make, &s, Some(connections)).expect("serve");
    });
    (stop, t)
}

fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("slimtcp-vhost-{}-{name}.sock", std::process::id()))
}

#[test]
fn qemu_order_then_memory_table_replaced_then_cloud_hypervisor_order_after_reconnect() {
    let path = socket_path("order");
    let (_stop, daemon) = start_daemon(&path, 2);

    // Session 1, QEMU's order: features once per queue pair (one vhost_dev each), memory table,
    // rings, and SET_VRING_ENABLE only at the end, pair by pair.
    {
        let mem = memfd_memory();
        let mut f = connect(&path, PAIRS);
        let features = negotiate(&mut f, PAIRS);
        let acked = features & (DEVICE_FEATURES | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits());
        let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
        let p1 = PairDriver::new(&mem, 1, QSIZE, 1 << 20);
        let fds: Vec<(EventFd, EventFd)> =
            (0..4).map(|_| (EventFd::new(0).expect("call"), EventFd::new(0).expect("kick"))).collect();
        for (pair, d) in [&p0, &p1].into_iter().enumerate() {
            f.set_features(acked).expect("set_features");
            f.set_mem_table(&regions(&mem)).expect("set_mem_table");
            setup_ring(&mut f, &mem, 2 * pair, &d.rx, (&fds[2 * pair].0, &fds[2 * pair].1), 0);
            setup_ring(&mut f, &mem, 2 * pair + 1, &d.tx, (&fds[2 * pair + 1].0, &fds[2 * pair + 1].1), 0);
        }
        for i in 0..4 {
            f.set_vring_enable(i, true).expect("enable");
        }
        hello_round_trip(&mut p0, &fds[0].1, &fds[1].1, 1);
        // The memory table is replaced (same memory, new message): traffic continues.
        f.set_mem_table(&regions(&mem)).expect("replace mem table");
        hello_round_trip(&mut p0, &fds[0].1, &fds[1].1, 2);
        // The frontend goes away (VMM killed): dropping closes the socket.
    }

    // Session 2 on the same path, cloud-hypervisor's order: everything set, then all rings
    // enabled at activation.
    {
        let mem = memfd_memory();
        let mut f = connect(&path, PAIRS);
        let features = negotiate(&mut f, PAIRS);
        let acked = features & (DEVICE_FEATURES | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits());
        f.set_features(acked).expect("set_features");
        f.set_mem_table(&regions(&mem)).expect("set_mem_table");
        let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
        let p1 = PairDriver::new(&mem, 1, QSIZE, 1 << 20);
        let fds: Vec<(EventFd, EventFd)> =
            (0..4).map(|_| (EventFd::new(0).expect("call"), EventFd::new(0).expect("kick"))).collect();
        setup_ring(&mut f, &mem, 0, &p0.rx, (&fds[0].0, &fds[0].1), 0);
        setup_ring(&mut f, &mem, 1, &p0.tx, (&fds[1].0, &fds[1].1), 0);
        setup_ring(&mut f, &mem, 2, &p1.rx, (&fds[2].0, &fds[2].1), 0);
        setup_ring(&mut f, &mem, 3, &p1.tx, (&fds[3].0, &fds[3].1), 0);
        for i in 0..4 {
            f.set_vring_enable(i, true).expect("enable");
        }
        hello_round_trip(&mut p0, &fds[0].1, &fds[1].1, 3);
    }
    daemon.join().expect("daemon thread");
    let _ = std::fs::remove_file(&path);
}
