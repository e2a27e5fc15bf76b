//! The protocol client against a scripted device: byte-exact requests, event handling, zero
//! copy ownership, credit, disconnects.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use common::fake::{self, Answer, FakeDevice};
use slimtcp_abi::{Done, HelloInfo, Op, Request, RequestBody, RxMessage, SocketId, Version};
use slimtcp_api::{
    ConnError, EpollEvent, EpollOp, Proto, Ready, SockOpt, SockOptName, SocketApi, SocketError, ZeroCopyTx,
};
use slimtcp_guest::{GuestConfig, GuestSockets};

const SID: SocketId = SocketId(42);
const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 49152);
const PEER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5201);

fn info() -> HelloInfo {
    common::hello_info(4096)
}

fn done(req: &Request, socket: SocketId, d: Done) -> (RxMessage, Vec<u8>) {
    (RxMessage::Complete { cookie: req.cookie, socket, op: req.op().code(), result: Ok(d) }, Vec::new())
}

/// A tiny backend: one socket (42) that echoes stream data and holds send chains until the
/// test releases them ("ACK").
fn echo_backend(req: &Request, payload: &[u8]) -> Answer {
    let mut messages = Vec::new();
    let mut hold = false;
    match req.body {
        RequestBody::Hello { .. } => messages.push((
            RxMessage::HelloDone { cookie: req.cookie, version: Version::CURRENT, result: Ok(info()) },
            Vec::new(),
        )),
        RequestBody::Socket { .. } => messages.push(done(req, SID, Done::value(0))),
        RequestBody::Connect { .. } => messages.push(done(req, SID, Done { value: 0, addr: LOCAL })),
        RequestBody::Bind { local } => {
            messages.push(done(req, SID, Done { value: 0, addr: SocketAddrV4::new(*local.ip(), 8080) }))
        }
        RequestBody::Send { len } => {
            hold = true;
            assert_eq!(payload.len(), len as usize);
            // Split as the host does: as much as fits a 2 KiB posted buffer after 40 bytes.
            for chunk in payload.chunks(2048 - 40) {
                messages
                    .push((RxMessage::Data { socket: req.socket, len: chunk.len() as u32 }, chunk.to_vec()));
            }
        }
        RequestBody::Credit { .. } => {}
        _ if req.flags.is_quiet() => {}
        _ => messages.push(done(req, req.socket, Done::value(0))),
    }
    Answer { messages, hold }
}

fn start() -> (GuestSockets, FakeDevice) {
    let (qp, dev) = fake::start(64, Box::new(echo_backend));
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let api = GuestSockets::new(qp, &cfg).expect("hello");
    (api, dev)
}

fn hex_frame(header: [u8; 20], body: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 12];
    v.extend_from_slice(&header);
    v.extend_from_slice(body);
    v
}

fn req_header(op: Op, flags: u8, cookie: u64, socket: u32) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0..4].copy_from_slice(b"STCP");
    h[4] = op.code();
    h[5] = flags;
    h[8..16].copy_from_slice(&cookie.to_le_bytes());
    h[16..20].copy_from_slice(&socket.to_le_bytes());
    h
}

/// Pumps until the device recorded at least `n` frames (it runs on its own thread).
fn frames_after(api: &mut GuestSockets, dev: &FakeDevice, n: usize) -> Vec<Vec<u8>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        api.progress().expect("progress");
        let f = dev.frames();
        if f.len() >= n || std::time::Instant::now() > deadline {
            return f;
        }
        std::thread::yield_now();
    }
}

/// The credit requests the device has taken so far.
fn credits(dev: &FakeDevice) -> Vec<Vec<u8>> {
    dev.frames().into_iter().filter(|f| f[16] == Op::Credit.code()).collect()
}

fn cookie_of(frame: &[u8]) -> u64 {
    u64::from_le_bytes(frame[20..28].try_into().expect("8 bytes"))
}

