//! Shared by the test files: the example messages of `docs/protocol.md`, a hex renderer, draws
//! from the stack's seeded generator and generators of random valid messages.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp_abi::{
    Done, Errno, HelloInfo, Request, RequestBody, RequestFlags, RxMessage, ShutdownHow, SockOpt, SocketId,
    SocketKind, Version,
};

/// The stack's seeded generator (xoshiro256**): the same seed gives the same messages.
pub use slimtcp::nic::fault::Rng;

/// The draws the message generators make, on top of [`Rng`].
pub trait Draw {
    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64;
    /// 32 random bits.
    fn u32(&mut self) -> u32;
    /// 16 random bits.
    fn u16(&mut self) -> u16;
    /// One of `items` (not empty).
    fn pick<T: Copy>(&mut self, items: &[T]) -> T;
    /// Any IPv4 socket address.
    fn addr(&mut self) -> SocketAddrV4;
}

impl Draw for Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.gen_range(0..n)
    }
    fn u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn u16(&mut self) -> u16 {
        self.next_u64() as u16
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    fn addr(&mut self) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(self.u32()), self.u16())
    }
}

pub const COOKIE: u64 = 0x0807_0605_0403_0201;
pub const SOCK: SocketId = SocketId(0x2a);

pub fn peer() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5201)
}

pub fn local() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 49152)
}

pub fn hello_info() -> HelloInfo {
    HelloInfo {
        addr: Ipv4Addr::new(10, 0, 0, 1),
        prefix_len: 24,
        mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
        gateway: Ipv4Addr::new(10, 0, 0, 254),
        mss: 1460,
        max_datagram: 1472,
        max_sockets: 4096,
        max_send_in_flight: 256 * 1024,
        rx_buffer: 256 * 1024,
        max_requests: 1024,
    }
}

/// The example requests of the specification, by name.
pub fn example_requests() -> Vec<(&'static str, Request)> {
    let r = |socket, body| Request::new(COOKIE, socket, body);
    let none = SocketId::NONE;
    vec![
        ("hello", r(none, RequestBody::Hello { version: Version { major: 1, minor: 1 } })),
        ("socket", r(none, RequestBody::Socket { kind: SocketKind::Tcp })),
        ("bind", r(SOCK, RequestBody::Bind { local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080) })),
        ("listen", r(SOCK, RequestBody::Listen { backlog: 128 })),
        ("connect", r(SOCK, RequestBody::Connect { remote: peer() })),
        ("send", r(SOCK, RequestBody::Send { len: 1460 }).quiet()),
        ("send_to", r(SOCK, RequestBody::SendTo { remote: peer(), len: 64 })),
        ("shutdown", r(SOCK, RequestBody::Shutdown { how: ShutdownHow::Write })),
        ("close", r(SOCK, RequestBody::Close { abort: true })),
        ("setsockopt", r(SOCK, RequestBody::SetSockOpt { option: SockOpt::RcvBuf, value: 1 << 20 })),
        ("getsockopt", r(SOCK, RequestBody::GetSockOpt { option: SockOpt::MaxSeg })),
        ("credit", r(SOCK, RequestBody::Credit { bytes: 65536 }).quiet()),
    ]
}

/// The example receive-queue messages of the specification, by name.
pub fn example_rx() -> Vec<(&'static str, RxMessage)> {
    vec![
        (
            "hello_done",
            RxMessage::HelloDone {
                cookie: COOKIE,
                version: Version { major: 1, minor: 0 },
                result: Ok(hello_info()),
            },
        ),
        (
            "hello_done_refused",
            RxMessage::HelloDone {
                cookie: COOKIE,
                version: Version { major: 1, minor: 0 },
                result: Err(Errno::EPROTONOSUPPORT),
            },
        ),
        (
            "complete_socket",
            RxMessage::Complete { cookie: COOKIE, socket: SOCK, op: 0x02, result: Ok(Done::value(0)) },
        ),
        (
            "complete_connect",
            RxMessage::Complete {
                cookie: COOKIE,
                socket: SOCK,
                op: 0x05,
                result: Ok(Done { value: 0, addr: local() }),
            },
        ),
        (
            "complete_error",
            RxMessage::Complete { cookie: COOKIE, socket: SOCK, op: 0x05, result: Err(Errno::ECONNREFUSED) },
        ),
        (
            "complete_unknown_op",
            RxMessage::Complete { cookie: COOKIE, socket: SOCK, op: 0x7f, result: Err(Errno::EOPNOTSUPP) },
        ),
        ("data", RxMessage::Data { socket: SOCK, len: 5 }),
        ("datagram", RxMessage::Datagram { socket: SOCK, from: peer(), len: 4, orig_len: 4 }),
        ("datagram_truncated", RxMessage::Datagram { socket: SOCK, from: peer(), len: 4, orig_len: 1472 }),
        (
            "accepted",
            RxMessage::Accepted { listener: SOCK, socket: SocketId(0x2b), remote: peer(), local: local() },
        ),
        ("writable", RxMessage::Writable { socket: SOCK, available: 65536 }),
        ("acked", RxMessage::Acked { socket: SOCK, bytes: 1024 }),
        ("peer_closed", RxMessage::PeerClosed { socket: SOCK }),
        ("reset", RxMessage::Reset { socket: SOCK, errno: Errno::ECONNRESET }),
        ("error", RxMessage::Error { socket: SOCK, errno: Errno::EHOSTUNREACH }),
    ]
}

