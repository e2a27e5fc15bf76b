//! Control operations: socket, bind, listen, accept, connect, shutdown, close, options.

use std::net::SocketAddrV4;

use slimtcp::api::{Fd, Proto, Shutdown, SockOpt, SockOptName, SocketError};
use slimtcp_abi::{Request, RequestBody, ShutdownHow, SocketId, SocketKind};

use super::state::{Phase, SockEntry};
use super::{GuestSockets, TAG_CLOSE, TAG_CONNECT};

/// Largest backlog accepted (larger values are clamped, as Linux does with somaxconn).
const MAX_BACKLOG: usize = 4096;

impl GuestSockets {
    pub(super) fn do_socket(&mut self, proto: Proto) -> Result<Fd, SocketError> {
        let kind = match proto {
            Proto::Tcp => SocketKind::Tcp,
            Proto::Udp => SocketKind::Udp,
        };
        let (sid, _) = self.call(SocketId::NONE, RequestBody::Socket { kind })?;
        if sid.is_none() {
            return Err(SocketError::InvalidInput);
        }
        let fd = self.new_fd()?;
        let entry = SockEntry::new(sid, proto, self.default_sndbuf(), self.default_rcvbuf());
        self.sockets.insert(fd, entry);
        self.by_sid.insert(sid, fd);
        Ok(fd)
    }