#[test]
fn hello_socket_connect_and_send_are_encoded_byte_for_byte() {
    let (mut api, dev) = start();
    assert_eq!(api.hello_info().mss, 1460);
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    assert_eq!(api.local_addr(fd), Ok(LOCAL));
    assert_eq!(api.peer_addr(fd), Ok(PEER));
    assert_eq!(api.send(fd, b"hello").expect("send"), 5);
    let f = frames_after(&mut api, &dev, 4);
    assert_eq!(f.len(), 4, "hello, socket, connect, send");
    // The hex examples of docs/protocol.md with our cookies.
    assert_eq!(f[0], hex_frame(req_header(Op::Hello, 0, cookie_of(&f[0]), 0), &[1, 0, 2, 0, 0, 0, 0, 0]));
    assert_eq!(f[1], hex_frame(req_header(Op::Socket, 0, cookie_of(&f[1]), 0), &[1, 0, 0, 0, 0, 0, 0, 0]));
    assert_eq!(
        f[2],
        hex_frame(req_header(Op::Connect, 0, cookie_of(&f[2]), 42), &[0x0a, 0, 0, 2, 0x51, 0x14, 0, 0])
    );
    let mut send = hex_frame(req_header(Op::Send, 1, cookie_of(&f[3]), 42), &[5, 0, 0, 0, 0, 0, 0, 0]);
    send.extend_from_slice(b"hello");
    assert_eq!(f[3], send, "QUIET send, payload in the same chain");
    let cookies: std::collections::HashSet<u64> = f[..3].iter().map(|x| cookie_of(x)).collect();
    assert_eq!(cookies.len(), 3, "cookies are distinct");
}

#[test]
fn echoed_data_is_read_in_place_and_credit_is_returned_when_consumed() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    api.setsockopt(fd, SockOpt::RecvBuffer(3000)).expect("SO_RCVBUF");
    let payload: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
    api.send(fd, &payload).expect("send");
    let buf = api.recv_zc(fd).expect("recv_zc").expect("data");
    assert_eq!(buf.as_ref(), &payload[..]);
    api.progress().expect("progress");
    assert!(credits(&dev).is_empty(), "no credit while the application holds the bytes");
    let before = dev.frames().len();
    drop(buf);
    frames_after(&mut api, &dev, before + 1);
    let c = credits(&dev);
    assert_eq!(c.len(), 1, "1500 bytes >= half the 3000-byte window: one credit");
    assert_eq!(c[0][17], 1, "QUIET");
    assert_eq!(&c[0][28..32], &42u32.to_le_bytes());
    assert_eq!(&c[0][32..36], &1500u32.to_le_bytes());
}

/// Credit goes back in batches of half the window: a quarter consumed is kept, half is sent
/// (one request, all of it), so thousands of sockets' reads cost few requests. (Nonblocking:
/// a call that sleeps returns every pending credit first, a peer may be waiting for window.)
#[test]
fn credit_waits_for_half_the_window() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    api.setsockopt(fd, SockOpt::RecvBuffer(4096)).expect("SO_RCVBUF");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    api.send(fd, &[5u8; 1200]).expect("send");
    api.send(fd, &[6u8; 1000]).expect("send");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let next = |api: &mut GuestSockets| loop {
        assert!(std::time::Instant::now() < deadline, "no echo");
        match api.recv_zc(fd) {
            Ok(Some(buf)) => return buf,
            Err(SocketError::WouldBlock) => {
                api.progress().expect("progress");
            }
            other => panic!("recv_zc: {other:?}"),
        }
    };
    let first = next(&mut api);
    assert_eq!(first.as_ref(), &[5u8; 1200][..]);
    drop(first);
    for _ in 0..50 {
        api.progress().expect("progress");
    }
    assert!(credits(&dev).is_empty(), "1200 bytes: less than half the 4096-byte window, no credit yet");
    let second = next(&mut api);
    assert_eq!(second.as_ref(), &[6u8; 1000][..]);
    let before = dev.frames().len();
    drop(second);
    frames_after(&mut api, &dev, before + 1);
    let c = credits(&dev);
    assert_eq!(c.len(), 1, "2200 bytes >= half the window: one credit");
    assert_eq!(&c[0][32..36], &2200u32.to_le_bytes(), "both reads in it");
}

