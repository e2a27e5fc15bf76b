//! What the application side and the worker tell each other over the rings.
//!
//! Requests name sockets by the application's [`Fd`]; the worker keeps the map to its own
//! handles, so events carry the `Fd` back and the application never sees worker handles.

use std::net::SocketAddrV4;

use slimtcp_api::{Fd, SocketError};

use super::buffers::TxBuf;
use crate::nic::PacketBuf;
use crate::tcp::TcpConfig;

/// Application -> worker.
#[derive(Debug)]
pub enum Request {
    /// Listen on `port`; accepted connections get `config`. Replies `Done`.
    Listen { fd: Fd, port: u16, backlog: usize, config: Box<TcpConfig> },
    /// Take one established connection from listener `fd` as `new_fd`. Replies `Accepted`.
    Accept { fd: Fd, new_fd: Fd },
    /// Start connecting. Replies `Bound` (the local address), then `Connected` or `Failed`.
    Connect { fd: Fd, local_port: Option<u16>, remote: SocketAddrV4, config: Box<TcpConfig> },
    /// Queue `buf` on the stream (zero copy: the stack sends from it). Returned in `SendDone`.
    Send { fd: Fd, buf: TxBuf },
    /// FIN after the queued data.
    Shutdown { fd: Fd },
    /// Release the socket; `abort` resets a connection instead of closing it.
    Close { fd: Fd, abort: bool },
    /// Bind a UDP socket to `port` (0: any). Replies `Bound`.
    UdpBind { fd: Fd, port: u16 },
    /// Accept datagrams only from `peer`. Replies `Done`.
    UdpConnect { fd: Fd, peer: SocketAddrV4 },
    /// Send one datagram. The buffer comes back in `SendDone`.
    UdpSend { fd: Fd, dst: SocketAddrV4, buf: TxBuf },
    /// Frames per burst for the whole interface.
    SetBurst { burst: usize },
}

/// The successful result of a request that replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Done,
    /// Bound to this local address.
    Bound { local: SocketAddrV4 },
    /// A connection was accepted.
    Accepted { local: SocketAddrV4, peer: SocketAddrV4, more: bool },
}

/// Worker -> application.
#[derive(Debug)]
pub enum Event {
    /// The answer to the last replying request on `fd`.
    Reply { fd: Fd, result: Result<Reply, SocketError> },
    /// The handshake completed.
    Connected { fd: Fd },
    /// In-order payload; its bytes occupy the receive window until the buffer is released.
    Data { fd: Fd, buf: PacketBuf },
    /// The peer closed its side: everything was delivered.
    Eof { fd: Fd },
    /// The connection failed.
    Failed { fd: Fd, error: SocketError },
    /// A listener has a connection to accept.
    Acceptable { fd: Fd },
    /// Transmit buffers the stack is done with (acknowledged, or never sendable).
    SendDone { fd: Fd, bufs: Vec<TxBuf> },
    /// A datagram and its source.
    Datagram { fd: Fd, from: SocketAddrV4, buf: PacketBuf },
}
