//! Data operations: copy and zero-copy send and receive, for streams and datagrams.

use std::net::SocketAddrV4;

use slimtcp::api::{Fd, Proto, SocketError, ZeroCopyTx};
use slimtcp_abi::{Request, RequestBody};

use super::buffers::{RxBuf, TxBuf, LARGE_TX};
use super::state::{Phase, SockEntry};
use super::{GuestSockets, TAG_QUIET_SEND};

/// Why a stream cannot send now, if it cannot.
fn stream_send_check(s: &SockEntry) -> Result<(), SocketError> {
    if let Some(e) = s.failure {
        return Err(e);
    }
    if s.wr_shut {
        return Err(SocketError::BrokenPipe);
    }
    match s.phase {
        Phase::Connected | Phase::Connecting => Ok(()),
        _ => Err(SocketError::NotConnected),
    }
}

/// What a stream read finds when its queue is empty.
fn stream_recv_empty(s: &SockEntry) -> Result<(), SocketError> {
    if s.eof || s.rd_shut {
        return Ok(());
    }
    if let Some(e) = s.failure {
        return Err(e);
    }
    match s.phase {
        Phase::Connected | Phase::Connecting => Err(SocketError::WouldBlock),
        _ => Err(SocketError::NotConnected),
    }
}

impl GuestSockets {
    /// Hands one filled buffer to the device as a zero-copy stream send (QUIET).
    fn submit_send(&mut self, fd: Fd, buf: TxBuf) -> Result<(), SocketError> {
        let s = self.entry_mut(fd)?;
        let sid = s.sid;
        let len = buf.len();
        s.in_flight += len;
        let cookie = (u64::from(fd.0) << 8) | TAG_QUIET_SEND;
        let req = Request::new(cookie, sid, RequestBody::Send { len: len as u32 }).quiet();
        self.submit(req, Some(buf))
    }

    /// A pool buffer, waiting for returned ones when the pool is exhausted (blocking) or
    /// failing with `EAGAIN`.
    fn alloc_waiting(&mut self, len: usize, nonblocking: bool) -> Result<TxBuf, SocketError> {
        let mut idle = 0u32;
        loop {
            if let Some(b) = self.pool.alloc(len) {
                return Ok(b);
            }
            if nonblocking {
                return Err(SocketError::WouldBlock);
            }
            if self.pump()? {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                self.idle(idle)?;
            }
        }
    }

    pub(super) fn do_send(&mut self, fd: Fd, data: &[u8]) -> Result<usize, SocketError> {
        if self.entry(fd)?.proto == Proto::Udp {
            let peer = self.entry(fd)?.peer.ok_or(SocketError::NotConnected)?;
            return self.do_send_to(fd, data, peer);
        }
        let mut pumped = false;
        loop {
            let s = self.entry(fd)?;
            stream_send_check(s)?;
            if data.is_empty() {
                return Ok(0);
            }
            let nonblocking = s.nonblocking;
            if s.phase == Phase::Connected && s.send_room() > 0 {
                let n = s.send_room().min(data.len());
                let mut sent = 0;
                for chunk in data[..n].chunks(LARGE_TX) {
                    let mut buf = match self.alloc_waiting(chunk.len(), nonblocking || sent > 0) {
                        Ok(b) => b,
                        Err(SocketError::WouldBlock) if sent > 0 => break,
                        Err(e) => return Err(e),
                    };
                    buf.space_mut()[..chunk.len()].copy_from_slice(chunk);
                    buf.set_len(chunk.len());
                    self.submit_send(fd, buf)?;
                    sent += chunk.len();
                }
                return Ok(sent);
            }
            if nonblocking {
                if !std::mem::replace(&mut pumped, true) && self.pump()? {
                    continue;
                }
                return Err(SocketError::WouldBlock);
            }
            self.wait_for(fd, |s| s.writable())?;
        }
    }