#[test]
fn a_zero_copy_buffer_is_recycled_only_when_the_device_returns_its_chain() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    let mut b = api.alloc_tx(1000).expect("alloc");
    b.space_mut()[..3].copy_from_slice(b"abc");
    b.set_len(3);
    let mut bufs = vec![b];
    assert_eq!(api.send_zc(fd, &mut bufs).expect("send_zc"), 1);
    assert!(bufs.is_empty());
    for _ in 0..100 {
        api.progress().expect("progress");
    }
    assert_eq!(api.tx_buffers_outstanding(), 1, "the device holds the chain: the buffer is not free");
    while dev.held.lock().expect("held").is_empty() {
        api.progress().expect("progress");
    }
    dev.release.store(true, std::sync::atomic::Ordering::Relaxed);
    while api.tx_buffers_outstanding() != 0 {
        api.progress().expect("progress");
    }
    let data = api.recv_zc(fd).expect("recv").expect("echo");
    assert_eq!(data.as_ref(), b"abc");
}

#[test]
fn sends_beyond_the_in_flight_limit_wait_for_returned_chains() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    // max_send_in_flight is 8192.
    assert_eq!(api.send(fd, &[7u8; 10_000]), Ok(8192));
    assert_eq!(api.send(fd, b"x"), Err(SocketError::WouldBlock));
    while dev.held.lock().expect("held").is_empty() {
        api.progress().expect("progress");
    }
    dev.release.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut n = Err(SocketError::WouldBlock);
    for _ in 0..1_000_000 {
        n = api.send(fd, b"x");
        if n.is_ok() {
            break;
        }
    }
    assert_eq!(n, Ok(1));
}

/// The transmit ring fills before the credit does (64 descriptors, two per send, the device
/// holding every send chain): a non-blocking send then fails with `EAGAIN` instead of waiting
/// for room (an application that must read to make the device progress would hang), the
/// socket is not `EPOLLOUT` while the ring is full, and becomes so (an edge) once chains return.
#[test]
fn a_nonblocking_send_into_a_full_ring_is_eagain_and_epollout_waits_for_room() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    let ep = api.epoll_create().expect("epoll");
    api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::OUT | Ready::ET, data: 7 }).expect("ctl");
    let mut ev = [EpollEvent::default(); 1];
    assert_eq!(api.epoll_wait(ep, &mut ev, 1_000), Ok(1), "writable at first");
    let mut sent = 0;
    let refused = loop {
        match api.send(fd, &[5u8; 100]) {
            Ok(n) => sent += n,
            Err(e) => break e,
        }
        assert!(sent < 8192, "the ring (64 descriptors) fills before the 8 KiB credit");
    };
    assert_eq!(refused, SocketError::WouldBlock);
    assert!(sent > 0 && sent < 8192, "{sent} bytes went before the ring filled");
    assert_eq!(api.epoll_wait(ep, &mut ev, 0), Ok(0), "no EPOLLOUT while the ring is full");
    assert!(!api.readiness(fd).expect("readiness").contains(Ready::OUT));
    // The device lets the chains go ("ACK"): room again, and an edge.
    while dev.held.lock().expect("held").is_empty() {
        api.progress().expect("progress");
    }
    dev.release.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(api.epoll_wait(ep, &mut ev, 5_000), Ok(1), "EPOLLOUT once the ring has room");
    assert!(ev[0].events.contains(Ready::OUT));
    assert_eq!(api.send(fd, &[6u8; 100]), Ok(100));
}

