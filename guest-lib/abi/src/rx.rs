//! Receive-queue messages: completions and events the host writes into guest-posted buffers.

use core::net::{Ipv4Addr, SocketAddrV4};
use core::ops::Range;

use crate::codec::{Fields, FieldsMut};
use crate::layout;
use crate::layout::rx_header as h;
use crate::{AbiError, Errno, SocketId, Version, VirtioNetHdr, MAGIC, VIRTIO_NET_HDR_LEN};

/// Offset of the body in a receive frame.
const BODY: usize = VIRTIO_NET_HDR_LEN + h::SIZE;

/// Bit 0 of a datagram event's flags: the datagram did not fit the buffer and was cut.
const DATAGRAM_TRUNCATED: u16 = 0x1;

code_enum! {
    /// Receive-queue message kinds.
    RxKind: u8, "kind" {
        /// The completion of a request (other than hello).
        Complete = 0x01,
        /// The completion of hello.
        HelloDone = 0x02,
        /// TCP data, payload included.
        Data = 0x10,
        /// A UDP datagram, payload included.
        Datagram = 0x11,
        /// A listener accepted a connection.
        Accepted = 0x12,
        /// A socket that failed a send with EAGAIN can send again.
        Writable = 0x13,
        /// The peer sent FIN: end of stream, after all data.
        PeerClosed = 0x14,
        /// The connection is dead (the socket id stays valid until closed).
        Reset = 0x15,
        /// A non-fatal asynchronous error on the socket.
        Error = 0x16,
        /// Bytes of `COPY` sends acknowledged (protocol 1.2).
        Acked = 0x17,
    }
}

impl RxKind {
    /// Size of this kind's body.
    pub fn body_len(self) -> usize {
        match self {
            RxKind::Complete => layout::complete::SIZE,
            RxKind::HelloDone => layout::hello_done::SIZE,
            RxKind::Data => layout::data::SIZE,
            RxKind::Datagram => layout::datagram::SIZE,
            RxKind::Accepted => layout::accepted::SIZE,
            RxKind::Writable => layout::writable::SIZE,
            RxKind::PeerClosed => layout::peer_closed::SIZE,
            RxKind::Reset | RxKind::Error => layout::socket_error::SIZE,
            RxKind::Acked => layout::acked::SIZE,
        }
    }
}

/// The successful result of a request, as its completion carries it. What `value` and `addr`
/// mean depends on the op (see `docs/protocol.md`); unused ones are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Done {
    /// Op-specific value (bytes sent, option value, ...).
    pub value: u64,
    /// Op-specific address (bound or local address).
    pub addr: SocketAddrV4,
}

impl Done {
    /// Success with a value and no address.
    pub const fn value(value: u64) -> Done {
        Done { value, addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0) }
    }
}

/// What the host tells the guest in a successful hello completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HelloInfo {
    /// The guest's IPv4 address.
    pub addr: Ipv4Addr,
    /// Its prefix length (0..=32).
    pub prefix_len: u8,
    /// The guest's MAC address.
    pub mac: [u8; 6],
    /// The default gateway; 0.0.0.0 when there is none.
    pub gateway: Ipv4Addr,
    /// Default TCP MSS.
    pub mss: u16,
    /// Largest UDP payload.
    pub max_datagram: u16,
    /// Sockets the guest may have open at once, over all queue pairs.
    pub max_sockets: u32,
    /// Send payload bytes a socket may have in flight.
    pub max_send_in_flight: u32,
    /// Default receive window of a socket (SO_RCVBUF), bytes.
    pub rx_buffer: u32,
    /// Requests a queue pair may have outstanding.
    pub max_requests: u32,
}

