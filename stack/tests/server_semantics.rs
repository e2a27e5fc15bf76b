//! The socket server's semantics, executed over a test transport: what every transport of the
//! server (the guest protocol in the backend; the host runtime's rings) inherits.
//!
//! Specification (the server on side A of a memwire link, a plain interface as its peer on
//! side B, one virtual clock):
//! - options follow one set of rules: buffers 2048..=64 MiB, MSS up to the NIC's MTU less 40,
//!   handshake settings final once started (`EISCONN`), UDP sockets take only the buffers;
//! - `bind` to port 0 takes distinct ephemeral ports from the interface's one cursor; a port a
//!   socket holds is `EADDRINUSE` for the next, and free again once that socket is closed;
//! - a send is held until the peer acknowledged it, then completes (in order, with its length);
//!   bytes in flight are bounded by the send buffer (`EAGAIN`, then `Writable` with the room);
//! - received bytes hold the receive window until released: the peer cannot send more than the
//!   receive buffer ahead of the releases; releasing more than was taken is `EINVAL`;
//! - the end of a stream is reported once; a reset fails the held sends first, then is
//!   reported once;
//! - a connection closed with held sends finishes them (their completions still come), then
//!   the socket is gone;
//! - connections a listener gets past the socket limit wait in the stack's accept queue and are
//!   handed out as sockets close.

use std::net::SocketAddrV4;
use std::time::Duration;

use slimtcp::api::{Proto, SockOpt, SocketError};
use slimtcp::iface::{Interface, SocketHandle, FIRST_EPHEMERAL_PORT};
use slimtcp::nic::memwire::{self, LinkConfig, MemwireNic};
use slimtcp::server::{Connecting, Event, ServerEvent, ServerLimits, SocketServer, StreamReady, Transport};
use slimtcp::sim::{default_configs, B_IP};
use slimtcp::time::{Clock, VirtualClock};

const PEER_PORT: u16 = 7000;

/// Sends and connects named by numbers; payload in the test's own vectors.
#[derive(Debug)]
struct Test;

impl Transport for Test {
    type Send = u32;
    type Call = u32;
    type Payload = Vec<u8>;
}

fn limits() -> ServerLimits {
    ServerLimits {
        max_sockets: 64,
        max_send_in_flight: 64 * 1024,
        default_sndbuf: 16 * 1024,
        default_rcvbuf: 64 * 1024,
        max_backlog: 16,
        max_datagram: 1472,
    }
}

struct World {
    clock: VirtualClock,
    server: SocketServer<MemwireNic, Test>,
    peer: Interface<MemwireNic>,
    listener: Option<SocketHandle>,
    events: Vec<ServerEvent<Test>>,
}

impl World {
    fn new() -> World {
        World::with_limits(limits())
    }

    fn with_limits(limits: ServerLimits) -> World {
        let (a, b) = memwire::link(LinkConfig::default()).expect("link");
        let (ca, cb) = default_configs();
        let clock = VirtualClock::new();
        let server = SocketServer::new(Interface::new(a, ca), Clock::Virtual(clock.clone()), limits);
        World { clock, server, peer: Interface::new(b, cb), listener: None, events: Vec::new() }
    }

    /// Polls both sides, collecting the server's events; moves the clock when both are idle.
    fn step(&mut self) {
        let busy = self.server.poll().expect("server poll");
        let busy = self.peer.poll(self.clock.now()).expect("peer poll") || busy;
        while let Some(e) = self.server.next_event() {
            self.events.push(e);
        }
        if !busy {
            self.clock.advance(Duration::from_millis(1));
        }
    }

    fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut World) -> bool) {
        for _ in 0..20_000 {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("never: {what}");
    }

    /// A connection from the server to a peer listener: (server id, peer handle).
    fn connected(&mut self) -> (u32, SocketHandle) {
        let listener = self.peer_listener();
        let id = self.server.open(0, Proto::Tcp).expect("open");
        let started = self.server.connect(id, SocketAddrV4::new(B_IP, PEER_PORT), 7).expect("connect");
        assert!(matches!(started, Connecting::Started(local) if local.port() >= FIRST_EPHEMERAL_PORT));
        self.run_until("connected", |w| {
            w.take(|e| matches!(e.what, Event::ConnectDone { call: 7, result: Ok(_) }))
        });
        let mut peer = None;
        self.run_until("accepted by the peer", |w| {
            peer = w.peer.tcp_accept(listener).ok();
            peer.is_some()
        });
        (id, peer.expect("accepted"))
    }

    /// Removes the first event matching `f`; true when there was one.
    fn take(&mut self, f: impl Fn(&ServerEvent<Test>) -> bool) -> bool {
        match self.events.iter().position(f) {
            Some(i) => {
                self.events.remove(i);
                true
            }
            None => false,
        }
    }

    fn send_done(&self) -> Vec<(u32, Result<usize, SocketError>)> {
        self.events
            .iter()
            .filter_map(|e| match &e.what {
                Event::SendDone { send, result } => Some((*send, *result)),
                _ => None,
            })
            .collect()
    }

    /// Everything readable on `id` now, released or not.
    fn read_all(&mut self, id: u32) -> Vec<u8> {
        let mut out = Vec::new();
        while self.server.ready(id) == StreamReady::Data {
            self.server.stream_read(id, 1000, |b| out.extend_from_slice(b));
        }
        out
    }
}

#[test]
fn options_follow_one_set_of_rules() {
    let mut w = World::new();
    let s = w.server.open(0, Proto::Tcp).expect("open");
    assert_eq!(w.server.set_option(s, SockOpt::RecvBuffer(1024)), Err(SocketError::InvalidInput));
    assert_eq!(w.server.set_option(s, SockOpt::Mss(1461)), Err(SocketError::InvalidInput), "MTU 1500");
    assert_eq!(w.server.set_option(s, SockOpt::NoDelay(false)), Err(SocketError::InvalidInput));
    w.server.set_option(s, SockOpt::Mss(1460)).expect("the MTU's MSS");
    w.server.set_option(s, SockOpt::RecvBuffer(1 << 20)).expect("1 MiB");
    let cfg = w.server.tcp_config_of(s).expect("config");
    assert_eq!((cfg.mss, cfg.rx_buffer, cfg.window_scale), (1460, 1 << 20, Some(5)));
    assert_eq!(cfg.tx_buffer, 64 * 1024, "the stack never refuses a loan below the largest send buffer");
    w.server.bind(s, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 80)).expect("bind");
    w.server.listen(s, 4).expect("listen");
    assert_eq!(w.server.set_option(s, SockOpt::RecvBuffer(4096)), Err(SocketError::IsConnected));
    w.server.set_option(s, SockOpt::SendBuffer(4096)).expect("the send buffer may change any time");
    w.server.set_option(s, SockOpt::KeepAlive(true)).expect("so may liveness");
    let u = w.server.open(0, Proto::Udp).expect("udp");
    assert_eq!(w.server.set_option(u, SockOpt::Mss(536)), Err(SocketError::NotSupported));
    w.server.set_option(u, SockOpt::RecvBuffer(4096)).expect("buffers");
}

/// A UDP server that connects one socket per client binds a fresh one to the same port for the
/// next (iperf3's UDP server does): a port holds one unconnected socket beside connected ones.
#[test]
fn a_udp_port_holds_one_unconnected_socket_beside_connected_ones() {
    let mut w = World::new();
    let at = |p| SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, p);
    let client = SocketAddrV4::new(B_IP, 4000);
    let a = w.server.open(0, Proto::Udp).expect("a");
    let b = w.server.open(0, Proto::Udp).expect("b");
    let c = w.server.open(0, Proto::Udp).expect("c");
    assert_eq!(w.server.bind(a, at(5300)).map(|l| l.port()), Ok(5300));
    assert_eq!(w.server.bind(b, at(5300)), Err(SocketError::AddrInUse), "two unconnected sockets");
    w.server.connect(a, client, 1).expect("connect a");
    assert_eq!(w.server.bind(b, at(5300)).map(|l| l.port()), Ok(5300), "beside a connected one");
    assert_eq!(w.server.bind(c, at(5300)), Err(SocketError::AddrInUse), "b is the unconnected one now");
    assert_eq!(
        w.server.connect(b, client, 2).map(|_| ()),
        Err(SocketError::AddrInUse),
        "one socket per peer"
    );
    w.server.connect(b, SocketAddrV4::new(B_IP, 4001), 3).expect("another peer");
    w.server.close(a, false).expect("close a");
    w.server.close(b, false).expect("close b");
    assert_eq!(w.server.bind(c, at(5300)).map(|l| l.port()), Ok(5300), "free again");
}