/// Credit that is due while the transmit ring is full goes out once the ring has room again,
/// to an application that only polls (non-blocking calls, never an idle wait): otherwise the
/// backend's window for the socket stays closed by the credit it never gets, and a stream that
/// needs it (its end, for one) never comes. The device holds every credit chain, so the ring
/// fills with credits.
#[test]
fn credit_due_while_the_ring_is_full_goes_out_when_room_returns_without_an_idle_wait() {
    let (qp, dev) = fake::start(
        64,
        Box::new(|req: &Request, payload: &[u8]| Answer {
            hold: matches!(req.body, RequestBody::Credit { .. }),
            ..echo_backend(req, payload)
        }),
    );
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let mut api = GuestSockets::new(qp, &cfg).expect("hello");
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    // Half of 1024 bytes: every 600-byte message read makes its credit due.
    api.setsockopt(fd, SockOpt::RecvBuffer(1024)).expect("SO_RCVBUF");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    const MESSAGES: usize = 100;
    dev.inject
        .lock()
        .expect("inject")
        .extend((0..MESSAGES).map(|_| (RxMessage::Data { socket: SID, len: 600 }, vec![9u8; 600])));
    let mut buf = [0u8; 600];
    let mut read = 0usize;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while read < MESSAGES * 600 {
        assert!(std::time::Instant::now() < deadline, "{read} bytes read");
        match api.recv(fd, &mut buf) {
            Ok(n) => read += n,
            Err(SocketError::WouldBlock) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    for _ in 0..100 {
        api.progress().expect("progress");
    }
    let credited = |dev: &FakeDevice| {
        dev.frames()
            .iter()
            .filter(|f| f[16] == Op::Credit.code())
            .map(|f| u32::from_le_bytes(f[32..36].try_into().expect("4 bytes")) as usize)
            .sum::<usize>()
    };
    assert!(credited(&dev) < read, "the ring filled with held credits: the rest is owed");
    // The device lets the chains go; the application goes on polling only.
    dev.release.store(true, std::sync::atomic::Ordering::Relaxed);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while credited(&dev) < read && std::time::Instant::now() < deadline {
        assert_eq!(api.recv(fd, &mut buf), Err(SocketError::WouldBlock));
        api.progress().expect("progress");
    }
    assert_eq!(credited(&dev), read, "every byte read credited back, with no idle wait");
}

/// A backend answering hello with `version`, socket ids from 42 on, connects done at once, and
/// otherwise [`echo_backend`] (every send chain held until released).
fn backend_of_version(version: Version) -> fake::Handler {
    backend_of(version, info())
}

/// [`backend_of_version`] with its hello's `info`.
fn backend_of(version: Version, info: HelloInfo) -> fake::Handler {
    let mut next_sid = 42u32;
    Box::new(move |req: &Request, payload: &[u8]| match req.body {
        RequestBody::Hello { .. } => Answer {
            messages: vec![(
                RxMessage::HelloDone { cookie: req.cookie, version, result: Ok(info) },
                Vec::new(),
            )],
            hold: false,
        },
        RequestBody::Socket { .. } => {
            next_sid += 1;
            Answer { messages: vec![done(req, SocketId(next_sid - 1), Done::value(0))], hold: false }
        }
        RequestBody::Connect { .. } => {
            Answer { messages: vec![done(req, req.socket, Done { value: 0, addr: LOCAL })], hold: false }
        }
        _ => echo_backend(req, payload),
    })
}

/// A 1.2 backend ([`backend_of`]) that copies `COPY` sends: their chains go back at once and
/// nothing is echoed; other send chains are held until released.
fn copying_backend(info: HelloInfo) -> fake::Handler {
    let mut inner = backend_of(Version { major: 1, minor: 2 }, info);
    Box::new(move |req: &Request, payload: &[u8]| {
        if matches!(req.body, RequestBody::Send { .. }) && req.flags.is_copy() {
            return Answer { messages: Vec::new(), hold: false };
        }
        inner(req, payload)
    })
}

/// A connected non-blocking stream socket.
fn open_nonblocking(api: &mut GuestSockets) -> slimtcp_api::Fd {
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    fd
}

/// Against a 1.1 backend (no `COPY` sends), one stream socket never has the device hold more
/// than its share of the ring (an eighth): the sends of a socket whose peer does not
/// acknowledge stop there (`EAGAIN`, not writable), and another socket's sends and calls still
/// go.
#[test]
fn a_socket_whose_sends_are_held_keeps_to_its_share_of_the_ring() {
    let (qp, dev) = fake::start(64, backend_of_version(Version { major: 1, minor: 1 }));
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let mut api = GuestSockets::new(qp, &cfg).expect("hello");
    let (a, b) = (open_nonblocking(&mut api), open_nonblocking(&mut api));
    let mut chains = 0;
    while api.send(a, &[1u8; 10]).is_ok() {
        chains += 1;
        assert!(chains <= 64, "more chains than the ring has");
    }
    assert_eq!(chains, 64 / 8, "an eighth of the 64 requests");
    assert_eq!(api.send(a, b"x"), Err(SocketError::WouldBlock));
    assert!(!api.readiness(a).expect("readiness").contains(Ready::OUT), "not writable at its share");
    assert_eq!(api.send(b, b"other"), Ok(5), "another socket's send goes");
    assert!(api.readiness(b).expect("readiness").contains(Ready::OUT));
    let c = api.socket(Proto::Tcp).expect("a call goes");
    api.close(c).expect("close");
    assert!(dev.frames().iter().all(|f| f[17] & 0x02 == 0), "no COPY flag on a 1.1 pair");
    // The device lets the chains go ("ACK"): the first socket has room again.
    while dev.held.lock().expect("held").len() < chains + 1 {
        api.progress().expect("progress");
    }
    dev.release.store(true, std::sync::atomic::Ordering::Relaxed);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.send(a, b"x").is_err() {
        assert!(std::time::Instant::now() < deadline, "room again once the chains came back");
        api.progress().expect("progress");
    }
}

/// Against a 1.2 backend, a socket of small sends whose held chains reach its share sends with
/// `COPY` (they carry far less than 64 KiB): the backend returns those chains at once, so the
/// socket goes on up to its send buffer (8 KiB here) in far more requests than the ring has,
/// the ring keeps room for the other sockets, and the copied bytes stay in flight until
/// `acked` says the peer has them (a returned `COPY` chain frees none).
#[test]
fn sends_beyond_the_chain_share_go_with_copy_and_only_acked_frees_their_bytes() {
    let (qp, dev) = fake::start(64, copying_backend(info()));
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let mut api = GuestSockets::new(qp, &cfg).expect("hello");
    let (a, b) = (open_nonblocking(&mut api), open_nonblocking(&mut api));
    let mut sent = 0usize;
    let mut sends = 0usize;
    loop {
        match api.send(a, &[1u8; 10]) {
            Ok(n) => {
                sent += n;
                sends += 1;
            }
            Err(SocketError::WouldBlock) => {
                // The ring may be momentarily full of COPY chains the device has not taken yet.
                if sent == 8192 {
                    break;
                }
                api.progress().expect("progress");
            }
            Err(e) => panic!("send: {e}"),
        }
    }
    assert!(sends > 64 * 4, "{sends} sends: far more than the 64-entry ring could hold");
    let sends_of_a: Vec<u8> = dev
        .frames()
        .iter()
        .filter(|f| f[16] == Op::Send.code() && f[28..32] == 42u32.to_le_bytes())
        .map(|f| f[17])
        .collect();
    assert!(sends_of_a[..8].iter().all(|&flags| flags == 0x01), "the share (8) held, zero copy");
    assert!(sends_of_a[8..].iter().all(|&flags| flags == 0x03), "the rest QUIET | COPY");
    assert_eq!(dev.held.lock().expect("held").len(), 8, "the device holds the share only");
    // Returned COPY chains free no bytes: still at the send buffer.
    for _ in 0..100 {
        api.progress().expect("progress");
    }
    assert_eq!(api.send(a, b"x"), Err(SocketError::WouldBlock), "in flight until acked");
    // Another socket's send goes: at once, unless the ring still holds the last COPY chains,
    // which the device thread takes and returns when it next runs (it may not have run during
    // the calls above on a loaded machine). `a`'s held chains never come back here, so a
    // socket kept out by them would wait to the deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match api.send(b, b"other") {
            Ok(n) => break assert_eq!(n, 5, "another socket's send goes"),
            Err(SocketError::WouldBlock) => {
                assert!(std::time::Instant::now() < deadline, "another socket's send waits for `a`'s chains");
                api.progress().expect("progress");
                std::thread::yield_now();
            }
            Err(e) => panic!("another socket's send: {e}"),
        }
    }
    assert_eq!(dev.held.lock().expect("held").len(), 8, "the device still holds `a`'s share only");
    let c = api.socket(Proto::Tcp).expect("a call goes");
    api.close(c).expect("close");
    // The backend says 100 copied bytes were acknowledged: exactly that much room.
    dev.inject
        .lock()
        .expect("inject")
        .push_back((RxMessage::Acked { socket: SocketId(42), bytes: 100 }, Vec::new()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut more = 0usize;
    while more < 100 {
        assert!(std::time::Instant::now() < deadline, "room after acked ({more} bytes)");
        match api.send(a, &[2u8; 1000]) {
            Ok(n) => more += n,
            Err(SocketError::WouldBlock) => api.progress().map(|_| ()).expect("progress"),
            Err(e) => panic!("send: {e}"),
        }
    }
    assert_eq!(more, 100, "acked freed exactly its bytes");
    assert_eq!(api.send(a, b"x"), Err(SocketError::WouldBlock));
}

/// Against a 1.2 backend, a bulk socket (whose share of chains already carries 64 KiB or
/// more) does not copy past its share: it waits for its chains to come back, zero copy, while
/// another socket's sends still go.
#[test]
fn a_bulk_socket_at_its_share_waits_and_stays_zero_copy() {
    let info = HelloInfo { max_send_in_flight: 1 << 20, ..info() };
    let (qp, dev) = fake::start(64, backend_of(Version { major: 1, minor: 2 }, info));
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let mut api = GuestSockets::new(qp, &cfg).expect("hello");
    let (a, b) = (open_nonblocking(&mut api), open_nonblocking(&mut api));
    let mut chains = 0;
    while api.send(a, &[1u8; 9000]).is_ok() {
        chains += 1;
        assert!(chains <= 64, "more chains than the ring has");
    }
    assert_eq!(chains, 64 / 8, "the share (8 chains of 9000 B: past 64 KiB)");
    assert_eq!(api.send(a, b"x"), Err(SocketError::WouldBlock), "small sends wait too");
    assert!(!api.readiness(a).expect("readiness").contains(Ready::OUT), "not writable at its share");
    assert_eq!(api.send(b, b"other"), Ok(5), "another socket's send goes");
    assert!(dev.frames().iter().all(|f| f[17] & 0x02 == 0), "no COPY send");
    while dev.held.lock().expect("held").len() < chains + 1 {
        api.progress().expect("progress");
    }
    dev.release.store(true, std::sync::atomic::Ordering::Relaxed);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.send(a, &[1u8; 9000]).is_err() {
        assert!(std::time::Instant::now() < deadline, "room again once the chains came back");
        api.progress().expect("progress");
    }
    assert!(dev.frames().iter().all(|f| f[17] & 0x02 == 0), "still no COPY send");
}

/// Against a 1.2 backend, once held send chains take half the queue's descriptors (16 of 64),
/// a send waits for chains to come back, zero copy (a busy pair's do); once those chains have
/// been held for 100 ms or more (peers that do not read), sends go with `COPY` instead, so the
/// other sockets go on.
#[test]
fn at_half_the_ring_sends_wait_unless_the_held_chains_are_stuck_then_they_copy() {
    let info = HelloInfo { max_send_in_flight: 1 << 20, ..info() };
    let (qp, dev) = fake::start(64, copying_backend(info));
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let mut api = GuestSockets::new(qp, &cfg).expect("hello");
    let (a, b, c) = (open_nonblocking(&mut api), open_nonblocking(&mut api), open_nonblocking(&mut api));
    for fd in [a, b] {
        let mut chains = 0;
        while api.send(fd, &[1u8; 9000]).is_ok() {
            chains += 1;
        }
        assert_eq!(chains, 8, "each bulk socket its share");
    }
    while dev.held.lock().expect("held").len() < 16 {
        api.progress().expect("progress");
    }
    assert_eq!(api.send(c, &[3u8; 9000]), Err(SocketError::WouldBlock), "at the mark: wait");
    assert!(!api.readiness(c).expect("readiness").contains(Ready::OUT));
    assert!(dev.frames().iter().all(|f| f[17] & 0x02 == 0), "no COPY send yet");
    let c_sid = {
        let sends: Vec<[u8; 4]> = dev
            .frames()
            .iter()
            .filter(|f| f[16] == Op::Send.code())
            .map(|f| [f[28], f[29], f[30], f[31]])
            .collect();
        assert_eq!(sends.len(), 16);
        u32::from_le_bytes(sends[0]) + 2
    };
    // Held for two epochs (100 ms): stuck. The waiting socket becomes writable and sends copied.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !api.readiness(c).expect("readiness").contains(Ready::OUT) {
        assert!(std::time::Instant::now() < deadline, "writable once stuck");
        api.progress().expect("progress");
        std::thread::yield_now();
    }
    assert_eq!(api.send(c, &[3u8; 9000]), Ok(9000));
    let copied = || -> Vec<(u8, u32)> {
        dev.frames()
            .iter()
            .filter(|f| f[16] == Op::Send.code() && f[17] & 0x02 != 0)
            .map(|f| (f[17], u32::from_le_bytes([f[28], f[29], f[30], f[31]])))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while copied().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the device takes the send");
        api.progress().expect("progress");
    }
    assert_eq!(copied(), vec![(0x03, c_sid)], "c's send, QUIET | COPY");
    assert_eq!(
        api.send(a, &[1u8; 9000]),
        Err(SocketError::WouldBlock),
        "a bulk socket at its share still waits"
    );
}

/// Payloads the application does not read never take every posted buffer: with the device's
/// 64 buffers full of unread data, a blocking call's completion still gets one (later payloads
/// are copied out and their buffers reposted), and every byte then reads in order.
#[test]
fn unread_payloads_never_take_the_buffers_a_completion_needs() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    let messages: Vec<Vec<u8>> = (0..200u8).map(|i| vec![i; 10]).collect();
    dev.inject
        .lock()
        .expect("inject")
        .extend(messages.iter().map(|m| (RxMessage::Data { socket: SID, len: m.len() as u32 }, m.clone())));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.rx_payloads_copied() < 200 - 48 {
        assert!(std::time::Instant::now() < deadline, "{} payloads copied out", api.rx_payloads_copied());
        api.progress().expect("progress");
    }
    assert_eq!(api.rx_payloads_copied(), 200 - 48, "three quarters of 64 buffers held in place");
    let other = api.socket(Proto::Tcp).expect("a completion while 200 payloads wait unread");
    api.close(other).expect("close");
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.len() < 2000 {
        let n = api.recv(fd, &mut buf).expect("recv");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, messages.concat(), "every payload, in order");
}

