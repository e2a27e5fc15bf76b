//! Data operations: copy and zero-copy send and receive, for streams and datagrams.

use std::net::SocketAddrV4;

use super::buffers::{RxBuf, TxBuf, LARGE_TX};
use super::messages::Request;
use super::state::{Phase, SockEntry};
use super::HostSockets;
use crate::api::{Fd, Proto, SocketError, ZeroCopyTx};

/// Largest UDP payload in one Ethernet frame of 1500 bytes.
const MAX_DATAGRAM: usize = 1472;

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

impl HostSockets {
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
            if s.phase == Phase::Connected && s.credit > 0 {
                let n = s.credit.min(data.len());
                for chunk in data[..n].chunks(LARGE_TX) {
                    let mut buf = self.pool.alloc(chunk.len()).ok_or(SocketError::NoBuffers)?;
                    buf.space_mut()[..chunk.len()].copy_from_slice(chunk);
                    self.submit(Request::Send { fd, buf })?;
                }
                self.entry_mut(fd)?.credit -= n;
                return Ok(n);
            }
            if s.nonblocking {
                // Non-blocking: look at what the worker reported meanwhile, once.
                if pumped {
                    return Err(SocketError::WouldBlock);
                }
                pumped = true;
                self.pump()?;
                continue;
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
                Err(SocketError::WouldBlock) if !pumped => {
                    pumped = true;
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
        if data.len() > MAX_DATAGRAM {
            return Err(SocketError::MessageTooLong);
        }
        if dst.port() == 0 || dst.ip().is_unspecified() {
            return Err(SocketError::InvalidInput);
        }
        if s.phase == Phase::Fresh {
            self.udp_bind(fd, 0)?;
        }
        let mut buf = self.pool.alloc(data.len()).ok_or(SocketError::NoBuffers)?;
        buf.space_mut()[..data.len()].copy_from_slice(data);
        self.submit(Request::UdpSend { fd, dst, buf })?;
        Ok(data.len())
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
            if s.phase == Phase::Fresh {
                return Err(SocketError::NotConnected);
            }
            if s.nonblocking {
                if pumped {
                    return Err(SocketError::WouldBlock);
                }
                pumped = true;
                self.pump()?;
                continue;
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }

    pub(super) fn do_alloc_tx(&mut self, len: usize) -> Result<TxBuf, SocketError> {
        if len == 0 || len > LARGE_TX {
            return Err(SocketError::InvalidInput);
        }
        if self.pool.outstanding() >= super::MAX_TX_BUFFERS {
            return Err(SocketError::NoBuffers);
        }
        self.pool.alloc(len).ok_or(SocketError::NoBuffers)
    }

    pub(super) fn do_send_zc(&mut self, fd: Fd, bufs: &mut Vec<TxBuf>) -> Result<usize, SocketError> {
        if self.entry(fd)?.proto == Proto::Udp {
            let peer = self.entry(fd)?.peer.ok_or(SocketError::NotConnected)?;
            let mut sent = 0;
            for buf in bufs.drain(..) {
                if buf.len() > MAX_DATAGRAM {
                    self.pool.recycle(buf);
                    return Err(SocketError::MessageTooLong);
                }
                self.submit(Request::UdpSend { fd, dst: peer, buf })?;
                sent += 1;
            }
            return Ok(sent);
        }
        let mut pumped = false;
        loop {
            let s = self.entry(fd)?;
            stream_send_check(s)?;
            let Some(first) = bufs.first() else { return Ok(0) };
            if first.len() > s.config.tx_buffer {
                return Err(SocketError::MessageTooLong);
            }
            if s.phase == Phase::Connected {
                let mut credit = s.credit;
                let fit = bufs
                    .iter()
                    .take_while(|b| {
                        let ok = b.len() <= credit;
                        if ok {
                            credit -= b.len();
                        }
                        ok
                    })
                    .count();
                if fit > 0 {
                    self.entry_mut(fd)?.credit = credit;
                    for buf in bufs.drain(..fit) {
                        if buf.is_empty() {
                            self.pool.recycle(buf);
                        } else {
                            self.submit(Request::Send { fd, buf })?;
                        }
                    }
                    return Ok(fit);
                }
            }
            if s.nonblocking {
                if pumped {
                    return Err(SocketError::WouldBlock);
                }
                pumped = true;
                self.pump()?;
                continue;
            }
            let need = first.len();
            self.wait_for(fd, |s| {
                s.credit >= need
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
                    if pumped {
                        return Err(SocketError::WouldBlock);
                    }
                    pumped = true;
                    self.pump()?;
                    continue;
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
                    Err(SocketError::WouldBlock) if !pumped => {
                        pumped = true;
                        self.pump()?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }
}
