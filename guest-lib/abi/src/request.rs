//! Requests: what the guest puts on a transmit queue, one per descriptor chain.

use core::net::SocketAddrV4;

use crate::codec::{Fields, FieldsMut};
use crate::layout;
use crate::layout::request_header as h;
use crate::{AbiError, SocketId, Version, VirtioNetHdr, MAGIC, VIRTIO_NET_HDR_LEN};

/// Offset of the body in a request frame.
const BODY: usize = VIRTIO_NET_HDR_LEN + h::SIZE;

code_enum! {
    /// Request op codes.
    Op: u8, "op" {
        /// Version negotiation; answered by [`crate::RxMessage::HelloDone`].
        Hello = 0x01,
        /// Create a socket.
        Socket = 0x02,
        /// Bind a socket to a local address.
        Bind = 0x03,
        /// Make a TCP socket a listener; connections arrive as `accepted` events.
        Listen = 0x04,
        /// Connect (TCP: completes once established; UDP: sets the default peer).
        Connect = 0x05,
        /// Send the payload that follows (zero copy: completes when the peer ACKed it).
        Send = 0x06,
        /// Send one UDP datagram to an address.
        SendTo = 0x07,
        /// Shut down one or both directions.
        Shutdown = 0x08,
        /// Release the socket id.
        Close = 0x09,
        /// Set a socket option.
        SetSockOpt = 0x0a,
        /// Read a socket option.
        GetSockOpt = 0x0b,
        /// Return receive credit: the application consumed received bytes.
        Credit = 0x0c,
    }
}

code_enum! {
    /// The kind of socket a `socket` request creates.
    SocketKind: u8, "kind" {
        /// TCP (SOCK_STREAM).
        Tcp = 1,
        /// UDP (SOCK_DGRAM).
        Udp = 2,
    }
}

code_enum! {
    /// Which directions `shutdown` closes (the POSIX `SHUT_*` values).
    ShutdownHow: u8, "how" {
        /// SHUT_RD: discard further received data.
        Read = 0,
        /// SHUT_WR: send FIN once queued data is sent.
        Write = 1,
        /// SHUT_RDWR: both.
        Both = 2,
    }
}

code_enum! {
    /// Socket options. All values travel as u64.
    SockOpt: u32, "option" {
        /// SO_RCVBUF: the socket's receive window in bytes (see flow control).
        RcvBuf = 1,
        /// SO_SNDBUF: send bytes the socket may have in flight.
        SndBuf = 2,
        /// TCP_MAXSEG: the MSS we advertise and the largest segment we send.
        MaxSeg = 3,
        /// The TCP window-scale shift offered on SYN (0..=14); set before connect/listen.
        WindowScale = 4,
        /// TCP_NODELAY-equivalent: 1 sends at once, 0 lets the host coalesce small sends.
        NoDelay = 5,
        /// Segments the host may transmit for this socket per worker burst.
        Burst = 6,
        /// SO_KEEPALIVE (0 or 1); any time. Protocol 1.1.
        KeepAlive = 7,
        /// TCP_KEEPIDLE, seconds (1..=32767); any time. Protocol 1.1.
        KeepIdle = 8,
        /// TCP_KEEPINTVL, seconds (1..=32767); any time. Protocol 1.1.
        KeepInterval = 9,
        /// TCP_KEEPCNT (1..=127); any time. Protocol 1.1.
        KeepCount = 10,
        /// TCP_USER_TIMEOUT, milliseconds (0: off); any time. Protocol 1.1.
        UserTimeout = 11,
    }
}

impl SockOpt {
    /// The keepalive and user-timeout options (protocol 1.1).
    pub fn is_liveness(self) -> bool {
        matches!(
            self,
            SockOpt::KeepAlive
                | SockOpt::KeepIdle
                | SockOpt::KeepInterval
                | SockOpt::KeepCount
                | SockOpt::UserTimeout
        )
    }
}

/// Flags in the request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RequestFlags(u8);

