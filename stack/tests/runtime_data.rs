//! The host runtime's socket API carries data correctly, in both modes, with the same
//! application code: echo, bulk transfers with copy and zero-copy buffers, epoll with many
//! sockets, non-blocking connect, UDP with addresses.

mod runtime_pair;

use std::net::{Ipv4Addr, SocketAddrV4};

use runtime_pair::{pair, Mode, PairConfig, A_IP, B_IP};
use slimtcp::api::{
    EpollEvent, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName, SocketApi, SocketError, ZeroCopyTx,
};
use slimtcp_testkit::data::{named_stream, pattern, pattern_mismatch, NamedStreamCheck};

fn listener<A: SocketApi>(api: &mut A, port: u16) -> Fd {
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).expect("bind");
    api.listen(l, 128).expect("listen");
    l
}

fn connect<A: SocketApi>(api: &mut A, port: u16) -> Fd {
    let s = api.socket(Proto::Tcp).expect("socket");
    api.connect(s, SocketAddrV4::new(B_IP, port)).expect("connect");
    s
}

fn send_all<A: SocketApi>(api: &mut A, fd: Fd, mut data: &[u8]) {
    while !data.is_empty() {
        let n = api.send(fd, data).expect("send");
        data = &data[n..];
    }
}

/// Reads until end of stream, checking stream `seed`; returns the byte count.
fn recv_pattern_to_end<A: SocketApi>(api: &mut A, fd: Fd, seed: u64) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        let n = api.recv(fd, &mut buf).expect("recv");
        if n == 0 {
            return offset;
        }
        assert_eq!(pattern_mismatch(seed, offset, &buf[..n]), None, "stream {seed} corrupt near {offset}");
        offset += n as u64;
    }
}

fn send_pattern<A: SocketApi>(api: &mut A, fd: Fd, seed: u64, len: u64, chunk: usize) {
    let mut buf = vec![0u8; chunk];
    let mut offset = 0u64;
    while offset < len {
        let n = chunk.min((len - offset) as usize);
        pattern(seed, offset, &mut buf[..n]);
        send_all(api, fd, &buf[..n]);
        offset += n as u64;
    }
}

fn echo(mode: Mode) {
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    let l = listener(&mut server, 7);
    std::thread::scope(|s| {
        s.spawn(move || {
            let (c, peer) = server.accept(l).expect("accept");
            assert_eq!(*peer.ip(), A_IP);
            let mut buf = [0u8; 4096];
            loop {
                let n = server.recv(c, &mut buf).expect("server recv");
                if n == 0 {
                    break;
                }
                send_all(&mut server, c, &buf[..n]);
            }
            server.close(c).expect("close");
        });
        let c = connect(&mut client, 7);
        assert_eq!(client.peer_addr(c).expect("peer"), SocketAddrV4::new(B_IP, 7));
        assert_eq!(*client.local_addr(c).expect("local").ip(), A_IP);
        let total = 200_000u64;
        let mut msg = vec![0u8; 1000];
        let mut back = vec![0u8; 1000];
        let mut offset = 0;
        while offset < total {
            pattern(1, offset, &mut msg);
            send_all(&mut client, c, &msg);
            let mut got = 0;
            while got < msg.len() {
                got += client.recv(c, &mut back[got..]).expect("client recv");
            }
            assert_eq!(back, msg, "echo at {offset}");
            offset += msg.len() as u64;
        }
        client.shutdown(c, Shutdown::Write).expect("shutdown");
        assert_eq!(client.recv(c, &mut back).expect("eof"), 0, "end of stream after the server closed");
        client.close(c).expect("close");
    });
}

fn bulk_copy_both_ways(mode: Mode) {
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    const UP: u64 = 24 << 20;
    const DOWN: u64 = 8 << 20;
    let l = listener(&mut server, 5001);
    std::thread::scope(|s| {
        s.spawn(move || {
            let (c, _) = server.accept(l).expect("accept");
            assert_eq!(recv_pattern_to_end(&mut server, c, 11), UP);
            send_pattern(&mut server, c, 12, DOWN, 7000);
            server.close(c).expect("close");
        });
        let c = connect(&mut client, 5001);
        send_pattern(&mut client, c, 11, UP, 65536);
        client.shutdown(c, Shutdown::Write).expect("shutdown");
        assert_eq!(recv_pattern_to_end(&mut client, c, 12), DOWN);
        client.close(c).expect("close");
    });
}

