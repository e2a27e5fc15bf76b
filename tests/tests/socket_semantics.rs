//! One semantic suite, executed over both transports of the stack's socket server: the host
//! runtime's rings (`slimtcp::runtime`) and the guest protocol's virtqueues (the guest library
//! attached over vhost-user to `slimtcp-vhost`, guest memory in this process). The same
//! application code must see the same answers on both.
//!
//! Specification (the provider on one end of a memwire link, a SlimTCP echo server (the host
//! runtime on its own thread) on the other):
//! - option limits: a receive buffer below 2048 B, an MSS above the link's MTU less 40, a window
//!   scale above 14, `TCP_NODELAY` off: `EINVAL`; the receive buffer after `listen`: `EISCONN`;
//!   keepalive on a live connection: accepted; a 1 MiB buffer offers window scale 5;
//! - ports: `bind` to port 0 takes an ephemeral port (49152 and up), two sockets get two;
//!   binding a port another socket holds: `EADDRINUSE`; a huge backlog is cut, not refused;
//! - a connection's end of stream is `recv` = 0, every time after the data;
//! - a connect to a port nobody listens on: `ECONNREFUSED`;
//! - sends larger than the send buffer complete as the peer acknowledges (the loans come back
//!   and the credit with them), and the echo returns every byte in order;
//! - thousands of small echoes left unread on one connection never stop another socket being
//!   made and connected, and then all read in order;
//! - connections whose peer never reads take sends until full (10 of them, small sends on one,
//!   1 KiB sends on the rest) and the application's other connections still send, receive,
//!   connect and close.

mod e2e;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use e2e::{Tenant, GUEST_IP};
use slimtcp::api::{Proto, Shutdown, SockOpt, SockOptName, SocketApi, SocketError};
use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::memwire::{self, LinkConfig, MemwireNic};
use slimtcp::runtime::{self, HostSockets};
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;

const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 61, 0, 1);
const PROVIDER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x61, 0x02]);
const PEER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x61, 0x01]);
const ECHO_PORT: u16 = 7;
const CLOSED_PORT: u16 = 9;

fn name<T>(r: Result<T, SocketError>) -> Result<T, &'static str> {
    r.map_err(SocketError::name)
}