impl RequestFlags {
    /// Bit 0: no completion on success (errors are still reported). Not allowed on hello.
    pub const QUIET: RequestFlags = RequestFlags(0x01);
    /// Bit 1, `send` only (protocol 1.2): the host may copy the payload and return the chain
    /// at once; the send's bytes are then counted as acknowledged by `acked` events, never by
    /// the chain's return (docs/protocol.md section 5.6).
    pub const COPY: RequestFlags = RequestFlags(0x02);
    const DEFINED: u8 = 0x03;

    /// No flags.
    pub const fn empty() -> Self {
        RequestFlags(0)
    }
    /// The wire byte.
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// The flags of a wire byte, `None` if an undefined bit is set.
    pub const fn from_bits(bits: u8) -> Option<Self> {
        if bits & !Self::DEFINED == 0 {
            Some(RequestFlags(bits))
        } else {
            None
        }
    }
    /// Whether all of `other`'s bits are set.
    pub const fn contains(self, other: RequestFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether the host must not answer success.
    pub const fn is_quiet(self) -> bool {
        self.contains(Self::QUIET)
    }
    /// Whether a send's acknowledgement comes in `acked` events (its payload may be copied).
    pub const fn is_copy(self) -> bool {
        self.contains(Self::COPY)
    }
}

impl core::ops::BitOr for RequestFlags {
    type Output = RequestFlags;
    fn bitor(self, rhs: RequestFlags) -> RequestFlags {
        RequestFlags(self.0 | rhs.0)
    }
}

/// The request header alone, checked only for length and magic: enough for the host to answer
/// a request that fails [`Request::parse`] with an error completion carrying its cookie and op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// The raw op code (possibly unknown).
    pub op: u8,
    /// The raw flags byte (possibly with undefined bits).
    pub flags: u8,
    /// The guest's cookie.
    pub cookie: u64,
    /// The socket field.
    pub socket: SocketId,
}

impl RequestHeader {
    /// Reads the header of a request frame (which starts with the virtio-net header).
    pub fn parse(frame: &[u8]) -> Result<RequestHeader, AbiError> {
        let f = Fields::new(frame, VIRTIO_NET_HDR_LEN, h::SIZE)?;
        let magic = f.bytes::<4>(h::MAGIC);
        if magic != MAGIC {
            return Err(AbiError::BadMagic(magic));
        }
        Ok(RequestHeader {
            op: f.u8(h::OP),
            flags: f.u8(h::FLAGS),
            cookie: f.u64(h::COOKIE),
            socket: SocketId(f.u32(h::SOCKET)),
        })
    }
}

/// The op-specific part of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestBody {
    /// Announce the guest's version; must be the first request on each queue pair.
    Hello {
        /// The guest's version.
        version: Version,
    },
    /// Create a socket (header socket 0); the completion's header carries the new id.
    Socket {
        /// TCP or UDP.
        kind: SocketKind,
    },
    /// Bind to a local address (0.0.0.0: any; port 0: ephemeral).
    Bind {
        /// The local address.
        local: SocketAddrV4,
    },
    /// Listen (TCP).
    Listen {
        /// Completed connections the host may hold before announcing them.
        backlog: u32,
    },
    /// Connect to a remote address (port not 0).
    Connect {
        /// The peer.
        remote: SocketAddrV4,
    },
    /// Send `len` payload bytes that follow the body in the chain (`len` >= 1).
    Send {
        /// Payload length.
        len: u32,
    },
    /// Send one datagram of `len` bytes (following the body) to `remote` (port not 0).
    SendTo {
        /// Destination.
        remote: SocketAddrV4,
        /// Payload length.
        len: u32,
    },
    /// Shut down directions.
    Shutdown {
        /// Which.
        how: ShutdownHow,
    },
    /// Close the socket; the id is free once the completion arrives.
    Close {
        /// Reset the connection (RST) instead of closing it in order (FIN).
        abort: bool,
    },
    /// Set an option.
    SetSockOpt {
        /// Which.
        option: SockOpt,
        /// New value.
        value: u64,
    },
    /// Read an option (value in the completion).
    GetSockOpt {
        /// Which.
        option: SockOpt,
    },
    /// The application consumed `bytes` of received data (`bytes` >= 1).
    Credit {
        /// Consumed bytes.
        bytes: u32,
    },
}

