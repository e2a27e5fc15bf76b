//! Every error path of the host runtime's socket API gives the errno POSIX code expects, in both
//! modes, and nothing waits forever: a refused or timed-out connection, a reset, a dead worker
//! and a full ring all end with errors (or progress), never with a busy loop.

mod runtime_pair;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use runtime_pair::{pair, Mode, PairConfig, B_IP};
use slimtcp::api::{
    EpollEvent, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName, SocketApi, SocketError,
};
use slimtcp::tcp::ConnError;

fn tcp_listener<A: SocketApi>(api: &mut A, port: u16) -> Fd {
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).expect("bind");
    api.listen(l, 16).expect("listen");
    l
}

fn refused_connect_is_econnrefused(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let s = p.client.socket(Proto::Tcp).expect("socket");
    let e = p.client.connect(s, SocketAddrV4::new(B_IP, 9)).expect_err("nobody listens on 9");
    assert_eq!(
        (e, e.name(), e.errno()),
        (SocketError::Connection(ConnError::Refused), "ECONNREFUSED", libc::ECONNREFUSED)
    );
    assert_eq!(p.client.send(s, b"x"), Err(SocketError::Connection(ConnError::Refused)));
}

fn unanswered_syn_is_etimedout(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    // A refused connect first, so the peer's MAC is known (an unanswered ARP is EHOSTUNREACH).
    let warm = p.client.socket(Proto::Tcp).expect("socket");
    assert!(p.client.connect(warm, SocketAddrV4::new(B_IP, 9)).is_err());
    p.server_gate.close();
    let s = p.client.socket(Proto::Tcp).expect("socket");
    let e = p.client.connect(s, SocketAddrV4::new(B_IP, 80)).expect_err("SYNs are dropped");
    assert_eq!(e.name(), "ETIMEDOUT");
}

fn unanswered_arp_is_ehostunreach(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    p.server_gate.close();
    let s = p.client.socket(Proto::Tcp).expect("socket");
    let e = p.client.connect(s, SocketAddrV4::new(B_IP, 80)).expect_err("ARP is not answered");
    assert_eq!(e.name(), "EHOSTUNREACH");
}

fn rto_give_up_is_etimedout(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let (c, _) = p.connected(80, &[]);
    // The peer vanishes: data is never acknowledged, retransmissions give up.
    p.server_gate.close();
    assert_eq!(p.client.send(c, &[1u8; 1000]), Ok(1000));
    let mut buf = [0u8; 16];
    let e = p.client.recv(c, &mut buf).expect_err("the connection times out");
    assert_eq!(e.name(), "ETIMEDOUT");
    assert_eq!(p.client.getsockopt(c, SockOptName::Error), Ok(SockOpt::Error(Some(e))));
}

