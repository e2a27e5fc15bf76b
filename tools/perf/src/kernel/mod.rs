//! `--kernel`: [`KernelSockets`], the Linux kernel's sockets behind the same
//! [`SocketApi`] trait, so the very same workload runs over Linux for side-by-side numbers.
//!
//! Mapping: descriptors are the kernel's; `Ready` bits are Linux's `EPOLL*` values, so epoll
//! registrations pass through. `TCP_MAXSEG` carries the MSS (Linux refuses values below 88:
//! then the path MTU decides, so give the link an MTU of MSS + 40). Buffer and window-scale
//! options are accepted and left to Linux's autotuning: the kernel runs as it ships. UDP
//! sockets use the same calls (`connect` sets the default destination; `send_to`/`recv_from`
//! are `sendto`/`recvfrom`). The zero-copy calls are not part of this adapter (`EOPNOTSUPP`).

mod sys;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use slimtcp::api::{
    EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName, SocketApi, SocketError,
    ZeroCopyTx,
};
use slimtcp::tcp::ConnError;

/// Largest TCP_MAXSEG Linux accepts below which it answers EINVAL.
const LINUX_MIN_MSS: u16 = 88;

/// The socket error for an OS error.
pub fn socket_error(e: &io::Error) -> SocketError {
    match e.raw_os_error().unwrap_or(libc::EIO) {
        libc::EBADF | libc::ENOTSOCK => SocketError::BadHandle,
        libc::EOPNOTSUPP => SocketError::NotSupported,
        libc::EAGAIN => SocketError::WouldBlock,
        libc::EADDRINUSE => SocketError::AddrInUse,
        libc::EADDRNOTAVAIL => SocketError::AddrNotAvailable,
        libc::ENOTCONN => SocketError::NotConnected,
        libc::EPIPE => SocketError::BrokenPipe,
        libc::ENETUNREACH => SocketError::NetUnreachable,
        libc::EMSGSIZE => SocketError::MessageTooLong,
        libc::EMFILE | libc::ENFILE => SocketError::TooManySockets,
        libc::EINPROGRESS => SocketError::InProgress,
        libc::EALREADY => SocketError::Already,
        libc::EISCONN => SocketError::IsConnected,
        libc::ENOBUFS | libc::ENOMEM => SocketError::NoBuffers,
        libc::ENETDOWN => SocketError::StackDown,
        libc::EEXIST => SocketError::Exists,
        libc::ENOENT => SocketError::NotRegistered,
        libc::ECONNREFUSED => SocketError::Connection(ConnError::Refused),
        libc::ECONNRESET => SocketError::Connection(ConnError::Reset),
        libc::ETIMEDOUT => SocketError::Connection(ConnError::TimedOut),
        libc::EHOSTUNREACH => SocketError::Connection(ConnError::Unreachable),
        libc::ECONNABORTED => SocketError::Connection(ConnError::Aborted),
        _ => SocketError::InvalidInput,
    }
}

fn os(e: io::Error) -> SocketError {
    socket_error(&e)
}

/// A transmit buffer for the trait's sake; the kernel adapter never hands one out.
#[derive(Debug, Default)]
pub struct NoTxBuf {
    data: Vec<u8>,
}

impl ZeroCopyTx for NoTxBuf {
    fn space_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    fn filled(&self) -> &[u8] {
        &self.data
    }

    fn set_len(&mut self, len: usize) {
        self.data.truncate(len);
    }
}

/// Linux sockets behind [`SocketApi`] (see the module documentation).
#[derive(Debug, Default)]
pub struct KernelSockets {
    sockets: HashMap<Fd, OwnedFd>,
    epolls: HashMap<EpollFd, OwnedFd>,
    ready: Vec<libc::epoll_event>,
}

impl KernelSockets {
    /// No sockets yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn raw(&self, fd: Fd) -> Result<RawFd, SocketError> {
        self.sockets.get(&fd).map(AsRawFd::as_raw_fd).ok_or(SocketError::BadHandle)
    }

    fn adopt(&mut self, owned: OwnedFd) -> Fd {
        let fd = Fd(u32::try_from(owned.as_raw_fd()).unwrap_or(u32::MAX));
        self.sockets.insert(fd, owned);
        fd
    }

    fn epoll_raw(&self, ep: EpollFd) -> Result<RawFd, SocketError> {
        self.epolls.get(&ep).map(AsRawFd::as_raw_fd).ok_or(SocketError::BadHandle)
    }
}

