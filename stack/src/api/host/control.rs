//! Control operations: socket, bind, listen, accept, connect, shutdown, close, options.

use std::net::SocketAddrV4;

use super::messages::{Reply, Request};
use super::state::{Phase, SockEntry};
use super::HostSockets;
use crate::api::{Fd, Proto, Shutdown, SockOpt, SockOptName, SocketError};

/// Smallest and largest socket buffers accepted by `setsockopt`.
const MIN_BUFFER: usize = 1024;
const MAX_BUFFER: usize = 64 << 20;
/// Smallest MSS accepted (the paper's experiments go down to 64).
const MIN_MSS: u16 = 64;
/// Largest backlog accepted (larger values are clamped, as Linux does with somaxconn).
const MAX_BACKLOG: usize = 4096;
/// Largest burst accepted.
const MAX_BURST: usize = 512;

impl HostSockets {
    pub(super) fn do_socket(&mut self, proto: Proto) -> Result<Fd, SocketError> {
        let fd = self.new_fd()?;
        self.sockets.insert(fd, SockEntry::new(proto, self.defaults.clone()));
        Ok(fd)
    }

    pub(super) fn do_bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        let local_ip = self.local_ip;
        let s = self.entry_mut(fd)?;
        if !addr.ip().is_unspecified() && *addr.ip() != local_ip {
            return Err(SocketError::AddrNotAvailable);
        }
        if s.bound_port.is_some() || s.on_worker() {
            return Err(SocketError::InvalidInput);
        }
        match s.proto {
            Proto::Tcp => {
                s.bound_port = Some(addr.port());
                Ok(())
            }
            Proto::Udp => self.udp_bind(fd, addr.port()),
        }
    }

    pub(super) fn udp_bind(&mut self, fd: Fd, port: u16) -> Result<(), SocketError> {
        match self.call(fd, Request::UdpBind { fd, port })? {
            Reply::Bound { local } => {
                let s = self.entry_mut(fd)?;
                s.phase = Phase::Bound;
                s.bound_port = Some(local.port());
                s.local = Some(local);
                Ok(())
            }
            _ => Err(SocketError::InvalidInput),
        }
    }

    pub(super) fn do_listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError> {
        let local_ip = self.local_ip;
        let s = self.entry_mut(fd)?;
        match (s.proto, s.phase) {
            (Proto::Udp, _) => return Err(SocketError::NotSupported),
            (Proto::Tcp, Phase::Listening) => return Ok(()),
            (Proto::Tcp, Phase::Fresh) => {}
            (Proto::Tcp, _) => return Err(SocketError::IsConnected),
        }
        let port = match s.bound_port {
            Some(p) if p != 0 => p,
            _ => return Err(SocketError::InvalidInput),
        };
        let config = Box::new(effective_config(s));
        let backlog = backlog.clamp(1, MAX_BACKLOG);
        self.call(fd, Request::Listen { fd, port, backlog, config })?;
        let s = self.entry_mut(fd)?;
        s.phase = Phase::Listening;
        s.local = Some(SocketAddrV4::new(local_ip, port));
        Ok(())
    }

    pub(super) fn do_accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddrV4), SocketError> {
        let mut pumped = false;
        loop {
            let s = self.entry(fd)?;
            if s.proto != Proto::Tcp || s.phase != Phase::Listening {
                return Err(SocketError::InvalidInput);
            }
            if s.acceptable {
                // The entry exists before the request goes out: the worker may send the new
                // connection's first data in the same batch as the reply.
                let mut conn = SockEntry::new(Proto::Tcp, s.config.clone());
                conn.phase = Phase::Connected;
                conn.credit = conn.config.tx_buffer;
                let new_fd = self.new_fd()?;
                self.sockets.insert(new_fd, conn);
                match self.call(fd, Request::Accept { fd, new_fd }) {
                    Ok(Reply::Accepted { local, peer, more }) => {
                        self.entry_mut(fd)?.acceptable = more;
                        let conn = self.entry_mut(new_fd)?;
                        conn.local = Some(local);
                        conn.peer = Some(peer);
                        return Ok((new_fd, peer));
                    }
                    Ok(_) => {
                        self.sockets.remove(&new_fd);
                        return Err(SocketError::InvalidInput);
                    }
                    Err(SocketError::WouldBlock) => {
                        self.sockets.remove(&new_fd);
                        self.entry_mut(fd)?.acceptable = false;
                    }
                    Err(e) => {
                        self.sockets.remove(&new_fd);
                        return Err(e);
                    }
                }
                continue;
            }
            if s.nonblocking {
                if pumped {
                    return Err(SocketError::WouldBlock);
                }
                pumped = true;
                self.pump()?;
                continue;
            }
            self.wait_for(fd, |s| s.acceptable || s.phase != Phase::Listening)?;
        }
    }

    pub(super) fn do_connect(&mut self, fd: Fd, remote: SocketAddrV4) -> Result<(), SocketError> {
        let s = self.entry(fd)?;
        if s.proto == Proto::Udp {
            if s.phase == Phase::Fresh {
                self.udp_bind(fd, 0)?;
            }
            self.call(fd, Request::UdpConnect { fd, peer: remote })?;
            self.entry_mut(fd)?.peer = Some(remote);
            return Ok(());
        }
        match s.phase {
            Phase::Fresh => {}
            Phase::Connecting if s.nonblocking => return Err(SocketError::Already),
            Phase::Connecting => return self.finish_connect(fd),
            Phase::Connected | Phase::Listening => return Err(SocketError::IsConnected),
            Phase::Failed | Phase::Bound => return Err(s.failure.unwrap_or(SocketError::InvalidInput)),
        }
        if remote.port() == 0 || remote.ip().is_unspecified() || remote.ip().is_broadcast() {
            return Err(SocketError::InvalidInput);
        }
        let config = Box::new(effective_config(s));
        let local_port = s.bound_port.filter(|p| *p != 0);
        let nonblocking = s.nonblocking;
        // Connecting before the request goes out: `Connected` may come with the reply.
        self.entry_mut(fd)?.phase = Phase::Connecting;
        let local = match self.call(fd, Request::Connect { fd, local_port, remote, config }) {
            Ok(Reply::Bound { local }) => local,
            other => {
                self.entry_mut(fd)?.phase = Phase::Fresh;
                return Err(other.err().unwrap_or(SocketError::InvalidInput));
            }
        };
        let s = self.entry_mut(fd)?;
        s.local = Some(local);
        s.peer = Some(remote);
        if nonblocking {
            return Err(SocketError::InProgress);
        }
        self.finish_connect(fd)
    }

    fn finish_connect(&mut self, fd: Fd) -> Result<(), SocketError> {
        self.wait_for(fd, |s| s.phase != Phase::Connecting)?;
        let s = self.entry_mut(fd)?;
        match s.phase {
            Phase::Connected => Ok(()),
            _ => {
                s.pending_error = None;
                Err(s.failure.unwrap_or(SocketError::NotConnected))
            }
        }
    }

    pub(super) fn do_shutdown(&mut self, fd: Fd, how: Shutdown) -> Result<(), SocketError> {
        let s = self.entry_mut(fd)?;
        if s.proto != Proto::Tcp || !matches!(s.phase, Phase::Connected | Phase::Connecting) {
            return Err(SocketError::NotConnected);
        }
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            s.rd_shut = true;
            s.rxq.clear();
        }
        let send_fin = matches!(how, Shutdown::Write | Shutdown::Both) && !s.wr_shut;
        if send_fin {
            s.wr_shut = true;
            self.submit(Request::Shutdown { fd })?;
        }
        self.notify(fd);
        Ok(())
    }

    pub(super) fn do_close(&mut self, fd: Fd) -> Result<(), SocketError> {
        let s = self.sockets.remove(&fd).ok_or(SocketError::BadHandle)?;
        for ep in &s.epolls {
            if let Some(set) = self.epolls.get_mut(ep) {
                set.remove(fd);
            }
        }
        if s.on_worker() {
            // Unread data turns the close into a reset, as in Linux (RFC 2525 2.17).
            let abort = s.proto == Proto::Tcp && !s.rxq.is_empty();
            drop(s);
            self.submit(Request::Close { fd, abort })?;
        }
        Ok(())
    }

    pub(super) fn do_setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError> {
        let max_mss = self.max_mss;
        let s = self.entry_mut(fd)?;
        let before_start = s.phase == Phase::Fresh;
        match opt {
            SockOpt::NonBlocking(on) => s.nonblocking = on,
            SockOpt::NoDelay(true) => {}
            SockOpt::NoDelay(false) => return Err(SocketError::InvalidInput),
            SockOpt::RecvBuffer(n) | SockOpt::SendBuffer(n) if !(MIN_BUFFER..=MAX_BUFFER).contains(&n) => {
                return Err(SocketError::InvalidInput)
            }
            SockOpt::Mss(m) if !(MIN_MSS..=max_mss).contains(&m) => return Err(SocketError::InvalidInput),
            SockOpt::WindowScale(Some(w)) if w > 14 => return Err(SocketError::InvalidInput),
            SockOpt::RecvBuffer(_) | SockOpt::SendBuffer(_) | SockOpt::Mss(_) | SockOpt::WindowScale(_)
                if !before_start =>
            {
                return Err(SocketError::IsConnected)
            }
            SockOpt::RecvBuffer(n) => s.config.rx_buffer = n,
            SockOpt::SendBuffer(n) => s.config.tx_buffer = n,
            SockOpt::Mss(m) => s.config.mss = m,
            SockOpt::WindowScale(w) => {
                s.config.window_scale = w;
                s.window_scale_explicit = true;
            }
            SockOpt::Burst(n) => {
                if !(1..=MAX_BURST).contains(&n) {
                    return Err(SocketError::InvalidInput);
                }
                self.burst = n;
                self.submit(super::messages::Request::SetBurst { burst: n })?;
            }
            SockOpt::Error(_) => return Err(SocketError::InvalidInput),
        }
        Ok(())
    }

    pub(super) fn do_getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        let burst = self.burst;
        let s = self.entry_mut(fd)?;
        Ok(match name {
            SockOptName::RecvBuffer => SockOpt::RecvBuffer(s.config.rx_buffer),
            SockOptName::SendBuffer => SockOpt::SendBuffer(s.config.tx_buffer),
            SockOptName::Mss => SockOpt::Mss(s.config.mss),
            SockOptName::WindowScale => SockOpt::WindowScale(effective_config(s).window_scale),
            SockOptName::NoDelay => SockOpt::NoDelay(true),
            SockOptName::Burst => SockOpt::Burst(burst),
            SockOptName::NonBlocking => SockOpt::NonBlocking(s.nonblocking),
            SockOptName::Error => SockOpt::Error(s.pending_error.take()),
        })
    }

    pub(super) fn do_peer_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        let s = self.entry(fd)?;
        match (s.proto, s.phase) {
            (Proto::Tcp, Phase::Connected) | (Proto::Udp, _) => s.peer.ok_or(SocketError::NotConnected),
            _ => Err(SocketError::NotConnected),
        }
    }

    pub(super) fn do_local_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        Ok(self.entry(fd)?.local_addr())
    }
}

/// The connection settings a socket's options give: a receive buffer larger than 64 KiB gets
/// the window scale it needs, unless the application chose one.
fn effective_config(s: &SockEntry) -> crate::tcp::TcpConfig {
    let mut cfg = s.config.clone();
    if !s.window_scale_explicit {
        let needed = crate::tcp::TcpConfig::scale_for_buffer(cfg.rx_buffer);
        cfg.window_scale = Some(cfg.window_scale.unwrap_or(0).max(needed));
    }
    cfg
}