fn peer_reset_is_econnreset_and_ends_a_blocked_send(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let l = tcp_listener(&mut p.server, 80);
    let c = p.client.socket(Proto::Tcp).expect("socket");
    std::thread::scope(|s| {
        let server = &mut p.server;
        let h = s.spawn(move || {
            let (conn, _) = server.accept(l).expect("accept");
            // Wait for data, then close with unread data: a reset (RFC 2525 2.17).
            let ep = server.epoll_create().expect("epoll");
            server.epoll_ctl(ep, EpollOp::Add, conn, EpollEvent { events: Ready::IN, data: 0 }).expect("add");
            let mut ev = [EpollEvent::default(); 1];
            assert_eq!(server.epoll_wait(ep, &mut ev, -1), Ok(1));
            server.close(conn).expect("close with unread data");
        });
        p.client.connect(c, SocketAddrV4::new(B_IP, 80)).expect("connect");
        // A blocking sender keeps writing: the reset must end it with an error.
        let chunk = vec![0u8; 64 * 1024];
        let e = loop {
            match p.client.send(c, &chunk) {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(e.name(), "ECONNRESET");
        h.join().expect("server thread");
    });
    let mut buf = [0u8; 8];
    assert_eq!(p.client.recv(c, &mut buf).map_err(|e| e.name()), Err("ECONNRESET"));
}

fn use_after_close_is_ebadf(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let s = p.client.socket(Proto::Tcp).expect("socket");
    p.client.close(s).expect("close");
    let mut buf = [0u8; 4];
    for e in [
        p.client.send(s, b"x").expect_err("send"),
        p.client.recv(s, &mut buf).expect_err("recv"),
        p.client.close(s).expect_err("close twice"),
        p.client.connect(s, SocketAddrV4::new(B_IP, 80)).expect_err("connect"),
        p.client.setsockopt(s, SockOpt::NonBlocking(true)).expect_err("setsockopt"),
    ] {
        assert_eq!(e.name(), "EBADF");
    }
    let ep = p.client.epoll_create().expect("epoll");
    assert_eq!(
        p.client.epoll_ctl(ep, EpollOp::Add, s, EpollEvent::default()).map_err(|e| e.name()),
        Err("EBADF")
    );
    p.client.epoll_close(ep).expect("close epoll");
    let mut ev = [EpollEvent::default(); 1];
    assert_eq!(p.client.epoll_wait(ep, &mut ev, 0).map_err(|e| e.name()), Err("EBADF"));
}

fn control_errors_match_posix(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let api = &mut p.client;
    let s = api.socket(Proto::Tcp).expect("socket");
    let name = |r: Result<(), SocketError>| r.map_err(|e| e.name());
    // Not connected yet.
    assert_eq!(api.send(s, b"x").map_err(|e| e.name()), Err("ENOTCONN"));
    assert_eq!(api.recv(s, &mut [0u8; 4]).map_err(|e| e.name()), Err("ENOTCONN"));
    assert_eq!(api.peer_addr(s).map_err(|e| e.name()), Err("ENOTCONN"));
    assert_eq!(name(api.shutdown(s, Shutdown::Write)), Err("ENOTCONN"));
    // Addresses.
    assert_eq!(name(api.bind(s, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 99), 80))), Err("EADDRNOTAVAIL"));
    assert_eq!(name(api.listen(s, 4)), Err("EINVAL"), "listen needs a bound port");
    assert_eq!(api.accept(s).map_err(|e| e.name()), Err("EINVAL"));
    assert_eq!(name(api.connect(s, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80))), Err("EINVAL"));
    assert_eq!(
        name(api.connect(s, SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 1), 80))),
        Err("ENETUNREACH")
    );
    let l1 = tcp_listener(api, 8080);
    let l2 = api.socket(Proto::Tcp).expect("socket");
    assert_eq!(
        name(api.bind(l2, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080))),
        Err("EADDRINUSE"),
        "a port a socket holds, as a kernel (and the guest protocol) checks at bind"
    );
    assert_eq!(name(api.listen(l2, 4)), Err("EINVAL"), "listen needs a bound port");
    // Options.
    assert_eq!(name(api.setsockopt(s, SockOpt::Mss(10))), Err("EINVAL"));
    assert_eq!(name(api.setsockopt(s, SockOpt::RecvBuffer(1))), Err("EINVAL"));
    assert_eq!(name(api.setsockopt(s, SockOpt::WindowScale(Some(15)))), Err("EINVAL"));
    assert_eq!(name(api.setsockopt(s, SockOpt::NoDelay(false))), Err("EINVAL"));
    assert_eq!(name(api.setsockopt(s, SockOpt::Error(None))), Err("EINVAL"));
    assert_eq!(
        name(api.setsockopt(l1, SockOpt::RecvBuffer(1 << 20))),
        Err("EISCONN"),
        "too late after listen"
    );
    api.setsockopt(s, SockOpt::RecvBuffer(1 << 20)).expect("before connect");
    assert_eq!(api.getsockopt(s, SockOptName::RecvBuffer), Ok(SockOpt::RecvBuffer(1 << 20)));
    assert_eq!(
        api.getsockopt(s, SockOptName::WindowScale),
        Ok(SockOpt::WindowScale(Some(5))),
        "scale fits 1 MiB"
    );
    assert_eq!(api.getsockopt(s, SockOptName::NoDelay), Ok(SockOpt::NoDelay(true)));
    // Would block.
    api.setsockopt(l1, SockOpt::NonBlocking(true)).expect("nonblocking");
    assert_eq!(api.accept(l1).map_err(|e| e.name()), Err("EAGAIN"));
    // Epoll registration errors.
    let ep = api.epoll_create().expect("epoll");
    let ev = EpollEvent { events: Ready::IN, data: 0 };
    assert_eq!(name(api.epoll_ctl(ep, EpollOp::Modify, s, ev)), Err("ENOENT"));
    api.epoll_ctl(ep, EpollOp::Add, s, ev).expect("add");
    assert_eq!(name(api.epoll_ctl(ep, EpollOp::Add, s, ev)), Err("EEXIST"));
    assert_eq!(api.epoll_wait(ep, &mut [], 0).map_err(|e| e.name()), Err("EINVAL"));
    // Zero-copy buffer limits.
    assert_eq!(api.alloc_tx(0).err().map(|e| e.name()), Some("EINVAL"));
    assert_eq!(api.alloc_tx(1 << 20).err().map(|e| e.name()), Some("EINVAL"));
    // UDP.
    let u = api.socket(Proto::Udp).expect("udp");
    assert_eq!(name(api.listen(u, 1)), Err("EOPNOTSUPP"));
    assert_eq!(api.send(u, b"x").map_err(|e| e.name()), Err("ENOTCONN"));
    assert_eq!(
        api.send_to(u, &[0u8; 1500], SocketAddrV4::new(B_IP, 9)).map_err(|e| e.name()),
        Err("EMSGSIZE")
    );
}