/// The payload the examples with payload carry ("hello", "ping", ...).
pub fn example_payload(len: usize) -> Vec<u8> {
    b"hello, slimtcp!".iter().copied().cycle().take(len).collect()
}

pub fn request_frame(req: &Request) -> Vec<u8> {
    let mut buf = vec![0u8; req.wire_len()];
    let n = req.emit(&mut buf).expect("emit into an exact buffer");
    assert_eq!(n, buf.len());
    buf
}

/// An rx frame with its payload (example payload bytes).
pub fn rx_frame(msg: &RxMessage) -> Vec<u8> {
    let mut buf = vec![0u8; msg.total_len()];
    let n = msg.emit(&mut buf).expect("emit into an exact buffer");
    assert_eq!(n, msg.wire_len());
    buf[msg.payload_range()].copy_from_slice(&example_payload(msg.payload_len()));
    buf
}

/// The hex dump format of `docs/protocol.md`: a title line, then 16 bytes per line.
pub fn render(name: &str, bytes: &[u8]) -> String {
    let mut s = format!("{name} ({} bytes)\n", bytes.len());
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        s += &format!("{:04x}  {}\n", i * 16, hex.join(" "));
    }
    s
}

pub fn random_request(rng: &mut Rng) -> Request {
    let nonzero = |rng: &mut Rng| SocketId(rng.u32().max(1));
    let body = match rng.below(12) {
        0 => RequestBody::Hello { version: Version { major: rng.u16(), minor: rng.u16() } },
        1 => RequestBody::Socket { kind: rng.pick(SocketKind::ALL) },
        2 => RequestBody::Bind { local: rng.addr() },
        3 => RequestBody::Listen { backlog: rng.u32() },
        4 => RequestBody::Connect { remote: SocketAddrV4::new(*rng.addr().ip(), rng.u16().max(1)) },
        5 => RequestBody::Send { len: rng.u32().max(1) },
        6 => RequestBody::SendTo {
            remote: SocketAddrV4::new(*rng.addr().ip(), rng.u16().max(1)),
            len: rng.u32(),
        },
        7 => RequestBody::Shutdown { how: rng.pick(ShutdownHow::ALL) },
        8 => RequestBody::Close { abort: rng.below(2) == 1 },
        9 => RequestBody::SetSockOpt { option: rng.pick(SockOpt::ALL), value: rng.next_u64() },
        10 => RequestBody::GetSockOpt { option: rng.pick(SockOpt::ALL) },
        _ => RequestBody::Credit { bytes: rng.u32().max(1) },
    };
    let socket = if body.op().takes_no_socket() { SocketId::NONE } else { nonzero(rng) };
    let quiet = body.op() != slimtcp_abi::Op::Hello && rng.below(2) == 1;
    let mut flags = if quiet { RequestFlags::QUIET } else { RequestFlags::empty() };
    if body.op() == slimtcp_abi::Op::Send && rng.below(2) == 1 {
        flags = flags | RequestFlags::COPY;
    }
    Request { cookie: rng.next_u64(), socket, flags, body }
}

pub fn random_rx(rng: &mut Rng) -> RxMessage {
    let socket = SocketId(rng.u32().max(1));
    let errno = rng.pick(Errno::ALL);
    match rng.below(10) {
        0 => RxMessage::Complete {
            cookie: rng.next_u64(),
            socket: SocketId(rng.u32()),
            op: rng.next_u64() as u8,
            result: if rng.below(2) == 0 {
                Ok(Done { value: rng.next_u64(), addr: rng.addr() })
            } else {
                Err(errno)
            },
        },
        1 => RxMessage::HelloDone {
            cookie: rng.next_u64(),
            version: Version { major: rng.u16(), minor: rng.u16() },
            result: if rng.below(2) == 0 {
                let mut mac = [0u8; 6];
                rng.fill_bytes(&mut mac);
                Ok(HelloInfo {
                    addr: Ipv4Addr::from(rng.u32()),
                    prefix_len: rng.below(33) as u8,
                    mac,
                    gateway: Ipv4Addr::from(rng.u32()),
                    mss: rng.u16(),
                    max_datagram: rng.u16(),
                    max_sockets: rng.u32(),
                    max_send_in_flight: rng.u32(),
                    rx_buffer: rng.u32(),
                    max_requests: rng.u32(),
                })
            } else {
                Err(errno)
            },
        },
        2 => RxMessage::Data { socket, len: rng.below(3000) as u32 + 1 },
        3 => {
            let orig_len = rng.below(3000) as u32;
            let len = if rng.below(2) == 0 { orig_len } else { rng.below(u64::from(orig_len) + 1) as u32 };
            RxMessage::Datagram { socket, from: rng.addr(), len, orig_len }
        }
        4 => RxMessage::Accepted {
            listener: socket,
            socket: SocketId(rng.u32().max(1)),
            remote: rng.addr(),
            local: rng.addr(),
        },
        5 => RxMessage::Writable { socket, available: rng.u32() },
        6 => RxMessage::PeerClosed { socket },
        7 => RxMessage::Reset { socket, errno },
        8 => RxMessage::Acked { socket, bytes: rng.u32().max(1) },
        _ => RxMessage::Error { socket, errno },
    }
}
