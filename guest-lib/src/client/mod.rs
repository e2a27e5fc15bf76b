//! The protocol client: [`GuestSockets`] is slimtcp's shared application side
//! ([`AppSockets`]: socket table, readiness, credit, blocking rules, epoll) over a
//! [`GuestLink`], which speaks `docs/protocol.md` on one queue pair.
//!
//! - Requests go on the transmit queue, one chain each: `[R] hdr+body` (40/48 bytes, in a
//!   per-head header slot) `[R] payload` (send/send_to: the TxBuf itself, zero copy). Blocking
//!   calls wait for their completion by cookie; `send` and `credit` go QUIET (only errors
//!   come back; their cookie tags the socket).
//! - The receive queue always has `queue_size` equal buffers posted; each returned one holds a
//!   completion or an event. Data payloads stay where they landed, become [`RxBuf`]s, and are
//!   reposted (and their bytes credited, in batches of half a window) when dropped.
//! - Send flow control is counted here: a socket's bytes in flight are the lengths of its send
//!   chains the device still holds (they return with the used ring, after the peer's ACK) and
//!   of its `COPY` sends (protocol 1.2: past its share of held chains, the backend copies them
//!   and returns the chain at once) until an `acked` message reports them.
//! - Waiting spins, yields, then sleeps on the receive queue's interrupt with EVENT_IDX armed;
//!   a dead backend turns every call into `ENETDOWN` (`SocketError::StackDown`).

mod buffers;
mod errno;
mod held_age;
mod link;
mod messages;
mod rings;

use std::net::SocketAddrV4;

use slimtcp_abi::{HelloInfo, Version};
use slimtcp_api::app::AppSockets;
use slimtcp_api::{
    EpollEvent, EpollFd, EpollOp, Fd, Proto, Shutdown, SockOpt, SockOptName, SocketApi, SocketError,
};

pub use buffers::{RxBuf, TxBuf, LARGE_TX};
pub use link::GuestLink;

use crate::transport::QueuePair;
use crate::{GuestConfig, GuestError};

/// Bytes reserved per request header slot (the largest fixed request is 48).
const HDR_SLOT: usize = 64;
/// Cookie tags (low 8 bits); the rest is a sequence number or, for quiet requests, the fd.
const TAG_CALL: u64 = 1;
const TAG_CONNECT: u64 = 2;
const TAG_CLOSE: u64 = 3;
const TAG_QUIET_SEND: u64 = 4;
const TAG_QUIET_CREDIT: u64 = 5;
const TAG_HELLO: u64 = 6;

/// The socket API over one queue pair (see the module documentation). One per thread. It
/// dereferences to the shared [`AppSockets`] (`progress`, `tx_buffers_outstanding`, ...).
#[derive(Debug)]
pub struct GuestSockets(AppSockets<GuestLink>);

impl GuestSockets {
    /// Connects to a `slimtcp-vhost` backend at `path` with the vhost-user transport, sets up
    /// `cfg.queue_pairs` queue pairs (at least one) and says hello on pair 0, the one this
    /// instance drives. For one instance per pair, use [`GuestDevice`](crate::GuestDevice).
    pub fn connect_vhost_user(
        path: impl AsRef<std::path::Path>,
        cfg: GuestConfig,
    ) -> Result<GuestSockets, GuestError> {
        let cfg = GuestConfig { queue_pairs: cfg.queue_pairs.max(1), ..cfg };
        crate::GuestDevice::connect_vhost_user(path, cfg)?.take(0)
    }

    /// The client over a queue pair: posts the receive buffers and negotiates the protocol
    /// version.
    pub fn new(qp: QueuePair, cfg: &GuestConfig) -> Result<GuestSockets, GuestError> {
        Ok(GuestSockets(AppSockets::with_link(GuestLink::new(qp, cfg)?)))
    }