fn shutdown_write_then_send_is_epipe(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let l = tcp_listener(&mut p.server, 80);
    let c = p.client.socket(Proto::Tcp).expect("socket");
    std::thread::scope(|s| {
        let server = &mut p.server;
        let h = s.spawn(move || {
            let (conn, _) = server.accept(l).expect("accept");
            let mut b = [0u8; 8];
            assert_eq!(server.recv(conn, &mut b), Ok(0), "the FIN arrives as end of stream");
            server.send(conn, b"bye").expect("half-closed: the server may still send");
            server.close(conn).expect("close");
        });
        p.client.connect(c, SocketAddrV4::new(B_IP, 80)).expect("connect");
        p.client.shutdown(c, Shutdown::Write).expect("shutdown");
        assert_eq!(p.client.send(c, b"x").map_err(|e| e.name()), Err("EPIPE"));
        let mut b = [0u8; 8];
        assert_eq!(p.client.recv(c, &mut b), Ok(3));
        assert_eq!(&b[..3], b"bye");
        assert_eq!(p.client.recv(c, &mut b), Ok(0));
        h.join().expect("server thread");
    });
}

/// The NIC fails under a blocked reader: the worker stops, and every waiting or later call ends
/// with ENETDOWN instead of spinning forever.
fn dead_worker_is_enetdown(mode: Mode) {
    let mut p = pair(mode, PairConfig::default());
    let (c, _) = p.connected(80, &[]);
    let gate = p.client_gate.clone();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            gate.break_nic();
        });
        let mut buf = [0u8; 8];
        assert_eq!(p.client.recv(c, &mut buf).map_err(|e| e.name()), Err("ENETDOWN"));
    });
    assert_eq!(p.client.send(c, b"x").map_err(|e| e.name()), Err("ENETDOWN"));
    assert_eq!(
        p.client.socket(Proto::Tcp).map_err(|e| e.name()),
        Err("ENETDOWN"),
        "sockets are the server's"
    );
    if let Some(w) = p.worker.take() {
        assert!(
            slimtcp_testkit::wait::wait_for(Duration::from_secs(5), || w.is_finished()),
            "the worker thread ended"
        );
    }
}

/// Rings of two slots: requests and events queue up, the transfer still completes.
fn tiny_rings_still_carry_a_transfer(mode: Mode) {
    let cfg = PairConfig { ring_capacity: 2, ..PairConfig::default() };
    let mut p = pair(mode, cfg);
    let l = tcp_listener(&mut p.server, 80);
    let c = p.client.socket(Proto::Tcp).expect("socket");
    const LEN: usize = 2 << 20;
    std::thread::scope(|s| {
        let server = &mut p.server;
        let h = s.spawn(move || {
            let (conn, _) = server.accept(l).expect("accept");
            let mut total = 0;
            let mut buf = vec![0u8; 4096];
            loop {
                match server.recv(conn, &mut buf).expect("recv") {
                    0 => break total,
                    n => total += n,
                }
            }
        });
        p.client.connect(c, SocketAddrV4::new(B_IP, 80)).expect("connect");
        let chunk = vec![7u8; 1000];
        let mut sent = 0;
        while sent < LEN {
            sent += p.client.send(c, &chunk[..chunk.len().min(LEN - sent)]).expect("send");
        }
        p.client.shutdown(c, Shutdown::Write).expect("shutdown");
        assert_eq!(h.join().expect("server thread"), LEN);
    });
}

both_modes! {
    refused_connect_is_econnrefused => refused_connect_is_econnrefused;
    unanswered_syn_is_etimedout => unanswered_syn_is_etimedout;
    unanswered_arp_is_ehostunreach => unanswered_arp_is_ehostunreach;
    rto_give_up_is_etimedout => rto_give_up_is_etimedout;
    peer_reset_is_econnreset_and_ends_a_blocked_send => peer_reset_is_econnreset_and_ends_a_blocked_send;
    use_after_close_is_ebadf => use_after_close_is_ebadf;
    control_errors_match_posix => control_errors_match_posix;
    shutdown_write_then_send_is_epipe => shutdown_write_then_send_is_epipe;
    dead_worker_is_enetdown => dead_worker_is_enetdown;
    tiny_rings_still_carry_a_transfer => tiny_rings_still_carry_a_transfer;
}