fn bulk_zero_copy(mode: Mode) {
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    const LEN: u64 = 16 << 20;
    const BUF: usize = 16 * 1024;
    let l = listener(&mut server, 5002);
    std::thread::scope(|s| {
        s.spawn(move || {
            let (c, _) = server.accept(l).expect("accept");
            let mut offset = 0u64;
            while let Some(buf) = server.recv_zc(c).expect("recv_zc") {
                assert_eq!(pattern_mismatch(21, offset, buf.as_ref()), None, "corrupt near {offset}");
                offset += buf.as_ref().len() as u64;
                server.free_rx(buf);
            }
            assert_eq!(offset, LEN);
            server.send(c, b"done").expect("ack");
            server.close(c).expect("close");
        });
        let c = connect(&mut client, 5002);
        let mut offset = 0u64;
        let mut batch = Vec::new();
        while offset < LEN || !batch.is_empty() {
            while batch.len() < 8 && offset < LEN {
                let mut b = client.alloc_tx(BUF).expect("alloc_tx");
                pattern(21, offset, b.space_mut());
                b.set_len(BUF);
                offset += BUF as u64;
                batch.push(b);
            }
            client.send_zc(c, &mut batch).expect("send_zc");
        }
        client.shutdown(c, Shutdown::Write).expect("shutdown");
        let mut ack = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            got += client.recv(c, &mut ack[got..]).expect("ack");
        }
        assert_eq!(&ack, b"done");
        assert!(
            slimtcp_testkit::wait::wait_for(std::time::Duration::from_secs(10), || {
                client.progress().expect("progress");
                client.tx_buffers_outstanding() == 0
            }),
            "every buffer came back once acknowledged"
        );
        client.close(c).expect("close");
    });
}

/// 64 connections, each carrying its own stream, with non-blocking sockets driven by epoll on
/// both sides: level-triggered writes on the client, edge-triggered reads on the server.
fn epoll_many_sockets(mode: Mode) {
    const CONNS: usize = 64;
    const PER_CONN: u64 = 64 * 1024;
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    let l = listener(&mut server, 5003);
    std::thread::scope(|s| {
        s.spawn(move || {
            server.setsockopt(l, SockOpt::NonBlocking(true)).expect("nonblocking");
            let ep = server.epoll_create().expect("epoll");
            server
                .epoll_ctl(ep, EpollOp::Add, l, EpollEvent { events: Ready::IN, data: u64::MAX })
                .expect("add");
            // Per connection: its fd and the check of its named stream.
            let mut conns: Vec<(Fd, NamedStreamCheck)> = Vec::new();
            let mut finished = 0;
            let mut events = [EpollEvent::default(); 32];
            let mut buf = vec![0u8; 16 * 1024];
            while finished < CONNS {
                let n = server.epoll_wait(ep, &mut events, -1).expect("epoll_wait");
                for ev in &events[..n] {
                    if ev.data == u64::MAX {
                        loop {
                            match server.accept(l) {
                                Ok((c, _)) => {
                                    server.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
                                    let data = conns.len() as u64;
                                    let reg =
                                        EpollEvent { events: Ready::IN | Ready::RDHUP | Ready::ET, data };
                                    server.epoll_ctl(ep, EpollOp::Add, c, reg).expect("add conn");
                                    conns.push((c, NamedStreamCheck::new()));
                                }
                                Err(SocketError::WouldBlock) => break,
                                Err(e) => panic!("accept: {e}"),
                            }
                        }
                        continue;
                    }
                    let (c, check) = &mut conns[ev.data as usize];
                    // Edge-triggered: read until EAGAIN.
                    loop {
                        match server.recv(*c, &mut buf) {
                            Ok(0) => {
                                assert_eq!(check.bytes(), PER_CONN, "stream {:?} length", check.seed());
                                server.close(*c).expect("close");
                                finished += 1;
                                break;
                            }
                            Ok(n) => check.feed(&buf[..n]),
                            Err(SocketError::WouldBlock) => break,
                            Err(e) => panic!("recv: {e}"),
                        }
                    }
                }
            }
        });
        let ep = client.epoll_create().expect("epoll");
        let mut state = Vec::new();
        for i in 0..CONNS {
            let c = client.socket(Proto::Tcp).expect("socket");
            client.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
            assert_eq!(client.connect(c, SocketAddrV4::new(B_IP, 5003)), Err(SocketError::InProgress));
            client
                .epoll_ctl(ep, EpollOp::Add, c, EpollEvent { events: Ready::OUT, data: i as u64 })
                .expect("add");
            state.push((c, named_stream(1000 + i as u64, PER_CONN as usize), 0usize));
        }
        let mut done = 0;
        let mut events = [EpollEvent::default(); 16];
        while done < CONNS {
            let n = client.epoll_wait(ep, &mut events, -1).expect("epoll_wait");
            for ev in &events[..n] {
                let (c, data, sent) = &mut state[ev.data as usize];
                assert!(
                    !ev.events.contains(Ready::ERR),
                    "connect failed: {:?}",
                    client.getsockopt(*c, SockOptName::Error)
                );
                loop {
                    match client.send(*c, &data[*sent..]) {
                        Ok(n) => *sent += n,
                        Err(SocketError::WouldBlock) => break,
                        Err(e) => panic!("send: {e}"),
                    }
                    if *sent == data.len() {
                        client.epoll_ctl(ep, EpollOp::Delete, *c, EpollEvent::default()).expect("delete");
                        client.shutdown(*c, Shutdown::Write).expect("shutdown");
                        done += 1;
                        break;
                    }
                }
            }
        }
        assert_eq!(client.getsockopt(state[0].0, SockOptName::Error), Ok(SockOpt::Error(None)));
    });
}