/// A message on a receive queue, fully validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxMessage {
    /// The completion of the request with `cookie`.
    Complete {
        /// The request's cookie.
        cookie: u64,
        /// The request's socket; for `socket`, the new socket (0 on error).
        socket: SocketId,
        /// The request's op code, echoed even when unknown.
        op: u8,
        /// Success, or why not.
        result: Result<Done, Errno>,
    },
    /// The completion of hello.
    HelloDone {
        /// The hello's cookie.
        cookie: u64,
        /// On success the negotiated version; on error the host's own.
        version: Version,
        /// The guest's network parameters and limits, or EPROTONOSUPPORT.
        result: Result<HelloInfo, Errno>,
    },
    /// `len` bytes of TCP stream data follow the body (`len` >= 1).
    Data {
        /// The connection.
        socket: SocketId,
        /// Payload length.
        len: u32,
    },
    /// A UDP datagram; `len` bytes follow the body, `orig_len` >= `len` is its full size.
    Datagram {
        /// The UDP socket.
        socket: SocketId,
        /// The sender.
        from: SocketAddrV4,
        /// Payload bytes in this message.
        len: u32,
        /// The datagram's length (greater than `len` when truncated).
        orig_len: u32,
    },
    /// A new connection on a listener; its socket id is ready for use.
    Accepted {
        /// The listening socket.
        listener: SocketId,
        /// The new connection's id.
        socket: SocketId,
        /// The peer.
        remote: SocketAddrV4,
        /// The local end.
        local: SocketAddrV4,
    },
    /// The socket may send again.
    Writable {
        /// The socket.
        socket: SocketId,
        /// Bytes it may now have in flight in addition.
        available: u32,
    },
    /// The peer acknowledged bytes of the socket's `COPY` sends (protocol 1.2): they no longer
    /// count as in flight.
    Acked {
        /// The socket.
        socket: SocketId,
        /// Bytes acknowledged since the socket's previous `acked` (1 or more).
        bytes: u32,
    },
    /// The peer closed its sending side; no data follows.
    PeerClosed {
        /// The socket.
        socket: SocketId,
    },
    /// The connection is gone (ECONNRESET, ETIMEDOUT, EHOSTUNREACH, ECONNABORTED, ...).
    Reset {
        /// The socket.
        socket: SocketId,
        /// Why.
        errno: Errno,
    },
    /// A non-fatal error on the socket (e.g. EHOSTUNREACH for a datagram).
    Error {
        /// The socket.
        socket: SocketId,
        /// Which.
        errno: Errno,
    },
}

fn errno_field(f: &Fields<'_>, r: Range<usize>) -> Result<Option<Errno>, AbiError> {
    let raw = f.u32(r);
    if raw == 0 {
        return Ok(None);
    }
    i32::try_from(raw)
        .ok()
        .and_then(Errno::from_errno)
        .map(Some)
        .ok_or(AbiError::BadValue { field: "errno", value: u64::from(raw) })
}

fn nonzero_errno(f: &Fields<'_>, r: Range<usize>) -> Result<Errno, AbiError> {
    errno_field(f, r)?.ok_or(AbiError::BadValue { field: "errno", value: 0 })
}

/// A count that must not be 0 (`field` names it in the error).
fn nonzero_u32(f: &Fields<'_>, field: &'static str, r: Range<usize>) -> Result<u32, AbiError> {
    match f.u32(r) {
        0 => Err(AbiError::BadValue { field, value: 0 }),
        n => Ok(n),
    }
}

fn nonzero_socket(field: &'static str, s: SocketId) -> Result<SocketId, AbiError> {
    if s.is_none() {
        Err(AbiError::BadValue { field, value: 0 })
    } else {
        Ok(s)
    }
}

fn errno_code(e: Errno) -> u32 {
    e.errno().unsigned_abs()
}

impl RxMessage {
    /// The kind of this message.
    pub fn kind(&self) -> RxKind {
        match self {
            RxMessage::Complete { .. } => RxKind::Complete,
            RxMessage::HelloDone { .. } => RxKind::HelloDone,
            RxMessage::Data { .. } => RxKind::Data,
            RxMessage::Datagram { .. } => RxKind::Datagram,
            RxMessage::Accepted { .. } => RxKind::Accepted,
            RxMessage::Writable { .. } => RxKind::Writable,
            RxMessage::PeerClosed { .. } => RxKind::PeerClosed,
            RxMessage::Reset { .. } => RxKind::Reset,
            RxMessage::Error { .. } => RxKind::Error,
            RxMessage::Acked { .. } => RxKind::Acked,
        }
    }

    /// The cookie of a completion; events carry none (0 on the wire).
    pub fn cookie(&self) -> Option<u64> {
        match *self {
            RxMessage::Complete { cookie, .. } | RxMessage::HelloDone { cookie, .. } => Some(cookie),
            _ => None,
        }
    }