#[test]
fn bind_takes_distinct_ports_and_frees_them_on_close() {
    let mut w = World::new();
    let any = SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0);
    let a = w.server.open(0, Proto::Tcp).expect("a");
    let b = w.server.open(0, Proto::Tcp).expect("b");
    let pa = w.server.bind(a, any).expect("bind a").port();
    let pb = w.server.bind(b, any).expect("bind b").port();
    assert!(pa >= FIRST_EPHEMERAL_PORT && pb >= FIRST_EPHEMERAL_PORT && pa != pb, "{pa} {pb}");
    let c = w.server.open(0, Proto::Tcp).expect("c");
    let at = |p| SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, p);
    assert_eq!(w.server.bind(c, at(pa)), Err(SocketError::AddrInUse));
    assert_eq!(w.server.bind(c, SocketAddrV4::new(B_IP, 80)), Err(SocketError::AddrNotAvailable));
    w.server.close(a, false).expect("close a");
    assert_eq!(w.server.bind(c, at(pa)).map(|l| l.port()), Ok(pa), "free again");
    assert_eq!(w.server.bind(a, at(1)), Err(SocketError::BadHandle), "closed ids are gone");
}

#[test]
fn sends_complete_in_order_once_acknowledged_within_the_send_buffer() {
    let mut w = World::new();
    let (id, peer) = w.connected();
    w.server.send(id, 6000, [vec![1; 4000], vec![2; 2000]], 1).expect("send 1");
    w.server.send(id, 8000, [vec![3; 8000]], 2).expect("send 2");
    assert_eq!(w.server.send(id, 4000, [vec![4; 4000]], 3), Err(SocketError::WouldBlock), "16 KiB buffer");
    assert_eq!(w.server.send(id, 20_000, [vec![5; 20_000]], 4), Err(SocketError::MessageTooLong));
    assert!(w.send_done().is_empty(), "held until acknowledged");
    let mut got = Vec::new();
    w.run_until("both sends acknowledged", |w| {
        let mut buf = [0u8; 4096];
        while let Ok(n) = w.peer.tcp_recv(peer, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        w.send_done().len() == 2
    });
    assert_eq!(w.send_done(), vec![(1, Ok(6000)), (2, Ok(8000))]);
    assert!(w.take(|e| matches!(e.what, Event::Writable { .. })), "room again");
    assert_eq!(got.len(), 14_000);
    assert!(got[..4000].iter().all(|&b| b == 1) && got[6000..].iter().all(|&b| b == 3));
}

#[test]
fn received_bytes_hold_the_window_until_released() {
    let mut w = World::new();
    let s = w.server.open(0, Proto::Tcp).expect("open");
    w.server.set_option(s, SockOpt::RecvBuffer(4096)).expect("small window");
    w.server.set_option(s, SockOpt::WindowScale(Some(0))).expect("no scaling");
    let listener = w.peer_listener();
    w.server.connect(s, SocketAddrV4::new(B_IP, PEER_PORT), 1).expect("connect");
    let mut peer = None;
    w.run_until("accepted", |w| {
        peer = w.peer.tcp_accept(listener).ok();
        peer.is_some()
    });
    let peer = peer.expect("peer");
    let mut sent = 0;
    let mut got = Vec::new();
    for _ in 0..2000 {
        sent += w.peer.tcp_send(peer, &[9; 1000]).unwrap_or(0);
        w.step();
        got.extend(w.read_all(s));
    }
    let held = got.len();
    assert!((3000..=4096).contains(&held), "a window taken and not released stops the peer: {held}");
    assert_eq!(w.server.release(s, held + 1), Err(SocketError::InvalidInput), "more than was taken");
    w.server.release(s, held).expect("release");
    w.run_until("more after the release", |w| {
        got.extend(w.read_all(s));
        got.len() > held
    });
    assert!(sent > 4096);
}

/// `stream_read` hands exactly the bytes that fit, in order, whatever the room: within one
/// segment, across several, none (room 0), the rest of a segment cut before first;
/// `stream_readable` says how many are left to hand.
#[test]
fn stream_reads_take_any_room_in_order() {
    let mut w = World::new();
    let (id, peer) = w.connected();
    let data: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    w.run_until("all sent and acknowledged", |w| {
        sent += w.peer.tcp_send(peer, &data[sent..]).unwrap_or(0);
        sent == data.len() && w.peer.tcp_info(peer).is_ok_and(|i| i.send_queued == 0)
    });
    assert_eq!(w.server.ready(id), StreamReady::Data);
    let mut got = Vec::new();
    for room in [0, 1, 999, 0, 1001, 2500, 7, 0, 10_000] {
        assert_eq!(w.server.stream_readable(id), data.len() - got.len(), "before room {room}");
        let mut calls = Vec::new();
        let n = w.server.stream_read(id, room, |b| calls.push(b.to_vec()));
        assert!(n <= room, "room {room}: {n}");
        assert_eq!(
            calls.iter().map(Vec::len).sum::<usize>(),
            n,
            "room {room}: the bytes handed are the count"
        );
        got.extend(calls.concat());
    }
    assert_eq!(got, data, "every byte once, in order");
    assert_eq!(w.server.stream_readable(id), 0, "nothing left");
    assert_eq!(w.server.stream_readable(id + 1000), 0, "no such socket");
    w.server.release(id, data.len()).expect("all of it was taken");
}

impl World {
    /// The peer's listener on [`PEER_PORT`].
    fn peer_listener(&mut self) -> SocketHandle {
        match self.listener {
            Some(l) => l,
            None => {
                let l = self.peer.tcp_listen(PEER_PORT, 8).expect("peer listen");
                self.listener = Some(l);
                l
            }
        }
    }
}

#[test]
fn eof_and_resets_are_reported_once_after_the_held_sends_fail() {
    let mut w = World::new();
    let (id, peer) = w.connected();
    w.run_until("nothing to read yet", |w| {
        let nothing = w.server.ready(id) == StreamReady::Nothing;
        w.server.readable_done(id);
        w.events.clear();
        nothing
    });
    w.peer.tcp_close(peer).expect("peer close");
    w.run_until("readable", |w| w.take(|e| e.id == id && matches!(e.what, Event::Readable)));
    assert_eq!(w.server.ready(id), StreamReady::Eof);
    assert_eq!(w.server.ready(id), StreamReady::Nothing, "once");
    w.server.readable_done(id);

    let (id2, peer2) = w.connected();
    w.server.send(id2, 100, [vec![1; 100]], 11).expect("send");
    w.peer.tcp_abort(peer2).expect("peer reset");
    // The transport pulls on `Readable`: that is where a reset is found.
    w.run_until("reset", |w| {
        let _ = w.server.ready(id2);
        w.events.iter().any(|e| e.id == id2 && matches!(e.what, Event::Reset { .. }))
    });
    let order: Vec<&'static str> = w
        .events
        .iter()
        .filter(|e| e.id == id2)
        .filter_map(|e| match e.what {
            Event::SendDone { result: Err(_), .. } => Some("send failed"),
            Event::Reset { .. } => Some("reset"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["send failed", "reset"]);
    for _ in 0..10 {
        w.step();
        let _ = w.server.ready(id2);
    }
    let resets = w.events.iter().filter(|e| e.id == id2 && matches!(e.what, Event::Reset { .. })).count();
    assert_eq!(resets, 1, "once");
}

#[test]
fn a_closed_connection_finishes_its_sends_then_is_gone() {
    let mut w = World::new();
    let (id, peer) = w.connected();
    w.server.send(id, 3000, [vec![7; 3000]], 21).expect("send");
    w.server.close(id, false).expect("close");
    assert_eq!(w.server.send(id, 1, [vec![0]], 22), Err(SocketError::BadHandle), "gone for requests");
    assert_eq!(w.server.socket_count(), 1, "but finishing its send");
    let mut got = 0;
    w.run_until("the send completed and the socket went", |w| {
        let mut buf = [0u8; 4096];
        while let Ok(n) = w.peer.tcp_recv(peer, &mut buf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        w.server.socket_count() == 0
    });
    assert_eq!(w.send_done(), vec![(21, Ok(3000))]);
    assert_eq!(got, 3000);
}

#[test]
fn connections_past_the_socket_limit_wait_until_a_socket_closes() {
    let mut w = World::with_limits(ServerLimits { max_sockets: 3, ..limits() });
    let l = w.server.open(0, Proto::Tcp).expect("listener");
    w.server.bind(l, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 80)).expect("bind");
    w.server.listen(l, 8).expect("listen");
    let server_ip = w.server.iface().config().ip;
    let peers: Vec<SocketHandle> = (0..3)
        .map(|_| w.peer.tcp_connect(w.clock.now(), SocketAddrV4::new(server_ip, 80)).expect("connect"))
        .collect();
    let accepted = |w: &World| -> Vec<u32> {
        w.events
            .iter()
            .filter_map(|e| match e.what {
                Event::Accepted { socket, .. } if e.id == l => Some(socket),
                _ => None,
            })
            .collect()
    };
    w.run_until("two accepted", |w| accepted(w).len() == 2);
    for _ in 0..200 {
        w.step();
    }
    assert_eq!(accepted(&w).len(), 2, "the third waits: listener + 2 is the limit");
    assert_eq!(w.server.open(0, Proto::Tcp), Err(SocketError::TooManySockets));
    let first = accepted(&w)[0];
    w.server.close(first, false).expect("close one");
    w.run_until("the third handed out", |w| accepted(w).len() == 3);
    assert_eq!(peers.len(), 3);
}

#[test]
fn a_send_whose_loans_came_back_without_news_is_completed_by_the_sweep() {
    let mut w = World::new();
    let (id, peer) = w.connected();
    let (quiet, _) = w.connected();
    w.server.send(id, 3000, [vec![6; 3000]], 9).expect("send");
    // The stack's news of the returned loans is lost (as a path that returned them silently
    // would lose it): the interface is polled and its activity dropped.
    let mut got = 0;
    let mut dropped = Vec::new();
    for _ in 0..200 {
        let now = w.clock.now();
        w.server.iface_mut().poll(now).expect("server iface poll");
        w.server.iface_mut().take_activity(&mut dropped);
        dropped.clear();
        w.peer.poll(now).expect("peer poll");
        let mut buf = [0u8; 4096];
        while let Ok(n) = w.peer.tcp_recv(peer, &mut buf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        w.clock.advance(Duration::from_millis(1));
    }
    assert_eq!(got, 3000, "the peer has it all and acknowledged it");
    assert_eq!(w.server.held_sends(id), 1, "no news: the send is still held");
    assert_eq!(w.server.held_sends(quiet), 0);
    // The sweep runs at most 100 ms apart: the send completes without any activity.
    w.run_until("the sweep completes the send", |w| w.send_done() == vec![(9, Ok(3000))]);
    assert_eq!(w.server.held_sends(id), 0);
    // A socket that holds sends again is swept again.
    w.server.send(id, 1000, [vec![7; 1000]], 10).expect("send again");
    w.run_until("acknowledged", |w| w.send_done().len() == 2);
    assert_eq!(w.send_done()[1], (10, Ok(1000)));
}