#[test]
fn accepted_connections_are_queued_for_accept_with_their_data() {
    let (mut api, dev) = start();
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).expect("bind");
    assert_eq!(api.local_addr(l).map(|a| a.port()), Ok(8080));
    api.listen(l, 16).expect("listen");
    let ep = api.epoll_create().expect("epoll");
    api.epoll_ctl(ep, EpollOp::Add, l, EpollEvent { events: Ready::IN, data: 1 }).expect("ctl");
    let new = SocketId(43);
    let local = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 8080);
    {
        let mut q = dev.inject.lock().expect("inject");
        q.push_back((RxMessage::Accepted { listener: SID, socket: new, remote: PEER, local }, Vec::new()));
        q.push_back((RxMessage::Data { socket: new, len: 2 }, b"hi".to_vec()));
        q.push_back((RxMessage::PeerClosed { socket: new }, Vec::new()));
    }
    let mut ev = [EpollEvent::default(); 4];
    assert_eq!(api.epoll_wait(ep, &mut ev, 5_000), Ok(1));
    assert_eq!(ev[0], EpollEvent { events: Ready::IN, data: 1 });
    let (c, from) = api.accept(l).expect("accept");
    assert_eq!(from, PEER);
    assert_eq!(api.local_addr(c), Ok(local));
    let mut buf = [0u8; 16];
    assert_eq!(api.recv(c, &mut buf), Ok(2));
    assert_eq!(&buf[..2], b"hi");
    assert_eq!(api.recv(c, &mut buf), Ok(0), "end of stream after peer_closed");
}