impl RequestBody {
    /// The op of this body.
    pub fn op(&self) -> Op {
        match self {
            RequestBody::Hello { .. } => Op::Hello,
            RequestBody::Socket { .. } => Op::Socket,
            RequestBody::Bind { .. } => Op::Bind,
            RequestBody::Listen { .. } => Op::Listen,
            RequestBody::Connect { .. } => Op::Connect,
            RequestBody::Send { .. } => Op::Send,
            RequestBody::SendTo { .. } => Op::SendTo,
            RequestBody::Shutdown { .. } => Op::Shutdown,
            RequestBody::Close { .. } => Op::Close,
            RequestBody::SetSockOpt { .. } => Op::SetSockOpt,
            RequestBody::GetSockOpt { .. } => Op::GetSockOpt,
            RequestBody::Credit { .. } => Op::Credit,
        }
    }
}

impl Op {
    /// Size of this op's body.
    pub fn body_len(self) -> usize {
        match self {
            Op::Hello => layout::hello::SIZE,
            Op::Socket => layout::socket::SIZE,
            Op::Bind | Op::Connect => layout::sockaddr::SIZE,
            Op::Listen => layout::listen::SIZE,
            Op::Send => layout::send::SIZE,
            Op::SendTo => layout::send_to::SIZE,
            Op::Shutdown => layout::shutdown::SIZE,
            Op::Close => layout::close::SIZE,
            Op::SetSockOpt => layout::setsockopt::SIZE,
            Op::GetSockOpt => layout::getsockopt::SIZE,
            Op::Credit => layout::credit::SIZE,
        }
    }

    /// Whether requests of this op name no socket (header socket 0).
    pub fn takes_no_socket(self) -> bool {
        matches!(self, Op::Hello | Op::Socket)
    }
}

/// A request, fully validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Request {
    /// Chosen by the guest, echoed in the completion.
    pub cookie: u64,
    /// The socket acted on ([`SocketId::NONE`] for hello and socket, and only for them).
    pub socket: SocketId,
    /// Header flags.
    pub flags: RequestFlags,
    /// The op and its arguments.
    pub body: RequestBody,
}

const CLOSE_ABORT: u32 = 0x1;

/// The body of an `op` request: every op's fields checked (reserved bytes zero, known codes,
/// non-zero lengths and ports where the protocol wants them).
fn parse_body(op: Op, b: &Fields<'_>) -> Result<RequestBody, AbiError> {
    let body = match op {
        Op::Hello => {
            use layout::hello as l;
            b.reserved(l::RESERVED)?;
            RequestBody::Hello { version: Version { major: b.u16(l::MAJOR), minor: b.u16(l::MINOR) } }
        }
        Op::Socket => {
            use layout::socket as l;
            b.reserved(l::RESERVED)?;
            RequestBody::Socket { kind: SocketKind::parse(b.u8(l::KIND))? }
        }
        Op::Bind | Op::Connect => {
            use layout::sockaddr as l;
            b.reserved(l::RESERVED)?;
            let a = sockaddr(b, l::ADDR, l::PORT);
            if op == Op::Bind {
                RequestBody::Bind { local: a }
            } else {
                RequestBody::Connect { remote: nonzero_port(a)? }
            }
        }
        Op::Listen => {
            use layout::listen as l;
            b.reserved(l::RESERVED)?;
            RequestBody::Listen { backlog: b.u32(l::BACKLOG) }
        }
        Op::Send => {
            use layout::send as l;
            b.reserved(l::RESERVED)?;
            RequestBody::Send { len: nonzero_len("len", b.u32(l::LEN))? }
        }
        Op::SendTo => {
            use layout::send_to as l;
            b.reserved(l::RESERVED)?;
            b.reserved(l::RESERVED2)?;
            RequestBody::SendTo { remote: nonzero_port(sockaddr(b, l::ADDR, l::PORT))?, len: b.u32(l::LEN) }
        }
        Op::Shutdown => {
            use layout::shutdown as l;
            b.reserved(l::RESERVED)?;
            RequestBody::Shutdown { how: ShutdownHow::parse(b.u8(l::HOW))? }
        }
        Op::Close => {
            use layout::close as l;
            b.reserved(l::RESERVED)?;
            let flags = b.u32(l::FLAGS);
            if flags & !CLOSE_ABORT != 0 {
                return Err(AbiError::ReservedNonZero { offset: BODY + l::FLAGS.start });
            }
            RequestBody::Close { abort: flags & CLOSE_ABORT != 0 }
        }
        Op::SetSockOpt => {
            use layout::setsockopt as l;
            b.reserved(l::RESERVED)?;
            let code = b.u32(l::OPTION);
            let option = SockOpt::from_code(code).ok_or(AbiError::UnknownOption(code))?;
            RequestBody::SetSockOpt { option, value: b.u64(l::VALUE) }
        }
        Op::GetSockOpt => {
            use layout::getsockopt as l;
            b.reserved(l::RESERVED)?;
            let code = b.u32(l::OPTION);
            RequestBody::GetSockOpt { option: SockOpt::from_code(code).ok_or(AbiError::UnknownOption(code))? }
        }
        Op::Credit => {
            use layout::credit as l;
            b.reserved(l::RESERVED)?;
            RequestBody::Credit { bytes: nonzero_len("bytes", b.u32(l::BYTES))? }
        }
    };
    Ok(body)
}

