//! More addresses being resolved than the ARP cache holds (a guest sending to every host of a
//! /16, none of which answers): the cache evicts resolutions in progress, and what waited for
//! them is released (frames dropped and counted, connections failed), not kept forever, while
//! traffic to a neighbour that answers goes on.

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::api::SocketError;
use slimtcp::iface::arp_cache::ArpConfig;
use slimtcp::iface::{DropReason, InterfaceConfig};
use slimtcp::nic::memwire::LinkConfig;
use slimtcp::sim::{SimPair, A_IP, B_IP};
use slimtcp::tcp::ConnError;
use slimtcp::wire::EthernetAddress;

const CAPACITY: usize = 16;
const TARGETS: u16 = 300;
const PORT: u16 = 9000;

fn nobody(i: u16) -> SocketAddrV4 {
    // 10.0.1.0 onwards: inside A's /16, never B (10.0.0.2).
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 1 + (i / 250) as u8, 1 + (i % 250) as u8), PORT)
}

#[test]
fn evicted_resolutions_release_what_waited_for_them() {
    let mut a_cfg = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0x0a]), A_IP, 16);
    a_cfg.arp = ArpConfig { capacity: CAPACITY, ..ArpConfig::default() };
    let b_cfg = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0x0b]), B_IP, 16);
    let mut sim = SimPair::new(LinkConfig::default(), a_cfg, b_cfg).expect("sim");

    // A connection whose next hop never answers, evicted soon by the datagrams below.
    let stuck = sim.a.tcp_connect(sim.now(), nobody(TARGETS + 1)).expect("connect");
    sim.step().expect("step");
    let a_udp = sim.a.udp_bind(0).expect("bind a");
    let b_udp = sim.b.udp_bind(PORT).expect("bind b");
    let mut got = Vec::new();
    let mut buf = [0u8; 16];
    let mut take = |sim: &mut SimPair| {
        while let Ok((n, _)) = sim.b.udp_recv_from(b_udp, &mut buf) {
            got.push(u16::from_be_bytes([buf[0], buf[n - 1]]));
        }
        got.len()
    };
    for i in 0..TARGETS {
        let now = sim.now();
        sim.a.udp_send_to(now, a_udp, b"anyone?", Some(nobody(i))).expect("held for ARP");
        // Traffic to B goes on meanwhile.
        sim.a
            .udp_send_to(now, a_udp, &i.to_be_bytes(), Some(SocketAddrV4::new(B_IP, PORT)))
            .expect("send to b");
        sim.step().expect("step");
        assert!(sim.a.neighbors_pending() <= CAPACITY, "{} addresses held", sim.a.neighbors_pending());
        take(&mut sim);
    }
    let arrived = sim.run_until(100_000, |s| take(s) == usize::from(TARGETS)).expect("run");
    assert!(arrived, "B received {} of {TARGETS}", take(&mut sim));
    assert_eq!(got, (0..TARGETS).collect::<Vec<u16>>(), "every datagram to B, in order");
    let dropped = sim.a.counters().dropped(DropReason::Unresolved);
    assert!(dropped >= u64::from(TARGETS) - CAPACITY as u64, "{dropped} dropped as unresolved");
    let mut b = [0u8; 1];
    assert_eq!(
        sim.a.tcp_recv(stuck, &mut b),
        Err(SocketError::Connection(ConnError::Unreachable)),
        "the evicted connection failed"
    );
    // The rest fails by timeout: nothing is left waiting.
    let drained = sim.run_until(100_000, |s| s.a.neighbors_pending() == 0).expect("run");
    assert!(drained, "{} addresses still held", sim.a.neighbors_pending());
}
