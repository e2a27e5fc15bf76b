//! Control operations: socket, bind, listen, accept, connect, shutdown, close, options.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::state::{Phase, SockEntry};
use super::{AppSockets, Link, Reply, Request, MAX_BACKLOG};
use crate::{Fd, Proto, Shutdown, SockOpt, SockOptName, SocketError};

impl<L: Link> AppSockets<L> {
    pub(super) fn do_socket(&mut self, proto: Proto) -> Result<Fd, SocketError> {
        let fd = self.new_fd()?;
        self.request(Request::Open { fd, proto })?;
        self.sockets.insert(fd, SockEntry::new(proto, self.limits.default_sndbuf));
        Ok(fd)
    }

    pub(super) fn do_bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        let s = self.entry(fd)?;
        if let Some(ip) = self.limits.local_ip {
            if !addr.ip().is_unspecified() && *addr.ip() != ip {
                return Err(SocketError::AddrNotAvailable);
            }
        }
        if s.bound || s.phase != Phase::Fresh {
            return Err(SocketError::InvalidInput);
        }
        let proto = s.proto;
        let reply = self.request(Request::Bind { fd, proto, addr })?;
        let s = self.entry_mut(fd)?;
        s.bound = true;
        if let Reply::Addr(local) = reply {
            s.local = Some(local);
        }
        Ok(())
    }

    /// Binds a UDP socket to an ephemeral port unless it is bound already.
    pub(super) fn ensure_bound(&mut self, fd: Fd) -> Result<(), SocketError> {
        if self.entry(fd)?.bound {
            return Ok(());
        }
        self.do_bind(fd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
    }

    pub(super) fn do_listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError> {
        let s = self.entry_mut(fd)?;
        match (s.proto, s.phase) {
            (Proto::Udp, _) => return Err(SocketError::NotSupported),
            (Proto::Tcp, Phase::Listening) => return Ok(()),
            (Proto::Tcp, Phase::Fresh) => {}
            (Proto::Tcp, _) => return Err(SocketError::IsConnected),
        }
        if !s.bound {
            return Err(SocketError::InvalidInput);
        }
        // Listening before the request goes out: connections may follow the answer at once.
        s.phase = Phase::Listening;
        let backlog = backlog.clamp(1, MAX_BACKLOG);
        match self.request(Request::Listen { fd, backlog }) {
            Ok(reply) => {
                if let (Reply::Addr(local), Ok(s)) = (reply, self.entry_mut(fd)) {
                    s.local = Some(local);
                }
                Ok(())
            }
            Err(e) => {
                if let Ok(s) = self.entry_mut(fd) {
                    s.phase = Phase::Fresh;
                }
                Err(e)
            }
        }
    }

    pub(super) fn do_accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddrV4), SocketError> {
        let mut pumped = false;
        loop {
            let s = self.entry_mut(fd)?;
            if s.proto != Proto::Tcp || s.phase != Phase::Listening {
                return Err(SocketError::InvalidInput);
            }
            if let Some(conn) = s.accept_q.pop_front() {
                return Ok(conn);
            }
            if s.acceptable {
                if let Some(conn) = self.accept_by_request(fd)? {
                    return Ok(conn);
                }
                continue;
            }
            if s.nonblocking {
                self.pump_once(&mut pumped)?;
                continue;
            }
            self.wait_for(fd, |s| s.acceptable || !s.accept_q.is_empty() || s.phase != Phase::Listening)?;
        }
    }

    /// Takes a waiting connection from a link that reports [`Event::Acceptable`](super::Event);
    /// `None` when it was gone after all.
    fn accept_by_request(&mut self, fd: Fd) -> Result<Option<(Fd, SocketAddrV4)>, SocketError> {
        // The entry exists before the request goes out: the link may deliver the new
        // connection's first data in the same batch as the answer.
        let mut conn = SockEntry::new(Proto::Tcp, self.entry(fd)?.sndbuf);
        conn.phase = Phase::Connected;
        conn.bound = true;
        let new_fd = self.new_fd()?;
        self.sockets.insert(new_fd, conn);
        let result = self.request(Request::Accept { fd, new_fd });
        match result {
            Ok(Reply::Accepted { local, peer, more }) => {
                self.entry_mut(fd)?.acceptable = more;
                let conn = self.entry_mut(new_fd)?;
                conn.local = Some(local);
                conn.peer = Some(peer);
                return Ok(Some((new_fd, peer)));
            }
            Ok(_) => {}
            Err(SocketError::WouldBlock) => {
                self.sockets.remove(&new_fd);
                self.entry_mut(fd)?.acceptable = false;
                return Ok(None);
            }
            Err(_) => {}
        }
        self.sockets.remove(&new_fd);
        Err(result.err().unwrap_or(SocketError::InvalidInput))
    }

    pub(super) fn do_connect(&mut self, fd: Fd, remote: SocketAddrV4) -> Result<(), SocketError> {
        let s = self.entry(fd)?;
        if s.proto == Proto::Udp {
            self.ensure_bound(fd)?;
            self.request(Request::UdpConnect { fd, remote })?;
            self.entry_mut(fd)?.peer = Some(remote);
            return Ok(());
        }
        match s.phase {
            Phase::Fresh => {}
            Phase::Connecting if s.nonblocking => return Err(SocketError::Already),
            Phase::Connecting => return self.finish_connect(fd),
            Phase::Connected | Phase::Listening => return Err(SocketError::IsConnected),
            Phase::Failed => return Err(s.failure.unwrap_or(SocketError::InvalidInput)),
        }
        if remote.port() == 0 || remote.ip().is_unspecified() || remote.ip().is_broadcast() {
            return Err(SocketError::InvalidInput);
        }
        let nonblocking = s.nonblocking;
        // Connecting before the request goes out: `Connected` may come with the answer.
        self.entry_mut(fd)?.phase = Phase::Connecting;
        let reply = match self.request(Request::Connect { fd, remote }) {
            Ok(reply) => reply,
            Err(e) => {
                if let Ok(s) = self.entry_mut(fd) {
                    s.phase = Phase::Fresh;
                }
                return Err(e);
            }
        };
        let s = self.entry_mut(fd)?;
        if let Reply::Addr(local) = reply {
            s.local = Some(local);
        }
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
        let read = matches!(how, Shutdown::Read | Shutdown::Both) && !s.rd_shut;
        let write = matches!(how, Shutdown::Write | Shutdown::Both) && !s.wr_shut;
        if read {
            s.rd_shut = true;
            s.rxq.clear();
        }
        if write {
            s.wr_shut = true;
        }
        if read || write {
            self.request(Request::Shutdown { fd, read, write })?;
        }
        self.notify(fd);
        Ok(())
    }

    pub(super) fn do_close(&mut self, fd: Fd) -> Result<(), SocketError> {
        let mut s = self.sockets.remove(&fd).ok_or(SocketError::BadHandle)?;
        self.budget.forget(&mut s.budget, s.in_flight);
        for ep in &s.epolls {
            if let Some(set) = self.epolls.get_mut(ep) {
                set.remove(fd);
            }
        }
        // Unread data turns the close into a reset, as in Linux (RFC 2525 2.17).
        let abort = s.proto == Proto::Tcp && !s.rxq.is_empty();
        let unaccepted: Vec<Fd> = s.accept_q.iter().map(|(fd, _)| *fd).collect();
        drop(s);
        self.request(Request::Close { fd, abort })?;
        for conn in unaccepted {
            self.do_close(conn)?;
        }
        Ok(())
    }

    pub(super) fn do_setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError> {
        let s = self.entry_mut(fd)?;
        match opt {
            SockOpt::NonBlocking(on) => {
                s.nonblocking = on;
                return Ok(());
            }
            SockOpt::Error(_) => return Err(SocketError::InvalidInput),
            _ => {}
        }
        self.request(Request::SetOption { fd, opt })?;
        if let SockOpt::SendBuffer(n) = opt {
            self.entry_mut(fd)?.sndbuf = n.min(self.limits.max_sndbuf);
        }
        Ok(())
    }

    pub(super) fn do_getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        let s = self.entry_mut(fd)?;
        match name {
            SockOptName::NonBlocking => Ok(SockOpt::NonBlocking(s.nonblocking)),
            SockOptName::Error => Ok(SockOpt::Error(s.pending_error.take())),
            _ => match self.request(Request::GetOption { fd, name })? {
                Reply::Option(opt) => Ok(opt),
                _ => Err(SocketError::InvalidInput),
            },
        }
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