fn sockaddr(f: &Fields<'_>, addr: core::ops::Range<usize>, port: core::ops::Range<usize>) -> SocketAddrV4 {
    SocketAddrV4::new(f.ipv4(addr), f.u16(port))
}

fn nonzero_port(a: SocketAddrV4) -> Result<SocketAddrV4, AbiError> {
    if a.port() == 0 {
        Err(AbiError::BadValue { field: "port", value: 0 })
    } else {
        Ok(a)
    }
}

fn nonzero_len(field: &'static str, v: u32) -> Result<u32, AbiError> {
    if v == 0 {
        Err(AbiError::BadValue { field, value: 0 })
    } else {
        Ok(v)
    }
}

impl Request {
    /// A request with no flags.
    pub fn new(cookie: u64, socket: SocketId, body: RequestBody) -> Request {
        Request { cookie, socket, flags: RequestFlags::empty(), body }
    }

    /// This request with [`RequestFlags::QUIET`].
    pub fn quiet(mut self) -> Request {
        self.flags = self.flags | RequestFlags::QUIET;
        self
    }

    /// This request with [`RequestFlags::COPY`] (a send, protocol 1.2).
    pub fn copy_allowed(mut self) -> Request {
        self.flags = self.flags | RequestFlags::COPY;
        self
    }

    /// The op.
    pub fn op(&self) -> Op {
        self.body.op()
    }

    /// Bytes of virtio-net header, request header and body: where the payload starts.
    pub fn wire_len(&self) -> usize {
        BODY + self.op().body_len()
    }

    /// Payload bytes that follow the body (send and send_to), else 0.
    pub fn payload_len(&self) -> usize {
        match self.body {
            RequestBody::Send { len } | RequestBody::SendTo { len, .. } => len as usize,
            _ => 0,
        }
    }

    /// The device-readable length the request's descriptor chain must have exactly.
    pub fn chain_len(&self) -> usize {
        self.wire_len() + self.payload_len()
    }

    /// Checks the readable length of the chain against [`Request::chain_len`].
    pub fn check_chain_len(&self, readable: usize) -> Result<(), AbiError> {
        if readable == self.chain_len() {
            Ok(())
        } else {
            Err(AbiError::LengthMismatch { expected: self.chain_len(), got: readable })
        }
    }

    /// Parses a request from the start of a frame (virtio-net header included, its contents
    /// ignored). `frame` must hold at least [`Request::wire_len`] bytes; any bytes beyond are
    /// payload, which the caller checks with [`Request::check_chain_len`]. Never panics.
    pub fn parse(frame: &[u8]) -> Result<Request, AbiError> {
        let (hdr, op, flags) = Self::parse_header(frame)?;
        let b = Fields::new(frame, BODY, op.body_len())?;
        let body = parse_body(op, &b)?;
        Ok(Request { cookie: hdr.cookie, socket: hdr.socket, flags, body })
    }

