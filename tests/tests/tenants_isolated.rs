//! Two tenants of one backend process, each with its own vhost-user socket, worker and TAP link:
//! while tenant B's "guest" floods its transmit queue with hostile descriptor chains (addresses
//! outside its memory or overflowing, device-writable request buffers, garbage headers, requests
//! before hello), tenant A's application moves 100 MB to Linux and back, exactly. B's device
//! keeps returning every chain (no stall), and nothing panics.

mod e2e;

use std::sync::atomic::{AtomicBool, Ordering};

use e2e::Tenant;
use slimtcp_guest::ring::Segment;
use slimtcp_guest::transport::Transport;
use slimtcp_guest::{GuestConfig, VhostUserTransport};
use slimtcp_testkit::netns::Netns;
use slimtcp_testkit::require_netns;

/// Chains one flood round adds, each a different kind of bad request.
fn hostile_chains(base: u64, size: u64) -> Vec<Vec<Segment>> {
    let seg = |gpa: u64, len: u32, writable: bool| Segment { gpa, len, writable };
    vec![
        // Outside the guest's memory.
        vec![seg(base + size + 4096, 64, false)],
        // Overflowing the address space.
        vec![seg(u64::MAX - 16, 64, false)],
        // A request buffer the device may write (wrong direction on a transmit queue).
        vec![seg(base, 64, true)],
        // Garbage (whatever the memory holds: no magic), before any hello.
        vec![seg(base + 4096, 48, false)],
        // Too short for any header.
        vec![seg(base + 8192, 3, false)],
        // A header followed by a payload descriptor outside memory.
        vec![seg(base + 12288, 48, false), seg(base + size * 4, 1 << 20, false)],
    ]
}

#[test]
fn a_hostile_tenant_does_not_disturb_another() {
    require_netns!();
    let a = Tenant::start("good", e2e::tap_nic(Netns::unique_ifname("tga")));
    let b = Tenant::start("evil", e2e::tap_nic(Netns::unique_ifname("tgb")));
    let mut good = a.guest();
    let stop = AtomicBool::new(false);
    let (chains_sent, chains_back) = std::thread::scope(|s| {
        let stop = &stop;
        let socket = b.socket.clone();
        let flood = s.spawn(move || {
            let cfg = GuestConfig::default();
            let mut t = VhostUserTransport::connect(&socket, &cfg).expect("hostile guest attaches");
            let mut qp = t.take_queue_pair(0).expect("queue pair");
            let (base, size) = (qp.memory.gpa(), qp.memory.len() as u64);
            let (mut sent, mut back) = (0u64, 0u64);
            while !stop.load(Ordering::Acquire) {
                for chain in hostile_chains(base, size) {
                    if qp.tx.ring.add(&chain).is_ok() {
                        sent += 1;
                    }
                }
                qp.tx.flush().expect("kick");
                while let Ok(Some(_)) = qp.tx.ring.pop_used() {
                    back += 1;
                }
                std::thread::yield_now();
            }
            // Everything sent comes back.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while back < sent && std::time::Instant::now() < deadline {
                while let Ok(Some(_)) = qp.tx.ring.pop_used() {
                    back += 1;
                }
                std::thread::yield_now();
            }
            (sent, back)
        });
        e2e::guest_to_linux(&mut good, &a.ns, 100_000_000);
        e2e::linux_to_guest(&mut good, &a.ns, 100_000_000);
        stop.store(true, Ordering::Release);
        flood.join().expect("flood thread")
    });
    assert!(chains_sent > 1000, "the flood ran ({chains_sent} chains)");
    assert_eq!(chains_back, chains_sent, "tenant B's device returned every hostile chain");
    drop(good);
    a.finish();
    b.finish();
}