    /// What the backend told us in hello: our address, MSS, limits.
    pub fn hello_info(&self) -> &HelloInfo {
        &self.0.link().info
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> Version {
        self.0.link().version
    }

    /// Received payloads copied out of their receive buffer so far, because three quarters of
    /// the posted buffers held payloads the application had not read (their buffers went back
    /// at once, so completions and other sockets' data still get through).
    pub fn rx_payloads_copied(&self) -> u64 {
        self.0.link().rx_copied_out
    }

    /// Which queue pair this instance drives.
    pub fn queue_pair(&self) -> usize {
        self.0.link().qp.index
    }

    /// For a caller that sleeps in its own `poll`/`epoll_wait` on [`wait_fd`](Self::wait_fd)
    /// together with other descriptors (the preload library): returns pending receive credit,
    /// checks that the backend is there and arms the interrupts. `Ok(false)`: news is already
    /// waiting, pump ([`progress`](AppSockets::progress)) instead of sleeping. After the sleep,
    /// call [`sleep_end`](Self::sleep_end).
    pub fn sleep_begin(&mut self) -> Result<bool, SocketError> {
        self.0.link_mut().sleep_begin()
    }

    /// Ends a sleep begun with [`sleep_begin`](Self::sleep_begin).
    pub fn sleep_end(&mut self) {
        self.0.link_mut().sleep_end();
    }

    /// The descriptor the device's interrupt makes readable (vhost-user: the receive queue's
    /// call eventfd; pci: `/dev/uioN`); `None` when the transport has none.
    pub fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.0.link().wait_fd()
    }
}

impl std::ops::Deref for GuestSockets {
    type Target = AppSockets<GuestLink>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for GuestSockets {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The shared implementation, named by the guest's type.
impl SocketApi for GuestSockets {
    type TxBuf = TxBuf;
    type RxBuf = RxBuf;

    fn socket(&mut self, proto: Proto) -> Result<Fd, SocketError> {
        self.0.socket(proto)
    }
    fn bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        self.0.bind(fd, addr)
    }
    fn listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError> {
        self.0.listen(fd, backlog)
    }
    fn accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddrV4), SocketError> {
        self.0.accept(fd)
    }
    fn connect(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        self.0.connect(fd, addr)
    }
    fn shutdown(&mut self, fd: Fd, how: Shutdown) -> Result<(), SocketError> {
        self.0.shutdown(fd, how)
    }
    fn close(&mut self, fd: Fd) -> Result<(), SocketError> {
        self.0.close(fd)
    }
    fn setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError> {
        self.0.setsockopt(fd, opt)
    }
    fn getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        self.0.getsockopt(fd, name)
    }
    fn local_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        self.0.local_addr(fd)
    }
    fn peer_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        self.0.peer_addr(fd)
    }
    fn send(&mut self, fd: Fd, data: &[u8]) -> Result<usize, SocketError> {
        self.0.send(fd, data)
    }
    fn recv(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, SocketError> {
        self.0.recv(fd, buf)
    }
    fn send_to(&mut self, fd: Fd, data: &[u8], dst: SocketAddrV4) -> Result<usize, SocketError> {
        self.0.send_to(fd, data, dst)
    }
    fn recv_from(&mut self, fd: Fd, buf: &mut [u8]) -> Result<(usize, SocketAddrV4), SocketError> {
        self.0.recv_from(fd, buf)
    }
    fn alloc_tx(&mut self, len: usize) -> Result<TxBuf, SocketError> {
        self.0.alloc_tx(len)
    }
    fn send_zc(&mut self, fd: Fd, bufs: &mut Vec<TxBuf>) -> Result<usize, SocketError> {
        self.0.send_zc(fd, bufs)
    }
    fn recv_zc(&mut self, fd: Fd) -> Result<Option<RxBuf>, SocketError> {
        self.0.recv_zc(fd)
    }
    fn epoll_create(&mut self) -> Result<EpollFd, SocketError> {
        self.0.epoll_create()
    }
    fn epoll_ctl(&mut self, ep: EpollFd, op: EpollOp, fd: Fd, event: EpollEvent) -> Result<(), SocketError> {
        self.0.epoll_ctl(ep, op, fd, event)
    }
    fn epoll_wait(
        &mut self,
        ep: EpollFd,
        events: &mut [EpollEvent],
        timeout_ms: i32,
    ) -> Result<usize, SocketError> {
        self.0.epoll_wait(ep, events, timeout_ms)
    }
    fn epoll_close(&mut self, ep: EpollFd) -> Result<(), SocketError> {
        self.0.epoll_close(ep)
    }
}
