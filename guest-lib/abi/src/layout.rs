//! Byte layouts of every struct on the wire: one module per struct, one `Range` constant per field
//! (offsets relative to the struct), `SIZE` the struct's size. `docs/protocol.md` has the same
//! tables. The fields of each struct are declared in order and the macro asserts at compile time
//! that they tile the struct exactly: no gaps, no overlaps, and the size stated here.
//!
//! A frame is `virtio_net_hdr` (12 bytes) + `request_header` or `rx_header` (20 bytes) + a body.

macro_rules! layout {
    ($(#[$m:meta])* $name:ident, size $size:literal, { $($(#[$fm:meta])* $field:ident : $len:literal),* $(,)? }) => {
        $(#[$m])*
        pub mod $name {
            /// Size of the struct in bytes.
            pub const SIZE: usize = $size;
            layout!(@fields 0usize; $($(#[$fm])* $field: $len,)*);
            const _: () = assert!(0usize $(+ $len)* == SIZE, "the fields must tile the struct");
        }
    };
    (@fields $off:expr; ) => {};
    (@fields $off:expr; $(#[$fm:meta])* $field:ident : $len:literal, $($rest:tt)*) => {
        $(#[$fm])*
        pub const $field: core::ops::Range<usize> = $off..$off + $len;
        layout!(@fields $off + $len; $($rest)*);
    };
}

layout!(
    /// `struct virtio_net_hdr_mrg_rxbuf` (virtio 1.x, 5.1.6): precedes every message on every queue.
    virtio_net_hdr, size 12, {
    /// `flags` (0).
    FLAGS: 1,
    /// `gso_type` (0: VIRTIO_NET_HDR_GSO_NONE).
    GSO_TYPE: 1,
    /// `hdr_len` (0).
    HDR_LEN: 2,
    /// `gso_size` (0).
    GSO_SIZE: 2,
    /// `csum_start` (0).
    CSUM_START: 2,
    /// `csum_offset` (0).
    CSUM_OFFSET: 2,
    /// `num_buffers`: 1 on the receive queue; 0 (ignored) on the transmit queue.
    NUM_BUFFERS: 2,
});

layout!(
    /// The header of every request (transmit queue).
    request_header, size 20, {
    /// [`crate::MAGIC`].
    MAGIC: 4,
    /// [`crate::Op`] code.
    OP: 1,
    /// [`crate::RequestFlags`].
    FLAGS: 1,
    /// Zero.
    RESERVED: 2,
    /// Chosen by the guest; echoed in the completion.
    COOKIE: 8,
    /// The socket the request acts on; 0 for hello and socket.
    SOCKET: 4,
});

layout!(
    /// The header of every receive-queue message (completion or event).
    rx_header, size 20, {
    /// [`crate::MAGIC`].
    MAGIC: 4,
    /// [`crate::RxKind`] code.
    KIND: 1,
    /// Zero (no flags are defined in 1.0).
    FLAGS: 1,
    /// Zero.
    RESERVED: 2,
    /// Completions: the request's cookie. Events: 0.
    COOKIE: 8,
    /// The socket concerned, or 0.
    SOCKET: 4,
});

layout!(
    /// Body of `hello` (op 0x01).
    hello, size 8, {
    /// The guest's major version.
    MAJOR: 2,
    /// The guest's minor version.
    MINOR: 2,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of `socket` (op 0x02).
    socket, size 8, {
    /// [`crate::SocketKind`]: 1 TCP, 2 UDP.
    KIND: 1,
    /// Zero.
    RESERVED: 7,
});

layout!(
    /// Body of `bind` (op 0x03) and `connect` (op 0x05): an IPv4 socket address.
    sockaddr, size 8, {
    /// IPv4 address, network order (0.0.0.0: any).
    ADDR: 4,
    /// Port (0 in bind: an ephemeral port).
    PORT: 2,
    /// Zero.
    RESERVED: 2,
});

layout!(
    /// Body of `listen` (op 0x04).
    listen, size 8, {
    /// Connections the host may hold completed but not yet announced.
    BACKLOG: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of `send` (op 0x06); the payload follows.
    send, size 8, {
    /// Payload bytes following the body in the chain (1 or more).
    LEN: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of `send_to` (op 0x07); the payload follows.
    send_to, size 16, {
    /// Destination IPv4 address, network order.
    ADDR: 4,
    /// Destination port.
    PORT: 2,
    /// Zero.
    RESERVED: 2,
    /// Payload bytes following the body in the chain.
    LEN: 4,
    /// Zero.
    RESERVED2: 4,
});

layout!(
    /// Body of `shutdown` (op 0x08).
    shutdown, size 8, {
    /// [`crate::ShutdownHow`]: 0 read, 1 write, 2 both (POSIX `SHUT_*`).
    HOW: 1,
    /// Zero.
    RESERVED: 7,
});

layout!(
    /// Body of `close` (op 0x09).
    close, size 8, {
    /// Bit 0: abort (send RST, drop queued data) instead of an orderly FIN.
    FLAGS: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of `setsockopt` (op 0x0a).
    setsockopt, size 16, {
    /// [`crate::SockOpt`] code.
    OPTION: 4,
    /// Zero.
    RESERVED: 4,
    /// The new value.
    VALUE: 8,
});

layout!(
    /// Body of `getsockopt` (op 0x0b).
    getsockopt, size 8, {
    /// [`crate::SockOpt`] code.
    OPTION: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of `credit` (op 0x0c).
    credit, size 8, {
    /// Bytes of received data the application has consumed.
    BYTES: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of a completion (kind 0x01).
    complete, size 24, {
    /// The op code of the request (echoed even when unknown).
    OP: 1,
    /// Zero.
    RESERVED: 3,
    /// 0 on success, else a Linux errno ([`crate::Errno`]).
    ERRNO: 4,
    /// Op-specific result (0 on error).
    VALUE: 8,
    /// Op-specific IPv4 address (0 on error).
    ADDR: 4,
    /// Op-specific port (0 on error).
    PORT: 2,
    /// Zero.
    RESERVED2: 2,
});

layout!(
    /// Body of the completion of hello (kind 0x02). Its first 8 bytes keep this layout in every
    /// major version.
    hello_done, size 48, {
    /// 0, or EPROTONOSUPPORT when the majors differ (the rest after MINOR is then zero).
    ERRNO: 4,
    /// The host's major version.
    MAJOR: 2,
    /// The negotiated minor version (on error: the host's).
    MINOR: 2,
    /// Zero.
    RESERVED: 4,
    /// The guest's IPv4 address.
    ADDR: 4,
    /// Its prefix length (0..=32).
    PREFIX_LEN: 1,
    /// Zero.
    RESERVED2: 1,
    /// The guest's MAC address (what the host's NIC uses for it).
    MAC: 6,
    /// The default gateway (0.0.0.0: none).
    GATEWAY: 4,
    /// TCP maximum segment size the host uses by default.
    MSS: 2,
    /// Largest UDP payload.
    MAX_DATAGRAM: 2,
    /// Sockets the guest may have open at once (all queue pairs).
    MAX_SOCKETS: 4,
    /// Send payload bytes a socket may have in flight (sent, not yet completed).
    MAX_SEND_IN_FLIGHT: 4,
    /// Default receive window of a socket in bytes (SO_RCVBUF).
    RX_BUFFER: 4,
    /// Requests a queue pair may have outstanding (not yet completed).
    MAX_REQUESTS: 4,
});

layout!(
    /// Body of a `data` event (kind 0x10); the payload follows.
    data, size 8, {
    /// Payload bytes following the body.
    LEN: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of a `datagram` event (kind 0x11); the payload follows.
    datagram, size 16, {
    /// Source IPv4 address.
    ADDR: 4,
    /// Source port.
    PORT: 2,
    /// [`crate::DatagramFlags`]: bit 0 truncated.
    FLAGS: 2,
    /// Payload bytes following the body.
    LEN: 4,
    /// The datagram's full length (> LEN only when truncated).
    ORIG_LEN: 4,
});

layout!(
    /// Body of an `accepted` event (kind 0x12); the header's socket is the listener.
    accepted, size 16, {
    /// The new connection's socket id.
    NEW_SOCKET: 4,
    /// The peer's address.
    REMOTE_ADDR: 4,
    /// The peer's port.
    REMOTE_PORT: 2,
    /// The local port.
    LOCAL_PORT: 2,
    /// The local address.
    LOCAL_ADDR: 4,
});

layout!(
    /// Body of a `writable` event (kind 0x13).
    writable, size 8, {
    /// Send bytes the socket may now put in flight.
    AVAILABLE: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of an `acked` event (kind 0x17, protocol 1.2).
    acked, size 8, {
    /// Bytes of the socket's `COPY` sends the peer acknowledged since the last `acked`.
    BYTES: 4,
    /// Zero.
    RESERVED: 4,
});

layout!(
    /// Body of a `peer_closed` event (kind 0x14): empty.
    peer_closed, size 0, {});

layout!(
    /// Body of the `reset` (kind 0x15) and `error` (kind 0x16) events.
    socket_error, size 8, {
    /// A Linux errno ([`crate::Errno`]), never 0.
    ERRNO: 4,
    /// Zero.
    RESERVED: 4,
});