    pub(super) fn do_bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        let s = self.entry(fd)?;
        if s.bound || s.phase != Phase::Fresh {
            return Err(SocketError::InvalidInput);
        }
        let sid = s.sid;
        let (_, done) = self.call(sid, RequestBody::Bind { local: addr })?;
        let s = self.entry_mut(fd)?;
        s.bound = true;
        s.local = Some(done.addr);
        Ok(())
    }

    pub(super) fn do_listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError> {
        let s = self.entry(fd)?;
        match (s.proto, s.phase) {
            (Proto::Udp, _) => return Err(SocketError::NotSupported),
            (Proto::Tcp, Phase::Listening) => return Ok(()),
            (Proto::Tcp, Phase::Fresh) => {}
            (Proto::Tcp, _) => return Err(SocketError::IsConnected),
        }
        if !s.bound {
            return Err(SocketError::InvalidInput);
        }
        let sid = s.sid;
        let backlog = backlog.clamp(1, MAX_BACKLOG) as u32;
        // Listening before the request goes out: `accepted` may follow the completion at once.
        self.entry_mut(fd)?.phase = Phase::Listening;
        if let Err(e) = self.call(sid, RequestBody::Listen { backlog }) {
            if let Ok(s) = self.entry_mut(fd) {
                s.phase = Phase::Fresh;
            }
            return Err(e);
        }
        Ok(())
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
            if s.nonblocking {
                if !std::mem::replace(&mut pumped, true) && self.pump()? {
                    continue;
                }
                return Err(SocketError::WouldBlock);
            }
            self.wait_for(fd, |s| !s.accept_q.is_empty() || s.phase != Phase::Listening)?;
        }
    }

    pub(super) fn do_connect(&mut self, fd: Fd, remote: SocketAddrV4) -> Result<(), SocketError> {
        let s = self.entry(fd)?;
        let sid = s.sid;
        if s.proto == Proto::Udp {
            if !s.bound {
                self.do_bind(fd, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0))?;
            }
            self.call(sid, RequestBody::Connect { remote })?;
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
        let s = self.entry_mut(fd)?;
        s.phase = Phase::Connecting;
        s.peer = Some(remote);
        let cookie = self.next_cookie(TAG_CONNECT);
        if let Err(e) = self.submit(Request::new(cookie, sid, RequestBody::Connect { remote }), None) {
            if let Ok(s) = self.entry_mut(fd) {
                s.phase = Phase::Fresh;
            }
            return Err(e);
        }
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
        let rd = matches!(how, Shutdown::Read | Shutdown::Both) && !s.rd_shut;
        let wr = matches!(how, Shutdown::Write | Shutdown::Both) && !s.wr_shut;
        if rd {
            s.rd_shut = true;
            s.rxq.clear();
        }
        if wr {
            s.wr_shut = true;
        }
        let sid = s.sid;
        let how = match (rd, wr) {
            (true, true) => Some(ShutdownHow::Both),
            (true, false) => Some(ShutdownHow::Read),
            (false, true) => Some(ShutdownHow::Write),
            (false, false) => None,
        };
        if let Some(how) = how {
            self.call(sid, RequestBody::Shutdown { how })?;
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
        self.by_sid.remove(&s.sid);
        self.closing.insert(s.sid, ());
        // Unread data turns the close into a reset, as in Linux (RFC 2525 2.17).
        let abort = s.proto == Proto::Tcp && !s.rxq.is_empty();
        let unaccepted: Vec<Fd> = s.accept_q.iter().map(|(fd, _)| *fd).collect();
        let sid = s.sid;
        drop(s);
        let cookie = self.next_cookie(TAG_CLOSE);
        self.submit(Request::new(cookie, sid, RequestBody::Close { abort }), None)?;
        for conn in unaccepted {
            self.do_close(conn)?;
        }
        Ok(())
    }

    pub(super) fn do_setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError> {
        use slimtcp_abi::SockOpt as W;
        let max_in_flight = self.default_sndbuf();
        let s = self.entry_mut(fd)?;
        let sid = s.sid;
        let (option, value) = match opt {
            SockOpt::NonBlocking(on) => {
                s.nonblocking = on;
                return Ok(());
            }
            SockOpt::Error(_) => return Err(SocketError::InvalidInput),
            SockOpt::RecvBuffer(n) => (W::RcvBuf, n as u64),
            SockOpt::SendBuffer(n) => (W::SndBuf, n as u64),
            SockOpt::Mss(m) => (W::MaxSeg, u64::from(m)),
            SockOpt::WindowScale(Some(w)) => (W::WindowScale, u64::from(w)),
            // The protocol has no "offer no window scale"; shift 0 is the closest.
            SockOpt::WindowScale(None) => (W::WindowScale, 0),
            SockOpt::NoDelay(on) => (W::NoDelay, u64::from(on)),
            SockOpt::Burst(n) => (W::Burst, n as u64),
        };
        self.call(sid, RequestBody::SetSockOpt { option, value })?;
        let s = self.entry_mut(fd)?;
        match opt {
            SockOpt::RecvBuffer(n) => s.rcvbuf = n,
            SockOpt::SendBuffer(n) => s.sndbuf = n.min(max_in_flight),
            _ => {}
        }
        Ok(())
    }

    pub(super) fn do_getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        use slimtcp_abi::SockOpt as W;
        let s = self.entry_mut(fd)?;
        let option = match name {
            SockOptName::NonBlocking => return Ok(SockOpt::NonBlocking(s.nonblocking)),
            SockOptName::Error => return Ok(SockOpt::Error(s.pending_error.take())),
            SockOptName::RecvBuffer => W::RcvBuf,
            SockOptName::SendBuffer => W::SndBuf,
            SockOptName::Mss => W::MaxSeg,
            SockOptName::WindowScale => W::WindowScale,
            SockOptName::NoDelay => W::NoDelay,
            SockOptName::Burst => W::Burst,
        };
        let sid = s.sid;
        let (_, done) = self.call(sid, RequestBody::GetSockOpt { option })?;
        let v = done.value;
        let sat = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(match name {
            SockOptName::RecvBuffer => SockOpt::RecvBuffer(sat(v)),
            SockOptName::SendBuffer => SockOpt::SendBuffer(sat(v)),
            SockOptName::Mss => SockOpt::Mss(u16::try_from(v).unwrap_or(u16::MAX)),
            SockOptName::WindowScale => SockOpt::WindowScale(u8::try_from(v).ok()),
            SockOptName::NoDelay => SockOpt::NoDelay(v != 0),
            SockOptName::Burst => SockOpt::Burst(sat(v)),
            SockOptName::NonBlocking | SockOptName::Error => unreachable!("answered locally above"),
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