/// The suite: the same calls and the same answers on every provider.
fn semantics<A: SocketApi>(api: &mut A) {
    let any = |port| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    let peer = |port| SocketAddrV4::new(PEER_IP, port);

    // Option limits, one set of rules.
    let s = api.socket(Proto::Tcp).expect("socket");
    assert_eq!(name(api.setsockopt(s, SockOpt::RecvBuffer(1024))), Err("EINVAL"));
    assert_eq!(name(api.setsockopt(s, SockOpt::Mss(1461))), Err("EINVAL"), "MTU 1500");
    assert_eq!(name(api.setsockopt(s, SockOpt::WindowScale(Some(15)))), Err("EINVAL"));
    assert_eq!(name(api.setsockopt(s, SockOpt::NoDelay(false))), Err("EINVAL"));
    api.setsockopt(s, SockOpt::RecvBuffer(1 << 20)).expect("1 MiB");
    assert_eq!(api.getsockopt(s, SockOptName::WindowScale), Ok(SockOpt::WindowScale(Some(5))));

    // Ports.
    api.bind(s, any(0)).expect("ephemeral bind");
    let port = api.local_addr(s).expect("bound").port();
    assert!(port >= 49_152, "ephemeral: {port}");
    let t = api.socket(Proto::Tcp).expect("socket");
    api.bind(t, any(0)).expect("another ephemeral bind");
    assert_ne!(api.local_addr(t).expect("bound").port(), port);
    let u = api.socket(Proto::Tcp).expect("socket");
    assert_eq!(name(api.bind(u, any(port))), Err("EADDRINUSE"));
    api.listen(s, 1 << 20).expect("a huge backlog is cut, not refused");
    assert_eq!(name(api.setsockopt(s, SockOpt::RecvBuffer(4096))), Err("EISCONN"), "after listen");
    for fd in [s, t, u] {
        api.close(fd).expect("close");
    }

    // Refused.
    let r = api.socket(Proto::Tcp).expect("socket");
    assert_eq!(name(api.connect(r, peer(CLOSED_PORT))), Err("ECONNREFUSED"));
    api.close(r).expect("close");

    // Sends past the send buffer complete as they are acknowledged; end of stream is 0, always.
    let c = api.socket(Proto::Tcp).expect("socket");
    api.setsockopt(c, SockOpt::SendBuffer(4096)).expect("small send buffer");
    api.connect(c, peer(ECHO_PORT)).expect("connect");
    api.setsockopt(c, SockOpt::KeepAlive(true)).expect("keepalive on a live connection");
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut back = Vec::new();
    let mut buf = [0u8; 4096];
    while sent < data.len() {
        sent += api.send(c, &data[sent..]).expect("send");
        // Read the echo as it comes, so the peer's window never stalls it.
        api.setsockopt(c, SockOpt::NonBlocking(true)).expect("non-blocking");
        while let Ok(n) = api.recv(c, &mut buf) {
            back.extend_from_slice(&buf[..n]);
        }
        api.setsockopt(c, SockOpt::NonBlocking(false)).expect("blocking");
    }
    api.shutdown(c, Shutdown::Write).expect("shutdown");
    loop {
        let n = api.recv(c, &mut buf).expect("recv");
        if n == 0 {
            break;
        }
        back.extend_from_slice(&buf[..n]);
    }
    assert_eq!(back.len(), data.len(), "every byte echoed");
    assert!(back == data, "in order");
    assert_eq!(api.recv(c, &mut buf), Ok(0), "end of stream, again");
    api.close(c).expect("close");

    // Data an application has not read yet never holds up its other sockets: thousands of
    // small echoes wait unread on one connection (more messages than a guest posts receive
    // buffers) while another socket is made and connected; then every echo reads, in order.
    let a = api.socket(Proto::Tcp).expect("socket");
    api.connect(a, peer(ECHO_PORT)).expect("connect");
    let small: Vec<u8> = (0..SMALL_MESSAGES * 16).map(|i| (i % 253) as u8).collect();
    for piece in small.chunks(16) {
        assert_eq!(api.send(a, piece), Ok(piece.len()));
        // Paced: each message its own segment, and its echo too.
        std::thread::sleep(Duration::from_micros(50));
    }
    // Time for the last echoes to arrive: not a synchronisation (nothing here waits on it to be
    // correct); the guest's test checks afterwards that they did outnumber its buffers.
    std::thread::sleep(Duration::from_millis(300));
    let b = api.socket(Proto::Tcp).expect("a socket while another's data waits unread");
    // Accepted into the peer's backlog (it serves one connection at a time).
    api.connect(b, peer(ECHO_PORT)).expect("a connect while another's data waits unread");
    api.close(b).expect("close");
    let mut back = Vec::new();
    while back.len() < small.len() {
        let n = api.recv(a, &mut buf).expect("recv");
        assert!(n > 0, "end of stream after {} of {} bytes", back.len(), small.len());
        back.extend_from_slice(&buf[..n]);
    }
    assert!(back == small, "every small echo, in order");
    api.close(a).expect("close");

    // Sends waiting for peers that do not read never hold up the application's other sockets:
    // while the peer serves one connection, others (in its backlog, never read) take sends
    // until their windows and send buffers are full, small ones on the first, 1 KiB ones (long
    // enough to be sent from the application's memory) on the rest; the served connection
    // still echoes, and another socket is made, connected and closed.
    let e = api.socket(Proto::Tcp).expect("socket");
    api.connect(e, peer(ECHO_PORT)).expect("connect");
    assert_eq!(api.send(e, b"served"), Ok(6));
    assert_eq!(read_exactly(api, e, 6), b"served", "the peer serves this connection");
    let mut stuck = Vec::new();
    for i in 0..STUCK_SOCKETS {
        let fd = api.socket(Proto::Tcp).expect("socket");
        api.connect(fd, peer(ECHO_PORT)).expect("connect (the peer's backlog)");
        api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("non-blocking");
        let piece = if i == 0 { 16 } else { 1024 };
        fill_until_refused(api, fd, &vec![7u8; piece]);
        stuck.push(fd);
    }
    assert_eq!(api.send(e, b"still served"), Ok(12), "a send while others' sends wait");
    assert_eq!(read_exactly(api, e, 12), b"still served", "its echo while others' sends wait");
    let b = api.socket(Proto::Tcp).expect("a socket while others' sends wait for the peer");
    api.connect(b, peer(ECHO_PORT)).expect("a connect while others' sends wait for the peer");
    api.close(b).expect("close");
    for fd in stuck {
        api.close(fd).expect("close");
    }
    api.shutdown(e, Shutdown::Write).expect("shutdown");
    assert_eq!(api.recv(e, &mut buf), Ok(0), "end of stream");
    api.close(e).expect("close");
}