#[test]
fn a_reset_fails_reads_and_sets_so_error() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    dev.inject
        .lock()
        .expect("inject")
        .push_back((RxMessage::Reset { socket: SID, errno: slimtcp_abi::Errno::ECONNRESET }, Vec::new()));
    let mut buf = [0u8; 8];
    assert_eq!(api.recv(fd, &mut buf), Err(SocketError::Connection(ConnError::Reset)));
    assert_eq!(
        api.getsockopt(fd, SockOptName::Error),
        Ok(SockOpt::Error(Some(SocketError::Connection(ConnError::Reset))))
    );
    assert_eq!(api.getsockopt(fd, SockOptName::Error), Ok(SockOpt::Error(None)), "read once");
}

#[test]
fn a_nonblocking_connect_reports_in_progress_then_out_readiness() {
    let (mut api, _dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    assert_eq!(api.connect(fd, PEER), Err(SocketError::InProgress));
    let ep = api.epoll_create().expect("epoll");
    api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::OUT | Ready::ET, data: 9 }).expect("ctl");
    let mut ev = [EpollEvent::default(); 1];
    assert_eq!(api.epoll_wait(ep, &mut ev, 5_000), Ok(1));
    assert!(ev[0].events.contains(Ready::OUT));
    assert_eq!(api.getsockopt(fd, SockOptName::Error), Ok(SockOpt::Error(None)));
    assert_eq!(api.connect(fd, PEER), Err(SocketError::IsConnected));
}

