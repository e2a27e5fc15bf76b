//! What the server tells its transport.

use std::net::SocketAddrV4;

use super::Transport;
use crate::api::SocketError;

/// One event for the socket `id` on the transport's `lane`.
#[derive(Debug)]
pub struct ServerEvent<T: Transport> {
    /// The lane of the socket (an accepted connection's is its listener's).
    pub lane: usize,
    /// The socket.
    pub id: u32,
    /// What happened.
    pub what: Event<T>,
}

/// What happened to a socket.
#[derive(Debug)]
pub enum Event<T: Transport> {
    /// A connect finished: the local address, or why it failed (the socket is fresh again).
    ConnectDone {
        /// The transport's call from [`connect`](super::SocketServer::connect).
        call: T::Call,
        /// The local address, or the error.
        result: Result<SocketAddrV4, SocketError>,
    },
    /// Listener `id` got connection `socket`, which is open from now on.
    Accepted {
        /// The new socket.
        socket: u32,
        /// Our end.
        local: SocketAddrV4,
        /// The peer.
        remote: SocketAddrV4,
    },
    /// The socket has something to deliver: data, the end of the stream, a datagram. Reported
    /// once until the transport finds nothing left ([`StreamReady::Nothing`](super::StreamReady)).
    Readable,
    /// A socket that refused a send for want of room has this many bytes of room now.
    Writable {
        /// Bytes that may be sent now.
        available: usize,
    },
    /// The connection failed (reported once); its held sends failed before this event.
    Reset {
        /// Why.
        error: SocketError,
    },
    /// A held send is done: acknowledged (TCP), no longer read by the NIC (UDP), or failed.
    SendDone {
        /// The transport's token from the send.
        send: T::Send,
        /// Its byte count, or why it failed.
        result: Result<usize, SocketError>,
    },
}