    /// The header's socket field.
    pub fn socket(&self) -> SocketId {
        match *self {
            RxMessage::HelloDone { .. } => SocketId::NONE,
            RxMessage::Accepted { listener, .. } => listener,
            RxMessage::Complete { socket, .. }
            | RxMessage::Data { socket, .. }
            | RxMessage::Datagram { socket, .. }
            | RxMessage::Writable { socket, .. }
            | RxMessage::Acked { socket, .. }
            | RxMessage::PeerClosed { socket }
            | RxMessage::Reset { socket, .. }
            | RxMessage::Error { socket, .. } => socket,
        }
    }

    /// Bytes of virtio-net header, message header and body: where the payload starts.
    pub fn wire_len(&self) -> usize {
        BODY + self.kind().body_len()
    }

    /// Payload bytes after the body (data and datagram), else 0.
    pub fn payload_len(&self) -> usize {
        match *self {
            RxMessage::Data { len, .. } | RxMessage::Datagram { len, .. } => len as usize,
            _ => 0,
        }
    }

    /// The whole message's length: what the device reports as the used length.
    pub fn total_len(&self) -> usize {
        self.wire_len() + self.payload_len()
    }

    /// Where the payload sits in the frame.
    pub fn payload_range(&self) -> Range<usize> {
        self.wire_len()..self.total_len()
    }

    /// Parses the bytes the device wrote into a posted buffer (`frame` = the used length,
    /// virtio-net header included). The frame must be exactly [`RxMessage::total_len`] long; the
    /// payload is `&frame[msg.payload_range()]`. Never panics.
    pub fn parse(frame: &[u8]) -> Result<RxMessage, AbiError> {
        let (kind, cookie, socket) = Self::parse_header(frame)?;
        let b = Fields::new(frame, BODY, kind.body_len())?;
        let msg = match kind {
            RxKind::Complete => Self::parse_complete(&b, cookie, socket)?,
            RxKind::HelloDone => Self::parse_hello_done(&b, cookie, socket)?,
            RxKind::Data => {
                use layout::data as l;
                b.reserved(l::RESERVED)?;
                RxMessage::Data { socket, len: nonzero_u32(&b, "len", l::LEN)? }
            }
            RxKind::Datagram => Self::parse_datagram(&b, socket)?,
            RxKind::Accepted => {
                use layout::accepted as l;
                RxMessage::Accepted {
                    listener: socket,
                    socket: nonzero_socket("new_socket", SocketId(b.u32(l::NEW_SOCKET)))?,
                    remote: SocketAddrV4::new(b.ipv4(l::REMOTE_ADDR), b.u16(l::REMOTE_PORT)),
                    local: SocketAddrV4::new(b.ipv4(l::LOCAL_ADDR), b.u16(l::LOCAL_PORT)),
                }
            }
            RxKind::Writable => {
                use layout::writable as l;
                b.reserved(l::RESERVED)?;
                RxMessage::Writable { socket, available: b.u32(l::AVAILABLE) }
            }
            RxKind::Acked => {
                use layout::acked as l;
                b.reserved(l::RESERVED)?;
                RxMessage::Acked { socket, bytes: nonzero_u32(&b, "bytes", l::BYTES)? }
            }
            RxKind::PeerClosed => RxMessage::PeerClosed { socket },
            RxKind::Reset | RxKind::Error => {
                use layout::socket_error as l;
                b.reserved(l::RESERVED)?;
                let errno = nonzero_errno(&b, l::ERRNO)?;
                if kind == RxKind::Reset {
                    RxMessage::Reset { socket, errno }
                } else {
                    RxMessage::Error { socket, errno }
                }
            }
        };
        if frame.len() != msg.total_len() {
            return Err(AbiError::LengthMismatch { expected: msg.total_len(), got: frame.len() });
        }
        Ok(msg)
    }

