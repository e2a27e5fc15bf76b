//! The narrow interface between the shared application side ([`AppSockets`](super::AppSockets))
//! and one provider's transport: the host runtime's rings and worker, or the guest library's
//! virtqueues. A link translates [`Request`]s into its own wire form, reports what happened as
//! [`Event`]s, and knows how to wait cheaply; everything else (the socket table, readiness,
//! send credit, receive queues, blocking rules, epoll) lives in the shared core.

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::{Fd, Proto, SockOpt, SockOptName, SocketError, ZeroCopyTx};

/// A received payload buffer as the shared core handles it.
pub trait RxPayload: AsRef<[u8]> {
    /// Drops the first `n` bytes (a partial copy-out).
    fn consume(&mut self, n: usize);
}

/// What the application side asks of a link. Sockets are named by the application's [`Fd`];
/// a link keeps whatever map to its own handles it needs.
#[derive(Debug)]
pub enum Request<B> {
    /// A new socket. Replies `Done`.
    Open {
        /// Its descriptor.
        fd: Fd,
        /// TCP or UDP.
        proto: Proto,
    },
    /// Bind to `addr`. Replies `Addr` (the local address).
    Bind {
        /// The socket.
        fd: Fd,
        /// TCP or UDP.
        proto: Proto,
        /// The address asked for.
        addr: SocketAddrV4,
    },
    /// Listen. Replies `Done` or `Addr` (the listening address, when the link knows it).
    Listen {
        /// The socket.
        fd: Fd,
        /// Room for connections not yet accepted (already clamped).
        backlog: usize,
    },
    /// Take one connection waiting on listener `fd` as `new_fd` (links that report
    /// [`Event::Acceptable`]). Replies `Accepted`.
    Accept {
        /// The listener.
        fd: Fd,
        /// The connection's descriptor.
        new_fd: Fd,
    },
    /// Give a connection the link pushed ([`Event::Accepted`]) its descriptor, or refuse it
    /// (`fd: None`: reset it). Replies `Done`.
    Adopt {
        /// The link's token from the event.
        conn: u64,
        /// The descriptor, or `None` to refuse.
        fd: Option<Fd>,
        /// Its listener.
        listener: Fd,
    },
    /// Start a TCP connect. Replies `Done` or `Addr` (the local address); completion comes as
    /// [`Event::Connected`] or [`Event::Failed`].
    Connect {
        /// The socket.
        fd: Fd,
        /// The peer.
        remote: SocketAddrV4,
    },
    /// Set a UDP socket's default destination. Replies `Done`.
    UdpConnect {
        /// The socket.
        fd: Fd,
        /// The peer.
        remote: SocketAddrV4,
    },
    /// Queue a filled buffer on a stream; its bytes come back in [`Event::SendDone`].
    Send {
        /// The socket.
        fd: Fd,
        /// The payload.
        buf: B,
    },
    /// Send one datagram.
    SendTo {
        /// The socket.
        fd: Fd,
        /// The destination.
        dst: SocketAddrV4,
        /// The payload.
        buf: B,
    },
    /// Close directions (at least one is set).
    Shutdown {
        /// The socket.
        fd: Fd,
        /// No more reading.
        read: bool,
        /// No more writing (FIN after the queued data).
        write: bool,
    },
    /// Release the socket; `abort` resets a connection instead of closing it.
    Close {
        /// The socket.
        fd: Fd,
        /// Reset instead of FIN.
        abort: bool,
    },
    /// Set a provider option (everything but `NonBlocking` and `Error`). Replies `Done`.
    SetOption {
        /// The socket.
        fd: Fd,
        /// The option.
        opt: SockOpt,
    },
    /// Read a provider option. Replies `Option`.
    GetOption {
        /// The socket.
        fd: Fd,
        /// Which.
        name: SockOptName,
    },
}

/// The successful answer to a [`Request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Done,
    /// A local address.
    Addr(SocketAddrV4),
    /// A connection was accepted.
    Accepted {
        /// Our end.
        local: SocketAddrV4,
        /// The peer.
        peer: SocketAddrV4,
        /// More connections are waiting.
        more: bool,
    },
    /// An option's value.
    Option(SockOpt),
}

/// What became of a submitted request.
#[derive(Debug)]
pub enum Submitted {
    /// Answered at once (done locally, or sent without a reply to wait for).
    Answered(Result<Reply, SocketError>),
    /// Sent; the answer comes as an [`Event::Reply`] with this ticket.
    Pending(u64),
}

