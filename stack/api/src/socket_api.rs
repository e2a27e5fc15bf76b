//! The one contract applications see: a POSIX-like control API, a copy data path, a zero-copy
//! data path and an epoll-like readiness API. The host runtime implements it over a local
//! SlimTCP worker; the guest library implements it over virtqueues. Applications written
//! against [`SocketApi`] run unchanged on either.

use std::net::SocketAddrV4;

use super::types::{EpollEvent, EpollFd, EpollOp, Fd, Proto, Shutdown, SockOpt, SockOptName};
use super::SocketError;

/// A transmit buffer of the zero-copy API: the application writes its payload in place, then
/// hands the buffer to [`SocketApi::send_zc`]; the provider owns it until the peer
/// acknowledged its bytes, then recycles it for a later [`SocketApi::alloc_tx`].
pub trait ZeroCopyTx {
    /// The whole buffer, for writing (its length is the capacity).
    fn space_mut(&mut self) -> &mut [u8];
    /// The bytes that will be sent.
    fn filled(&self) -> &[u8];
    /// Sets how many bytes (from the start of [`space_mut`](Self::space_mut)) will be sent;
    /// clamped to the capacity.
    fn set_len(&mut self, len: usize);
}

/// A socket provider (see the module documentation). All calls come from one application
/// thread; blocking calls wait only on the socket they name.
///
/// Semantics follow POSIX where they apply: `recv` returns 0 only at end of stream and
/// `EAGAIN` ([`SocketError::WouldBlock`]) when a non-blocking socket has nothing; a
/// non-blocking `connect` returns `EINPROGRESS` and reports completion as `OUT` readiness
/// (then `SO_ERROR` tells the result); a descriptor is invalid after `close` (`EBADF`).
pub trait SocketApi {
    /// Zero-copy transmit buffer.
    type TxBuf: ZeroCopyTx;
    /// Zero-copy receive buffer: payload only, owned by the application until dropped (or
    /// given to [`free_rx`](Self::free_rx)); its bytes count against the receive window until
    /// then.
    type RxBuf: AsRef<[u8]>;

    /// A new socket (blocking by default).
    fn socket(&mut self, proto: Proto) -> Result<Fd, SocketError>;
    /// Binds to a local address: our own IPv4 address or `0.0.0.0`, and a port (0: any).
    fn bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError>;
    /// Listens on the bound port with room for `backlog` connections not yet accepted.
    fn listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError>;
    /// An established connection from a listener, and the peer's address.
    fn accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddrV4), SocketError>;
    /// Connects a TCP socket (or sets the default destination of a UDP socket).
    fn connect(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError>;
    /// Closes one or both directions.
    fn shutdown(&mut self, fd: Fd, how: Shutdown) -> Result<(), SocketError>;
    /// Releases the descriptor; the stack finishes the TCP close on its own. Unread data makes
    /// the close a reset, as in Linux.
    fn close(&mut self, fd: Fd) -> Result<(), SocketError>;
    /// Sets an option.
    fn setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError>;
    /// Reads an option.
    fn getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError>;
    /// The local address (`getsockname`).
    fn local_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError>;
    /// The peer's address (`getpeername`).
    fn peer_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError>;

    /// Copies bytes into the stream (or sends one datagram to the connected peer); returns how
    /// many were taken.
    fn send(&mut self, fd: Fd, data: &[u8]) -> Result<usize, SocketError>;
    /// Copies received bytes out; 0 only at end of stream.
    fn recv(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, SocketError>;
    /// Sends one datagram to `dst` (UDP).
    fn send_to(&mut self, fd: Fd, data: &[u8], dst: SocketAddrV4) -> Result<usize, SocketError>;
    /// Receives one datagram (truncated to `buf`) and its source (UDP).
    fn recv_from(&mut self, fd: Fd, buf: &mut [u8]) -> Result<(usize, SocketAddrV4), SocketError>;

    /// A transmit buffer of `len` bytes to fill in place.
    fn alloc_tx(&mut self, len: usize) -> Result<Self::TxBuf, SocketError>;
    /// Sends buffers from the front of `bufs`, removing the ones accepted; returns how many
    /// were accepted. Accepted buffers belong to the provider until the peer acknowledged
    /// them; then they are recycled.
    fn send_zc(&mut self, fd: Fd, bufs: &mut Vec<Self::TxBuf>) -> Result<usize, SocketError>;
    /// The next received payload buffer; `None` at end of stream.
    fn recv_zc(&mut self, fd: Fd) -> Result<Option<Self::RxBuf>, SocketError>;
    /// Gives a received buffer back (the same as dropping it).
    fn free_rx(&mut self, buf: Self::RxBuf) {
        drop(buf);
    }

    /// A new readiness set.
    fn epoll_create(&mut self) -> Result<EpollFd, SocketError>;
    /// Adds, modifies or deletes the registration of `fd` in `ep`.
    fn epoll_ctl(&mut self, ep: EpollFd, op: EpollOp, fd: Fd, event: EpollEvent) -> Result<(), SocketError>;
    /// Waits until a registered socket is ready, filling `events`; returns how many. Linux
    /// timeout semantics: 0 polls, -1 waits without limit, otherwise milliseconds.
    fn epoll_wait(
        &mut self,
        ep: EpollFd,
        events: &mut [EpollEvent],
        timeout_ms: i32,
    ) -> Result<usize, SocketError>;
    /// Releases a readiness set.
    fn epoll_close(&mut self, ep: EpollFd) -> Result<(), SocketError>;
}