    /// Checks the virtio-net header and the message header: magic, a known kind, zero flags and
    /// reserved bytes; events carry no cookie and a socket. Returns the kind, cookie and socket.
    fn parse_header(frame: &[u8]) -> Result<(RxKind, u64, SocketId), AbiError> {
        VirtioNetHdr::check_rx(frame)?;
        let f = Fields::new(frame, VIRTIO_NET_HDR_LEN, h::SIZE)?;
        let magic = f.bytes::<4>(h::MAGIC);
        if magic != MAGIC {
            return Err(AbiError::BadMagic(magic));
        }
        let code = f.u8(h::KIND);
        let kind = RxKind::from_code(code).ok_or(AbiError::UnknownKind(code))?;
        f.reserved(h::FLAGS)?;
        f.reserved(h::RESERVED)?;
        let cookie = f.u64(h::COOKIE);
        let socket = SocketId(f.u32(h::SOCKET));
        if !matches!(kind, RxKind::Complete | RxKind::HelloDone) {
            f.reserved(h::COOKIE)?;
            nonzero_socket("socket", socket)?;
        }
        Ok((kind, cookie, socket))
    }

    /// A completion's body: a result, or an errno with the result fields zero.
    fn parse_complete(b: &Fields<'_>, cookie: u64, socket: SocketId) -> Result<RxMessage, AbiError> {
        use layout::complete as l;
        b.reserved(l::RESERVED)?;
        b.reserved(l::RESERVED2)?;
        let result = match errno_field(b, l::ERRNO)? {
            None => {
                Ok(Done { value: b.u64(l::VALUE), addr: SocketAddrV4::new(b.ipv4(l::ADDR), b.u16(l::PORT)) })
            }
            Some(e) => {
                b.reserved(l::VALUE)?;
                b.reserved(l::ADDR)?;
                b.reserved(l::PORT)?;
                Err(e)
            }
        };
        Ok(RxMessage::Complete { cookie, socket, op: b.u8(l::OP), result })
    }

    /// Hello's completion (socket 0): the version, then the guest's parameters, or an errno with
    /// everything after the version zero.
    fn parse_hello_done(b: &Fields<'_>, cookie: u64, socket: SocketId) -> Result<RxMessage, AbiError> {
        use layout::hello_done as l;
        if !socket.is_none() {
            return Err(AbiError::BadValue { field: "socket", value: u64::from(socket.0) });
        }
        b.reserved(l::RESERVED)?;
        let version = Version { major: b.u16(l::MAJOR), minor: b.u16(l::MINOR) };
        let result = match errno_field(b, l::ERRNO)? {
            None => {
                b.reserved(l::RESERVED2)?;
                let prefix_len = b.u8(l::PREFIX_LEN);
                if prefix_len > 32 {
                    return Err(AbiError::BadValue { field: "prefix_len", value: u64::from(prefix_len) });
                }
                Ok(HelloInfo {
                    addr: b.ipv4(l::ADDR),
                    prefix_len,
                    mac: b.bytes(l::MAC),
                    gateway: b.ipv4(l::GATEWAY),
                    mss: b.u16(l::MSS),
                    max_datagram: b.u16(l::MAX_DATAGRAM),
                    max_sockets: b.u32(l::MAX_SOCKETS),
                    max_send_in_flight: b.u32(l::MAX_SEND_IN_FLIGHT),
                    rx_buffer: b.u32(l::RX_BUFFER),
                    max_requests: b.u32(l::MAX_REQUESTS),
                })
            }
            Some(e) => {
                b.reserved(l::RESERVED.end..l::SIZE)?;
                Err(e)
            }
        };
        Ok(RxMessage::HelloDone { cookie, version, result })
    }

    /// A datagram event's body: the truncated flag must agree with the two lengths.
    fn parse_datagram(b: &Fields<'_>, socket: SocketId) -> Result<RxMessage, AbiError> {
        use layout::datagram as l;
        let flags = b.u16(l::FLAGS);
        if flags & !DATAGRAM_TRUNCATED != 0 {
            return Err(AbiError::ReservedNonZero { offset: BODY + l::FLAGS.start });
        }
        let (len, orig_len) = (b.u32(l::LEN), b.u32(l::ORIG_LEN));
        if orig_len < len || (flags & DATAGRAM_TRUNCATED != 0) != (orig_len > len) {
            return Err(AbiError::BadValue { field: "orig_len", value: u64::from(orig_len) });
        }
        Ok(RxMessage::Datagram {
            socket,
            from: SocketAddrV4::new(b.ipv4(l::ADDR), b.u16(l::PORT)),
            len,
            orig_len,
        })
    }

