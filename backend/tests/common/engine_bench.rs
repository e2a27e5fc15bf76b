//! The tenant engine stepped by the test against a SlimTCP peer over the in-memory wire: the
//! guest side is a [`PairDriver`] per queue pair over [`LocalRings`].

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slimtcp::iface::{Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{Errno, Request, RequestBody, RxMessage, SocketId, SocketKind, Version};
use slimtcp_vhost::engine::{Engine, EngineConfig, TenantLimits};
use slimtcp_vhost::guest_mem::GuestMem;
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
    bench_with_limits(pairs, max_requests, &TenantLimits::default())
}

pub fn bench_with_limits(pairs: usize, max_requests: Option<u32>, limits: &TenantLimits) -> Bench {
    let (a, b) = link(LinkConfig::default()).expect("link");
    let guest = Interface::new(a, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), GUEST_IP, 24));
    let peer = Interface::new(b, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 2]), PEER_IP, 24));
    let mut cfg = EngineConfig::with_limits(&guest, pairs, QSIZE, limits);
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

/// Pair 0 of a one-pair bench after hello, with a TCP socket connected to the peer.
pub struct Connected<'m> {
    pub p0: PairDriver<'m>,
    pub rings: LocalRings,
    /// The guest's socket.
    pub sock: SocketId,
    /// The peer's end of the connection.
    pub conn: SocketHandle,
    /// Pair 0's messages so far (cookies 1 to 3 used).
    pub seen: Vec<Vec<(RxMessage, Vec<u8>)>>,
}

/// Says hello on pair 0 (64 receive buffers of 4 KiB posted) and connects a TCP socket to the
/// peer, which listens on `port`.
pub fn connected<'m>(b: &mut Bench, mem: &'m Arc<GuestMem>, port: u16) -> Connected<'m> {
    let listener = b.peer.tcp_listen(port, 4).expect("peer listen");
    let mut p0 = PairDriver::new(mem, 0, QSIZE, 0);
    let rings = LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    p0.post(64, 4096);
    p0.request(&hello(1), &[]);
    p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp }), &[]);
    let mut seen = vec![Vec::new()];
    run_until(b, &rings, mem, &mut [&mut p0], &mut seen, |s| socket_of(&s[0], 2).is_some());
    let sock = socket_of(&seen[0], 2).expect("socket");
    let remote = SocketAddrV4::new(PEER_IP, port);
    p0.request(&Request::new(3, sock, RequestBody::Connect { remote }), &[]);
    run_until(b, &rings, mem, &mut [&mut p0], &mut seen, |s| socket_of(&s[0], 3).is_some());
    let conn = b.peer.tcp_accept(listener).expect("peer accepted");
    Connected { p0, rings, sock, conn, seen }
}
