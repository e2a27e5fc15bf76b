//! What the application side and the worker tell each other over the rings: the socket
//! server's operations and events, typed (the guest protocol carries the same ones as bytes).
//!
//! Sockets are named by the server's ids; the application side keeps the map to its `Fd`s.

use std::net::SocketAddrV4;

use slimtcp_api::{Proto, SockOpt, SockOptName, SocketError};

use super::buffers::TxBuf;
use crate::nic::PacketBuf;

/// Application -> worker. Those that reply do so in order, with one [`Event::Reply`] each.
#[derive(Debug)]
pub enum Request {
    /// A new socket. Replies `Opened`.
    Open { proto: Proto },
    /// Bind to `addr`. Replies `Addr`.
    Bind { id: u32, addr: SocketAddrV4 },
    /// Listen. Replies `Done`.
    Listen { id: u32, backlog: usize },
    /// Connect (TCP: the handshake starts; [`Event::Connected`] or [`Event::Failed`] follows;
    /// UDP: the default peer). Replies `Addr` (the local address).
    Connect { id: u32, remote: SocketAddrV4 },
    /// Set an option. Replies `Done`.
    SetOption { id: u32, opt: SockOpt },
    /// Read an option. Replies `Option`.
    GetOption { id: u32, name: SockOptName },
    /// Queue `buf` on the stream (zero copy: the stack sends from it). [`Event::SendDone`]
    /// follows, once acknowledged or refused.
    Send { id: u32, buf: TxBuf },
    /// Send one datagram (to its peer when `dst` is `None`). [`Event::SendDone`] follows.
    SendTo { id: u32, dst: Option<SocketAddrV4>, buf: TxBuf },
    /// FIN after the queued data.
    Shutdown { id: u32 },
    /// Release the socket; `abort` resets a connection instead of closing it.
    Close { id: u32, abort: bool },
}

/// The successful result of a request that replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Done,
    /// The new socket's id.
    Opened(u32),
    /// A local address.
    Addr(SocketAddrV4),
    /// An option's value.
    Option(SockOpt),
}

/// Worker -> application.
#[derive(Debug)]
pub enum Event {
    /// The answer to the oldest replying request.
    Reply(Result<Reply, SocketError>),
    /// The handshake completed.
    Connected { id: u32, local: SocketAddrV4 },
    /// In-order payload: what the socket had in one worker step, oldest buffer first (`first`,
    /// then `more`, empty without allocation when the step had one). Each buffer's bytes occupy
    /// the receive window until it is released.
    Data { id: u32, first: PacketBuf, more: Vec<PacketBuf> },
    /// The peer closed its side: everything was delivered.
    Eof { id: u32 },
    /// The connection (or the connect) failed.
    Failed { id: u32, error: SocketError },
    /// Listener `listener` got connection `id`.
    Accepted { listener: u32, id: u32, local: SocketAddrV4, remote: SocketAddrV4 },
    /// A send of this many bytes is done with (acknowledged, sent, or refused).
    SendDone { id: u32, bytes: usize },
    /// A socket that found no room to send has some now.
    Writable { id: u32 },
    /// A datagram and its source.
    Datagram { id: u32, from: SocketAddrV4, buf: PacketBuf },
}