/// Connections in the peer's backlog that take sends until full (more than a guest's transmit
/// ring has requests for at one eighth each, its share per socket).
const STUCK_SOCKETS: usize = 10;

/// Sends `piece` on non-blocking `fd` until it is refused (`WouldBlock`) 100 times in a row.
fn fill_until_refused<A: SocketApi>(api: &mut A, fd: slimtcp::api::Fd, piece: &[u8]) {
    let (mut taken, mut refused_in_a_row) = (0usize, 0);
    while refused_in_a_row < 100 {
        match api.send(fd, piece) {
            Ok(n) => {
                taken += n;
                refused_in_a_row = 0;
            }
            Err(SocketError::WouldBlock) => {
                refused_in_a_row += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => panic!("send: {err}"),
        }
        assert!(taken < 64 << 20, "the unread connection took {taken} bytes");
    }
}

/// Exactly `n` bytes of `fd` (blocking reads).
fn read_exactly<A: SocketApi>(api: &mut A, fd: slimtcp::api::Fd, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        let k = api.recv(fd, &mut out[got..]).expect("recv");
        assert!(k > 0, "end of stream after {got} of {n} bytes");
        got += k;
    }
    out
}

/// Small echoes left unread at once (a guest posts 1,024 receive buffers by default).
const SMALL_MESSAGES: usize = 4096;

/// The echo server on the peer end, until `stop`: one connection at a time.
fn echo_peer(nic: MemwireNic, stop: Arc<AtomicBool>, listening: Arc<AtomicBool>) {
    let mut api: HostSockets =
        runtime::single(Interface::new(nic, InterfaceConfig::new(PEER_MAC, PEER_IP, 24)), Clock::real());
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, ECHO_PORT)).expect("bind");
    api.listen(l, 2 * STUCK_SOCKETS).expect("listen");
    api.setsockopt(l, SockOpt::NonBlocking(true)).expect("non-blocking accept");
    listening.store(true, Ordering::Release);
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::Acquire) {
        let Ok((c, _)) = api.accept(l) else {
            let _ = api.progress();
            std::thread::sleep(Duration::from_micros(200));
            continue;
        };
        loop {
            match api.recv(c, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut done = 0;
                    while done < n {
                        match api.send(c, &buf[done..n]) {
                            Ok(k) => done += k,
                            Err(_) => break,
                        }
                    }
                }
            }
        }
        let _ = api.close(c);
    }
}

/// Runs `provider` on one end of a memwire link with the echo peer on the other.
fn with_peer(provider: impl FnOnce(MemwireNic)) {
    let (ours, theirs) = memwire::link(LinkConfig::default()).expect("link");
    let stop = Arc::new(AtomicBool::new(false));
    let listening = Arc::new(AtomicBool::new(false));
    let peer = {
        let (stop, listening) = (stop.clone(), listening.clone());
        std::thread::spawn(move || echo_peer(theirs, stop, listening))
    };
    assert!(
        slimtcp_testkit::wait::wait_for(Duration::from_secs(10), || listening.load(Ordering::Acquire)),
        "the echo peer listens"
    );
    provider(ours);
    stop.store(true, Ordering::Release);
    peer.join().expect("echo peer");
}

#[test]
fn over_the_host_runtime_rings() {
    with_peer(|nic| {
        let mut api = runtime::single(
            Interface::new(nic, InterfaceConfig::new(PROVIDER_MAC, GUEST_IP, 24)),
            Clock::real(),
        );
        semantics(&mut api);
    });
}

#[test]
fn over_the_guest_protocol_virtqueues() {
    slimtcp_testkit::require_netns!();
    with_peer(|nic| {
        let mut nic = Some(nic);
        let tenant =
            Tenant::start("sem", move || nic.take().ok_or_else(|| "the NIC is used once".to_owned()));
        let mut api = tenant.guest();
        semantics(&mut api);
        assert!(api.rx_payloads_copied() > 0, "the small echoes outnumbered the posted buffers");
        drop(api);
        tenant.finish();
    });
}