impl SocketApi for KernelSockets {
    type TxBuf = NoTxBuf;
    type RxBuf = Vec<u8>;

    fn socket(&mut self, proto: Proto) -> Result<Fd, SocketError> {
        let kind = match proto {
            Proto::Tcp => libc::SOCK_STREAM,
            Proto::Udp => libc::SOCK_DGRAM,
        };
        let owned = sys::socket(kind).map_err(os)?;
        Ok(self.adopt(owned))
    }

    fn bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        let raw = self.raw(fd)?;
        sys::set_int(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).map_err(os)?;
        sys::bind(raw, addr).map_err(os)
    }

    fn listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError> {
        sys::listen(self.raw(fd)?, backlog).map_err(os)
    }

    fn accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddrV4), SocketError> {
        let (conn, peer) = sys::accept(self.raw(fd)?).map_err(os)?;
        Ok((self.adopt(conn), peer))
    }

    fn connect(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        sys::connect(self.raw(fd)?, addr).map_err(os)
    }

    fn shutdown(&mut self, fd: Fd, how: Shutdown) -> Result<(), SocketError> {
        let how = match how {
            Shutdown::Read => libc::SHUT_RD,
            Shutdown::Write => libc::SHUT_WR,
            Shutdown::Both => libc::SHUT_RDWR,
        };
        sys::shutdown(self.raw(fd)?, how).map_err(os)
    }

    fn close(&mut self, fd: Fd) -> Result<(), SocketError> {
        self.sockets.remove(&fd).map(drop).ok_or(SocketError::BadHandle)
    }

    fn setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError> {
        let raw = self.raw(fd)?;
        match opt {
            SockOpt::NonBlocking(on) => sys::set_nonblocking(raw, on).map_err(os),
            SockOpt::Mss(mss) if mss < LINUX_MIN_MSS => {
                log::debug!("Linux refuses TCP_MAXSEG {mss}; the path MTU sets the MSS");
                Ok(())
            }
            SockOpt::Mss(mss) => {
                sys::set_int(raw, libc::IPPROTO_TCP, libc::TCP_MAXSEG, i32::from(mss)).map_err(os)
            }
            SockOpt::NoDelay(on) => {
                sys::set_int(raw, libc::IPPROTO_TCP, libc::TCP_NODELAY, i32::from(on)).map_err(os)
            }
            SockOpt::RecvBuffer(_) | SockOpt::SendBuffer(_) | SockOpt::WindowScale(_) => Ok(()),
            SockOpt::Burst(_) | SockOpt::Error(_) => Err(SocketError::InvalidInput),
            SockOpt::KeepAlive(on) => {
                sys::set_int(raw, libc::SOL_SOCKET, libc::SO_KEEPALIVE, i32::from(on)).map_err(os)
            }
            SockOpt::KeepIdle(v) => set_u32(raw, libc::TCP_KEEPIDLE, v),
            SockOpt::KeepInterval(v) => set_u32(raw, libc::TCP_KEEPINTVL, v),
            SockOpt::KeepCount(v) => set_u32(raw, libc::TCP_KEEPCNT, v),
            SockOpt::UserTimeout(v) => set_u32(raw, libc::TCP_USER_TIMEOUT, v),
        }
    }

    fn getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        let raw = self.raw(fd)?;
        let int = |level, opt| sys::get_int(raw, level, opt).map_err(os);
        match name {
            SockOptName::Error => {
                let e = int(libc::SOL_SOCKET, libc::SO_ERROR)?;
                Ok(SockOpt::Error((e != 0).then(|| socket_error(&io::Error::from_raw_os_error(e)))))
            }
            SockOptName::Mss => {
                let v = int(libc::IPPROTO_TCP, libc::TCP_MAXSEG)?;
                Ok(SockOpt::Mss(u16::try_from(v).unwrap_or(u16::MAX)))
            }
            SockOptName::NonBlocking => sys::is_nonblocking(raw).map(SockOpt::NonBlocking).map_err(os),
            SockOptName::NoDelay => Ok(SockOpt::NoDelay(int(libc::IPPROTO_TCP, libc::TCP_NODELAY)? != 0)),
            SockOptName::RecvBuffer => {
                Ok(SockOpt::RecvBuffer(usize::try_from(int(libc::SOL_SOCKET, libc::SO_RCVBUF)?).unwrap_or(0)))
            }
            SockOptName::SendBuffer => {
                Ok(SockOpt::SendBuffer(usize::try_from(int(libc::SOL_SOCKET, libc::SO_SNDBUF)?).unwrap_or(0)))
            }
            SockOptName::WindowScale | SockOptName::Burst => Err(SocketError::NotSupported),
            SockOptName::KeepAlive => Ok(SockOpt::KeepAlive(int(libc::SOL_SOCKET, libc::SO_KEEPALIVE)? != 0)),
            SockOptName::KeepIdle => {
                Ok(SockOpt::KeepIdle(int(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE)?.unsigned_abs()))
            }
            SockOptName::KeepInterval => {
                Ok(SockOpt::KeepInterval(int(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL)?.unsigned_abs()))
            }
            SockOptName::KeepCount => {
                Ok(SockOpt::KeepCount(int(libc::IPPROTO_TCP, libc::TCP_KEEPCNT)?.unsigned_abs()))
            }
            SockOptName::UserTimeout => {
                Ok(SockOpt::UserTimeout(int(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT)?.unsigned_abs()))
            }
        }
    }

    fn local_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        sys::name(self.raw(fd)?, false).map_err(os)
    }

    fn peer_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        sys::name(self.raw(fd)?, true).map_err(os)
    }

    fn send(&mut self, fd: Fd, data: &[u8]) -> Result<usize, SocketError> {
        sys::send(self.raw(fd)?, data).map_err(os)
    }

    fn recv(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, SocketError> {
        sys::recv(self.raw(fd)?, buf).map_err(os)
    }

    fn send_to(&mut self, fd: Fd, data: &[u8], dst: SocketAddrV4) -> Result<usize, SocketError> {
        sys::send_to(self.raw(fd)?, data, dst).map_err(os)
    }

    fn recv_from(&mut self, fd: Fd, buf: &mut [u8]) -> Result<(usize, SocketAddrV4), SocketError> {
        sys::recv_from(self.raw(fd)?, buf).map_err(os)
    }

    fn alloc_tx(&mut self, _len: usize) -> Result<NoTxBuf, SocketError> {
        Err(SocketError::NotSupported)
    }

    fn send_zc(&mut self, _fd: Fd, _bufs: &mut Vec<NoTxBuf>) -> Result<usize, SocketError> {
        Err(SocketError::NotSupported)
    }

    fn recv_zc(&mut self, _fd: Fd) -> Result<Option<Vec<u8>>, SocketError> {
        Err(SocketError::NotSupported)
    }

    fn epoll_create(&mut self) -> Result<EpollFd, SocketError> {
        let owned = sys::epoll_create().map_err(os)?;
        let ep = EpollFd(u32::try_from(owned.as_raw_fd()).unwrap_or(u32::MAX));
        self.epolls.insert(ep, owned);
        Ok(ep)
    }

    fn epoll_ctl(&mut self, ep: EpollFd, op: EpollOp, fd: Fd, event: EpollEvent) -> Result<(), SocketError> {
        let op = match op {
            EpollOp::Add => libc::EPOLL_CTL_ADD,
            EpollOp::Modify => libc::EPOLL_CTL_MOD,
            EpollOp::Delete => libc::EPOLL_CTL_DEL,
        };
        sys::epoll_ctl(self.epoll_raw(ep)?, op, self.raw(fd)?, event.events.0, event.data).map_err(os)
    }

    fn epoll_wait(
        &mut self,
        ep: EpollFd,
        events: &mut [EpollEvent],
        timeout_ms: i32,
    ) -> Result<usize, SocketError> {
        if events.is_empty() {
            return Err(SocketError::InvalidInput);
        }
        let raw = self.epoll_raw(ep)?;
        let n = sys::epoll_wait(raw, &mut self.ready, events.len(), timeout_ms).map_err(os)?;
        for (out, ev) in events.iter_mut().zip(&self.ready[..n]) {
            *out = EpollEvent { events: Ready(ev.events), data: ev.u64 };
        }
        Ok(n)
    }

    fn epoll_close(&mut self, ep: EpollFd) -> Result<(), SocketError> {
        self.epolls.remove(&ep).map(drop).ok_or(SocketError::BadHandle)
    }
}

/// Sets a TCP-level integer option from a `u32` (values above `i32::MAX` are refused).
fn set_u32(raw: std::os::fd::RawFd, opt: libc::c_int, v: u32) -> Result<(), SocketError> {
    let v = i32::try_from(v).map_err(|_| SocketError::InvalidInput)?;
    sys::set_int(raw, libc::IPPROTO_TCP, opt, v).map_err(os)
}