fn nonblocking_connect_reports_through_epoll(mode: Mode) {
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    let _l = listener(&mut server, 80);
    let ep = client.epoll_create().expect("epoll");
    // Success: EINPROGRESS, then OUT, and SO_ERROR says nothing went wrong.
    let ok = client.socket(Proto::Tcp).expect("socket");
    client.setsockopt(ok, SockOpt::NonBlocking(true)).expect("nonblocking");
    assert_eq!(client.connect(ok, SocketAddrV4::new(B_IP, 80)), Err(SocketError::InProgress));
    // Still connecting (EALREADY), or already done (EISCONN) when the worker is quick.
    let again = client.connect(ok, SocketAddrV4::new(B_IP, 80));
    assert!(matches!(again, Err(SocketError::Already | SocketError::IsConnected)), "{again:?}");
    client.epoll_ctl(ep, EpollOp::Add, ok, EpollEvent { events: Ready::OUT, data: 1 }).expect("add");
    let mut events = [EpollEvent::default(); 4];
    // The server's side is stepped by the same worker group (or thread): poll it too.
    let mut n = 0;
    while n == 0 {
        server.progress().expect("server progress");
        n = client.epoll_wait(ep, &mut events, 10).expect("wait");
    }
    assert_eq!((events[0].data, events[0].events & Ready::OUT), (1, Ready::OUT));
    assert_eq!(client.getsockopt(ok, SockOptName::Error), Ok(SockOpt::Error(None)));
    assert_eq!(client.connect(ok, SocketAddrV4::new(B_IP, 80)), Err(SocketError::IsConnected));
    // Refused: EINPROGRESS, then ERR|HUP with SO_ERROR = ECONNREFUSED.
    let refused = client.socket(Proto::Tcp).expect("socket");
    client.setsockopt(refused, SockOpt::NonBlocking(true)).expect("nonblocking");
    assert_eq!(client.connect(refused, SocketAddrV4::new(B_IP, 81)), Err(SocketError::InProgress));
    client.epoll_ctl(ep, EpollOp::Add, refused, EpollEvent { events: Ready::IN, data: 2 }).expect("add");
    let mut n = 0;
    while n == 0 {
        server.progress().expect("server progress");
        n = client.epoll_wait(ep, &mut events, 10).expect("wait");
        n = events[..n].iter().filter(|e| e.data == 2).count();
    }
    let mut reported = Ready::empty();
    let k = client.epoll_wait(ep, &mut events, 0).expect("wait");
    for e in &events[..k] {
        if e.data == 2 {
            reported = e.events;
        }
    }
    assert!(reported.contains(Ready::ERR | Ready::HUP), "reported {reported:?}");
    let err = client.getsockopt(refused, SockOptName::Error).expect("SO_ERROR");
    assert_eq!(err, SockOpt::Error(Some(SocketError::Connection(slimtcp::tcp::ConnError::Refused))));
    assert_eq!(
        client.getsockopt(refused, SockOptName::Error),
        Ok(SockOpt::Error(None)),
        "SO_ERROR reads once"
    );
}