    /// Checks the request header: a known op, known flags, zero reserved bytes, no quiet hello,
    /// and a socket exactly when the op acts on one.
    fn parse_header(frame: &[u8]) -> Result<(RequestHeader, Op, RequestFlags), AbiError> {
        let hdr = RequestHeader::parse(frame)?;
        let f = Fields::new(frame, VIRTIO_NET_HDR_LEN, h::SIZE)?;
        let op = Op::from_code(hdr.op).ok_or(AbiError::UnknownOp(hdr.op))?;
        let flags = RequestFlags::from_bits(hdr.flags)
            .ok_or(AbiError::ReservedNonZero { offset: VIRTIO_NET_HDR_LEN + h::FLAGS.start })?;
        f.reserved(h::RESERVED)?;
        if (op == Op::Hello && flags.is_quiet()) || (op != Op::Send && flags.is_copy()) {
            return Err(AbiError::BadValue { field: "flags", value: u64::from(hdr.flags) });
        }
        if op.takes_no_socket() != hdr.socket.is_none() {
            return Err(AbiError::BadValue { field: "socket", value: u64::from(hdr.socket.0) });
        }
        Ok((hdr, op, flags))
    }

    /// Writes the virtio-net header (zeros), the request header and the body into the start of
    /// `frame`, every byte of them; returns [`Request::wire_len`]. The payload of send and
    /// send_to goes into further descriptors (or after these bytes). `parse(emit(r)) == r` for
    /// every request that follows the rules of [`RequestBody`].
    pub fn emit(&self, frame: &mut [u8]) -> Result<usize, AbiError> {
        let len = self.wire_len();
        if frame.len() < len {
            return Err(AbiError::BufferTooSmall { needed: len, got: frame.len() });
        }
        VirtioNetHdr::emit_tx(frame)?;
        let mut f = FieldsMut::new(frame, VIRTIO_NET_HDR_LEN, h::SIZE)?;
        f.put(h::MAGIC, &MAGIC);
        f.u8(h::OP, self.op().code());
        f.u8(h::FLAGS, self.flags.bits());
        f.u64(h::COOKIE, self.cookie);
        f.u32(h::SOCKET, self.socket.0);
        let mut b = FieldsMut::new(frame, BODY, self.op().body_len())?;
        match self.body {
            RequestBody::Hello { version } => {
                b.u16(layout::hello::MAJOR, version.major);
                b.u16(layout::hello::MINOR, version.minor);
            }
            RequestBody::Socket { kind } => b.u8(layout::socket::KIND, kind.code()),
            RequestBody::Bind { local: a } | RequestBody::Connect { remote: a } => {
                b.ipv4(layout::sockaddr::ADDR, *a.ip());
                b.u16(layout::sockaddr::PORT, a.port());
            }
            RequestBody::Listen { backlog } => b.u32(layout::listen::BACKLOG, backlog),
            RequestBody::Send { len } => b.u32(layout::send::LEN, len),
            RequestBody::SendTo { remote, len } => {
                b.ipv4(layout::send_to::ADDR, *remote.ip());
                b.u16(layout::send_to::PORT, remote.port());
                b.u32(layout::send_to::LEN, len);
            }
            RequestBody::Shutdown { how } => b.u8(layout::shutdown::HOW, how.code()),
            RequestBody::Close { abort } => b.u32(layout::close::FLAGS, if abort { CLOSE_ABORT } else { 0 }),
            RequestBody::SetSockOpt { option, value } => {
                b.u32(layout::setsockopt::OPTION, option.code());
                b.u64(layout::setsockopt::VALUE, value);
            }
            RequestBody::GetSockOpt { option } => b.u32(layout::getsockopt::OPTION, option.code()),
            RequestBody::Credit { bytes } => b.u32(layout::credit::BYTES, bytes),
        }
        Ok(len)
    }
}
