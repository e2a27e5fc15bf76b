//! The tenant engine stepped by the test against a SlimTCP peer over the in-memory wire: the
//! guest side is a [`PairDriver`] per queue pair over [`LocalRings`].

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{Errno, Request, RequestBody, RxMessage, SocketId, Version};
use slimtcp_vhost::engine::{Engine, EngineConfig};
use slimtcp_vhost::queues::LocalRings;

use super::PairDriver;

pub const QSIZE: u16 = 256;
pub const GUEST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub struct Bench {
    pub engine: Engine<MemwireNic>,
    pub peer: Interface<MemwireNic>,
    pub clock: Clock,
}

pub fn bench(pairs: usize, max_requests: Option<u32>) -> Bench {
    let (a, b) = link(LinkConfig::default()).expect("link");
    let guest = Interface::new(a, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), GUEST_IP, 24));
    let peer = Interface::new(b, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 2]), PEER_IP, 24));
    let mut cfg = EngineConfig::new(&guest, pairs, QSIZE);
    if let Some(m) = max_requests {
        cfg.limits.max_requests = m;
        cfg.hello.max_requests = m;
    }
    let clock = Clock::real();
    Bench { engine: Engine::new(guest, clock.clone(), cfg), peer, clock }
}

impl Bench {
    pub fn step(&mut self, rings: &LocalRings, mem: &Arc<slimtcp_vhost::guest_mem::GuestMem>) {
        self.engine.step(rings, mem).expect("engine step");
        self.peer.poll(self.clock.now()).expect("peer poll");
    }
}

pub fn hello(cookie: u64) -> Request {
    Request::new(cookie, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT })
}

pub fn error_of(msgs: &[(RxMessage, Vec<u8>)], cookie: u64) -> Option<Errno> {
    msgs.iter().find_map(|(m, _)| match m {
        RxMessage::Complete { cookie: c, result: Err(e), .. } if *c == cookie => Some(*e),
        _ => None,
    })
}

pub fn socket_of(msgs: &[(RxMessage, Vec<u8>)], cookie: u64) -> Option<SocketId> {
    msgs.iter().find_map(|(m, _)| match m {
        RxMessage::Complete { cookie: c, socket, result: Ok(_), .. } if *c == cookie => Some(*socket),
        _ => None,
    })
}

/// Runs steps until `done` holds for the collected messages of pair 0 and pair 1 (5 s at most).
pub fn run_until(
    b: &mut Bench,
    rings: &LocalRings,
    mem: &Arc<slimtcp_vhost::guest_mem::GuestMem>,
    drivers: &mut [&mut PairDriver<'_>],
    seen: &mut [Vec<(RxMessage, Vec<u8>)>],
    done: impl Fn(&[Vec<(RxMessage, Vec<u8>)>]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done(seen) {
        assert!(Instant::now() < deadline, "scenario did not complete: {seen:?}");
        b.step(rings, mem);
        for (d, s) in drivers.iter_mut().zip(seen.iter_mut()) {
            s.extend(d.messages());
        }
    }
}