#[test]
fn a_backend_that_goes_away_ends_blocking_calls_with_enetdown() {
    let (mut api, mut dev) = start();
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        dev.disconnect();
        dev
    });
    let mut buf = [0u8; 8];
    assert_eq!(api.recv(fd, &mut buf), Err(SocketError::StackDown));
    assert_eq!(api.socket(Proto::Tcp), Err(SocketError::StackDown), "and stays down");
    drop(killer.join().expect("join"));
}

#[test]
fn close_frees_the_descriptor_and_udp_binds_before_sending() {
    let (mut api, dev) = start();
    let fd = api.socket(Proto::Udp).expect("socket");
    assert_eq!(api.send_to(fd, b"ping", PEER), Ok(4));
    api.close(fd).expect("close");
    assert_eq!(api.close(fd), Err(SocketError::BadHandle));
    let ops: Vec<u8> = frames_after(&mut api, &dev, 5).iter().map(|f| f[16]).collect();
    assert_eq!(
        ops,
        vec![Op::Hello.code(), Op::Socket.code(), Op::Bind.code(), Op::SendTo.code(), Op::Close.code()]
    );
    let f = &dev.frames()[3];
    assert_eq!(f.len(), 48 + 4);
    assert_eq!(&f[32..38], &[0x0a, 0, 0, 2, 0x51, 0x14]);
    assert_eq!(&f[48..], b"ping");
}