/// What a link reports while it is pumped.
#[derive(Debug)]
pub enum Event<R> {
    /// The answer to a pending request.
    Reply {
        /// From [`Submitted::Pending`].
        ticket: u64,
        /// The answer.
        result: Result<Reply, SocketError>,
    },
    /// A TCP connect completed (with the local address, when the link learns it now).
    Connected {
        /// The socket.
        fd: Fd,
        /// The local address.
        local: Option<SocketAddrV4>,
    },
    /// In-order stream payload: one buffer, or a run of them the link got at once (a step of
    /// the host runtime's worker), oldest first.
    Data {
        /// The socket.
        fd: Fd,
        /// The (first) payload.
        buf: R,
        /// Payload that follows `buf`, in order (empty, without allocation, for one buffer).
        more: Vec<R>,
    },
    /// A datagram and its source.
    Datagram {
        /// The socket.
        fd: Fd,
        /// The source.
        from: SocketAddrV4,
        /// The payload.
        buf: R,
    },
    /// The peer closed its side: everything was delivered.
    Eof {
        /// The socket.
        fd: Fd,
    },
    /// The connection failed.
    Failed {
        /// The socket.
        fd: Fd,
        /// Why.
        error: SocketError,
    },
    /// An error for `SO_ERROR` that does not end the connection.
    Error {
        /// The socket.
        fd: Fd,
        /// Which.
        error: SocketError,
    },
    /// A listener has a connection to take with [`Request::Accept`] (links whose provider
    /// keeps the backlog, like the host worker).
    Acceptable {
        /// The listener.
        fd: Fd,
    },
    /// The link established a connection on a listener and pushes it (links whose provider
    /// hands connections out at once, like the guest protocol); answer with [`Request::Adopt`].
    Accepted {
        /// The listener.
        listener: Fd,
        /// The link's token for the connection.
        conn: u64,
        /// Our end.
        local: SocketAddrV4,
        /// The peer.
        remote: SocketAddrV4,
    },
    /// Stream bytes the peer acknowledged: they no longer count against the send buffer.
    SendDone {
        /// The socket.
        fd: Fd,
        /// How many.
        bytes: usize,
    },
    /// The socket may have become writable.
    Writable {
        /// The socket.
        fd: Fd,
    },
}

/// A link's fixed limits and capabilities.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Sockets open at once.
    pub max_sockets: usize,
    /// Largest datagram payload.
    pub max_datagram: usize,
    /// The send buffer of a new socket.
    pub default_sndbuf: usize,
    /// The largest send buffer (a larger `SO_SNDBUF` is clamped).
    pub max_sndbuf: usize,
    /// Zero-copy transmit buffers the application may hold or have in flight.
    pub max_tx_buffers: usize,
    /// The largest transmit buffer (and copy-send chunk).
    pub max_tx_len: usize,
    /// Our address when the application side checks `bind` itself (`None`: the link does).
    pub local_ip: Option<Ipv4Addr>,
}

/// One provider's transport (see the module documentation). All calls come from the
/// application thread.
pub trait Link {
    /// Zero-copy transmit buffer.
    type TxBuf: ZeroCopyTx;
    /// Received payload buffer.
    type RxBuf: RxPayload;

    /// Limits and capabilities.
    fn limits(&self) -> Limits;
    /// Submits a request, or gives it back untouched when there is no room now (the caller
    /// pumps and retries).
    fn try_submit(&mut self, req: Request<Self::TxBuf>) -> Result<Submitted, Request<Self::TxBuf>>;
    /// Makes progress without waiting, appending what happened to `events`; true when anything
    /// happened. `StackDown` once the provider is gone.
    fn pump(&mut self, events: &mut Vec<Event<Self::RxBuf>>) -> Result<bool, SocketError>;
    /// One idle step of a wait that made no progress for `idle_steps` steps (spin, yield,
    /// sleep); `StackDown` when the provider is found gone.
    fn idle(&mut self, idle_steps: u32) -> Result<(), SocketError>;
    /// A transmit buffer with `len` set, or `None` while the pool is exhausted.
    fn alloc(&mut self, len: usize) -> Option<Self::TxBuf>;
    /// Takes back a buffer that will not be sent.
    fn recycle(&mut self, buf: Self::TxBuf);
    /// Takes back the emptied `more` vector of an [`Event::Data`], for a link that fills such
    /// vectors to use again instead of allocating one per event (dropped by default).
    fn reuse_vec(&mut self, vec: Vec<Self::RxBuf>) {
        drop(vec);
    }
    /// Transmit buffers handed out (held by the application or in flight).
    fn tx_outstanding(&self) -> usize;
    /// True when a send request of `fd` (with its buffer) would be taken now: [`try_submit`]
    /// would not give it back for want of room (the ring's, or the socket's share of it).
    ///
    /// [`try_submit`]: Link::try_submit
    fn has_send_room(&self, fd: Fd) -> bool;
}