    pub(super) fn do_recv(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, SocketError> {
        if self.entry(fd)?.proto == Proto::Udp {
            return self.do_recv_from(fd, buf).map(|(n, _)| n);
        }
        let mut pumped = false;
        loop {
            let s = self.entry_mut(fd)?;
            if buf.is_empty() || s.rd_shut {
                return Ok(0);
            }
            if !s.rxq.is_empty() {
                let mut written = 0;
                while written < buf.len() {
                    let Some(front) = s.rxq.front_mut() else { break };
                    let n = front.len().min(buf.len() - written);
                    buf[written..written + n].copy_from_slice(&front.as_slice()[..n]);
                    written += n;
                    if n == front.len() {
                        s.rxq.pop_front();
                    } else {
                        front.consume(n);
                    }
                }
                return Ok(written);
            }
            match stream_recv_empty(s) {
                Ok(()) => return Ok(0),
                Err(SocketError::WouldBlock) if !s.nonblocking => {}
                Err(SocketError::WouldBlock) if !std::mem::replace(&mut pumped, true) => {
                    self.pump()?;
                    continue;
                }
                Err(e) => return Err(e),
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }

    pub(super) fn do_send_to(
        &mut self,
        fd: Fd,
        data: &[u8],
        dst: SocketAddrV4,
    ) -> Result<usize, SocketError> {
        let s = self.entry(fd)?;
        if s.proto == Proto::Tcp {
            return self.do_send(fd, data);
        }
        if data.len() > usize::from(self.info.max_datagram) {
            return Err(SocketError::MessageTooLong);
        }
        if dst.port() == 0 || dst.ip().is_unspecified() {
            return Err(SocketError::InvalidInput);
        }
        let nonblocking = s.nonblocking;
        let mut buf = self.alloc_waiting(data.len().max(1), nonblocking)?;
        buf.space_mut()[..data.len()].copy_from_slice(data);
        buf.set_len(data.len());
        self.submit_datagram(fd, dst, buf)?;
        Ok(data.len())
    }

    /// Sends one datagram (binding the socket to an ephemeral port first if needed).
    fn submit_datagram(&mut self, fd: Fd, dst: SocketAddrV4, buf: TxBuf) -> Result<(), SocketError> {
        if !self.entry(fd)?.bound {
            self.do_bind(fd, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0))?;
        }
        let sid = self.entry(fd)?.sid;
        let cookie = (u64::from(fd.0) << 8) | TAG_QUIET_SEND;
        let req =
            Request::new(cookie, sid, RequestBody::SendTo { remote: dst, len: buf.len() as u32 }).quiet();
        self.submit(req, Some(buf))
    }

    pub(super) fn do_recv_from(
        &mut self,
        fd: Fd,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddrV4), SocketError> {
        let mut pumped = false;
        loop {
            let s = self.entry_mut(fd)?;
            if s.proto == Proto::Tcp {
                let peer = s.peer.ok_or(SocketError::NotConnected)?;
                return self.do_recv(fd, buf).map(|n| (n, peer));
            }
            if let Some((from, dgram)) = s.datagrams.pop_front() {
                let n = dgram.len().min(buf.len());
                buf[..n].copy_from_slice(&dgram.as_slice()[..n]);
                return Ok((n, from));
            }
            if !s.bound {
                return Err(SocketError::NotConnected);
            }
            if s.nonblocking {
                if !std::mem::replace(&mut pumped, true) && self.pump()? {
                    continue;
                }
                return Err(SocketError::WouldBlock);
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }

    pub(super) fn do_alloc_tx(&mut self, len: usize) -> Result<TxBuf, SocketError> {
        if len == 0 || len > LARGE_TX {
            return Err(SocketError::InvalidInput);
        }
        self.pool.alloc(len).ok_or(SocketError::NoBuffers)
    }

    pub(super) fn do_send_zc(&mut self, fd: Fd, bufs: &mut Vec<TxBuf>) -> Result<usize, SocketError> {
        if self.entry(fd)?.proto == Proto::Udp {
            let peer = self.entry(fd)?.peer.ok_or(SocketError::NotConnected)?;
            let mut sent = 0;
            for buf in bufs.drain(..) {
                if buf.len() > usize::from(self.info.max_datagram) {
                    return Err(SocketError::MessageTooLong);
                }
                self.submit_datagram(fd, peer, buf)?;
                sent += 1;
            }
            return Ok(sent);
        }
        let mut pumped = false;
        loop {
            let s = self.entry(fd)?;
            stream_send_check(s)?;
            let Some(first) = bufs.first() else { return Ok(0) };
            if first.len() > s.sndbuf {
                return Err(SocketError::MessageTooLong);
            }
            if s.phase == Phase::Connected {
                let mut room = s.send_room();
                let fit = bufs
                    .iter()
                    .take_while(|b| {
                        let ok = b.len() <= room;
                        if ok {
                            room -= b.len();
                        }
                        ok
                    })
                    .count();
                if fit > 0 {
                    for buf in bufs.drain(..fit).collect::<Vec<_>>() {
                        if !buf.is_empty() {
                            self.submit_send(fd, buf)?;
                        }
                    }
                    return Ok(fit);
                }
            }
            if s.nonblocking {
                if !std::mem::replace(&mut pumped, true) && self.pump()? {
                    continue;
                }
                return Err(SocketError::WouldBlock);
            }
            let need = first.len();
            self.wait_for(fd, |s| {
                s.send_room() >= need
                    || s.failure.is_some()
                    || s.phase != Phase::Connecting && s.phase != Phase::Connected
            })?;
        }
    }

    pub(super) fn do_recv_zc(&mut self, fd: Fd) -> Result<Option<RxBuf>, SocketError> {
        let mut pumped = false;
        loop {
            let s = self.entry_mut(fd)?;
            if s.proto == Proto::Udp {
                if let Some((_, dgram)) = s.datagrams.pop_front() {
                    return Ok(Some(dgram));
                }
                if s.nonblocking {
                    if !std::mem::replace(&mut pumped, true) && self.pump()? {
                        continue;
                    }
                    return Err(SocketError::WouldBlock);
                }
            } else {
                if s.rd_shut {
                    return Ok(None);
                }
                if let Some(buf) = s.rxq.pop_front() {
                    return Ok(Some(buf));
                }
                match stream_recv_empty(s) {
                    Ok(()) => return Ok(None),
                    Err(SocketError::WouldBlock) if !s.nonblocking => {}
                    Err(e) => return Err(e),
                }
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }
}