    /// Writes the virtio-net header (`num_buffers` = 1), the message header and the body into the
    /// start of `frame`, every byte of them, and returns [`RxMessage::wire_len`]; the caller then
    /// copies the payload to [`RxMessage::payload_range`]. `frame` must have room for the payload
    /// too, so that a message never promises more bytes than its buffer holds.
    pub fn emit(&self, frame: &mut [u8]) -> Result<usize, AbiError> {
        let total = self.total_len();
        if frame.len() < total {
            return Err(AbiError::BufferTooSmall { needed: total, got: frame.len() });
        }
        self.emit_header(frame)
    }

    /// [`RxMessage::emit`] into `frame` without room for the payload: for a writer that puts the
    /// header and the payload into the real buffer separately, and checked that buffer's size
    /// against [`RxMessage::total_len`] itself. `frame` needs [`RxMessage::wire_len`] bytes.
    pub fn emit_header(&self, frame: &mut [u8]) -> Result<usize, AbiError> {
        let wire = self.wire_len();
        if frame.len() < wire {
            return Err(AbiError::BufferTooSmall { needed: wire, got: frame.len() });
        }
        VirtioNetHdr::emit_rx(frame)?;
        let mut f = FieldsMut::new(frame, VIRTIO_NET_HDR_LEN, h::SIZE)?;
        f.put(h::MAGIC, &MAGIC);
        f.u8(h::KIND, self.kind().code());
        f.u64(h::COOKIE, self.cookie().unwrap_or(0));
        f.u32(h::SOCKET, self.socket().0);
        let mut b = FieldsMut::new(frame, BODY, self.kind().body_len())?;
        match *self {
            RxMessage::Complete { op, result, .. } => {
                use layout::complete as l;
                b.u8(l::OP, op);
                match result {
                    Ok(done) => {
                        b.u64(l::VALUE, done.value);
                        b.ipv4(l::ADDR, *done.addr.ip());
                        b.u16(l::PORT, done.addr.port());
                    }
                    Err(e) => b.u32(l::ERRNO, errno_code(e)),
                }
            }
            RxMessage::HelloDone { version, result, .. } => {
                use layout::hello_done as l;
                b.u16(l::MAJOR, version.major);
                b.u16(l::MINOR, version.minor);
                match result {
                    Ok(i) => {
                        b.ipv4(l::ADDR, i.addr);
                        b.u8(l::PREFIX_LEN, i.prefix_len);
                        b.put(l::MAC, &i.mac);
                        b.ipv4(l::GATEWAY, i.gateway);
                        b.u16(l::MSS, i.mss);
                        b.u16(l::MAX_DATAGRAM, i.max_datagram);
                        b.u32(l::MAX_SOCKETS, i.max_sockets);
                        b.u32(l::MAX_SEND_IN_FLIGHT, i.max_send_in_flight);
                        b.u32(l::RX_BUFFER, i.rx_buffer);
                        b.u32(l::MAX_REQUESTS, i.max_requests);
                    }
                    Err(e) => b.u32(l::ERRNO, errno_code(e)),
                }
            }
            RxMessage::Data { len, .. } => b.u32(layout::data::LEN, len),
            RxMessage::Datagram { from, len, orig_len, .. } => {
                use layout::datagram as l;
                b.ipv4(l::ADDR, *from.ip());
                b.u16(l::PORT, from.port());
                b.u16(l::FLAGS, if orig_len > len { DATAGRAM_TRUNCATED } else { 0 });
                b.u32(l::LEN, len);
                b.u32(l::ORIG_LEN, orig_len);
            }
            RxMessage::Accepted { socket, remote, local, .. } => {
                use layout::accepted as l;
                b.u32(l::NEW_SOCKET, socket.0);
                b.ipv4(l::REMOTE_ADDR, *remote.ip());
                b.u16(l::REMOTE_PORT, remote.port());
                b.u16(l::LOCAL_PORT, local.port());
                b.ipv4(l::LOCAL_ADDR, *local.ip());
            }
            RxMessage::Writable { available, .. } => b.u32(layout::writable::AVAILABLE, available),
            RxMessage::Acked { bytes, .. } => b.u32(layout::acked::BYTES, bytes),
            RxMessage::PeerClosed { .. } => {}
            RxMessage::Reset { errno, .. } | RxMessage::Error { errno, .. } => {
                b.u32(layout::socket_error::ERRNO, errno_code(errno))
            }
        }
        Ok(self.wire_len())
    }
}