fn udp_with_addresses(mode: Mode) {
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    let srv = server.socket(Proto::Udp).expect("socket");
    server.bind(srv, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5353)).expect("bind");
    assert_eq!(server.local_addr(srv).expect("local"), SocketAddrV4::new(B_IP, 5353));
    let cli = client.socket(Proto::Udp).expect("socket");
    // Unbound: the first send binds an ephemeral port.
    assert_eq!(client.send_to(cli, b"ping", SocketAddrV4::new(B_IP, 5353)), Ok(4));
    let cli_addr = client.local_addr(cli).expect("local");
    assert_eq!(*cli_addr.ip(), A_IP);
    assert_ne!(cli_addr.port(), 0);
    let mut buf = [0u8; 64];
    std::thread::scope(|s| {
        s.spawn(|| {
            let (n, from) = server.recv_from(srv, &mut buf).expect("recv_from");
            assert_eq!((&buf[..n], from), (&b"ping"[..], cli_addr));
            assert_eq!(server.send_to(srv, b"pong!", from), Ok(5));
        });
        let mut back = [0u8; 64];
        let (n, from) = client.recv_from(cli, &mut back).expect("recv_from");
        assert_eq!((&back[..n], from), (&b"pong!"[..], SocketAddrV4::new(B_IP, 5353)));
    });
    // Connected UDP: send/recv without addresses; truncation; too large.
    client.connect(cli, SocketAddrV4::new(B_IP, 5353)).expect("udp connect");
    assert_eq!(client.send(cli, &[7u8; 100]), Ok(100));
    let mut small = [0u8; 10];
    let (n, _) = server.recv_from(srv, &mut small).expect("recv_from");
    assert_eq!(n, 10, "a datagram is truncated to the buffer");
    assert_eq!(client.send(cli, &[0u8; 2000]), Err(SocketError::MessageTooLong));
}

/// Non-blocking calls alone (no epoll, no blocking call) see what arrived meanwhile.
fn nonblocking_calls_make_progress_without_epoll(mode: Mode) {
    let p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    let l = listener(&mut server, 6000);
    server.setsockopt(l, SockOpt::NonBlocking(true)).expect("nonblocking");
    let c = client.socket(Proto::Tcp).expect("socket");
    client.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
    assert_eq!(client.connect(c, SocketAddrV4::new(B_IP, 6000)), Err(SocketError::InProgress));
    let conn = loop {
        match server.accept(l) {
            Ok((conn, _)) => break conn,
            Err(SocketError::WouldBlock) => {}
            Err(e) => panic!("accept: {e}"),
        }
    };
    server.setsockopt(conn, SockOpt::NonBlocking(true)).expect("nonblocking");
    let data = vec![0x5a_u8; 10_000];
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < data.len() {
        if sent < data.len() {
            match client.send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(SocketError::WouldBlock) => {}
                Err(e) => panic!("send: {e}"),
            }
        }
        match server.recv(conn, &mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(SocketError::WouldBlock) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    assert_eq!(got, data);
}

both_modes! {
    nonblocking_calls_make_progress_without_epoll => nonblocking_calls_make_progress_without_epoll;
    echo_returns_every_byte => echo;
    bulk_transfer_copy_both_directions => bulk_copy_both_ways;
    bulk_transfer_zero_copy => bulk_zero_copy;
    epoll_drives_many_nonblocking_sockets => epoll_many_sockets;
    nonblocking_connect_reports_through_epoll => nonblocking_connect_reports_through_epoll;
    udp_send_and_receive_with_addresses => udp_with_addresses;
}

/// A busy-polling single-thread runtime (a pinned DPDK lcore's) moves the same bytes: its
/// waits spin instead of napping, nothing else changes.
#[test]
fn echo_returns_every_byte_when_the_single_thread_busy_polls() {
    echo(Mode::SingleBusyPoll);
}
