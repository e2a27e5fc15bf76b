//! Data operations: copy and zero-copy send and receive, for streams and datagrams.

use std::net::SocketAddrV4;

use super::state::{Phase, SockEntry};
use super::{AppSockets, Link, Request, RxPayload};
use crate::spares::take_emptied;
use crate::{Fd, Proto, SocketError, ZeroCopyTx};

/// Why a stream cannot send now, if it cannot.
fn stream_send_check<R>(s: &SockEntry<R>) -> Result<(), SocketError> {
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
fn stream_recv_empty<R>(s: &SockEntry<R>) -> Result<(), SocketError> {
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

/// What became of a buffer handed to the link: taken, or given back because the link's request
/// ring had no room and the caller does not wait (`EAGAIN` for a non-blocking socket).
enum Submit<B> {
    Taken,
    NoRoom(B),
}

impl<L: Link> AppSockets<L> {
    /// Hands one filled buffer to the link as a stream send, counting it against the credit;
    /// `wait` as for [`submit`](Self::submit).
    fn submit_send(&mut self, fd: Fd, buf: L::TxBuf, wait: bool) -> Result<Submit<L::TxBuf>, SocketError> {
        let len = buf.filled().len();
        // Charged before the request goes: its acknowledgement may come back in the same pump.
        self.charge_send(fd, len)?;
        let submitted = self.submit(fd, Request::Send { fd, buf }, wait);
        if let Ok(Submit::NoRoom(_)) = submitted {
            self.release_send(fd, len);
        }
        submitted
    }

    /// Sends one datagram, binding the socket to an ephemeral port first if needed; `wait` as
    /// for [`submit`](Self::submit).
    fn submit_datagram(
        &mut self,
        fd: Fd,
        dst: SocketAddrV4,
        buf: L::TxBuf,
        wait: bool,
    ) -> Result<Submit<L::TxBuf>, SocketError> {
        self.ensure_bound(fd)?;
        self.submit(fd, Request::SendTo { fd, dst, buf }, wait)
    }

    /// Hands a send request of `fd` to the link. Waits for room in the link's ring when
    /// `wait`; otherwise, when the ring stays full, gives the buffer back, and the socket is not
    /// writable until the link moves.
    fn submit(
        &mut self,
        fd: Fd,
        req: Request<L::TxBuf>,
        wait: bool,
    ) -> Result<Submit<L::TxBuf>, SocketError> {
        if wait {
            return self.request(req).map(|_| Submit::Taken);
        }
        match self.request_now(req) {
            Ok(answer) => answer.map(|_| Submit::Taken),
            Err(back) => {
                self.wait_for_room(fd);
                match back {
                    Request::Send { buf, .. } | Request::SendTo { buf, .. } => Ok(Submit::NoRoom(buf)),
                    // Only sends come here.
                    _ => Err(SocketError::WouldBlock),
                }
            }
        }
    }

    /// A transmit buffer, waiting for returned ones while the pool is exhausted (blocking) or
    /// failing with `EAGAIN`.
    fn alloc_waiting(&mut self, len: usize, nonblocking: bool) -> Result<L::TxBuf, SocketError> {
        let mut idle = 0u32;
        loop {
            if let Some(b) = self.link.alloc(len) {
                return Ok(b);
            }
            if nonblocking {
                return Err(SocketError::WouldBlock);
            }
            let progressed = self.pump()?;
            self.idle_step(progressed, &mut idle)?;
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
            let connected = s.phase == Phase::Connected;
            let room = s.send_room_within(&self.budget);
            if connected && room < s.send_room().min(data.len()) {
                // The budget gives less than the socket would take: it waits for more.
                self.wait_for_budget(fd);
            }
            if connected && room > 0 {
                let n = room.min(data.len());
                let mut sent = 0;
                for chunk in data[..n].chunks(self.limits.max_tx_len) {
                    let mut buf = match self.alloc_waiting(chunk.len(), nonblocking || sent > 0) {
                        Ok(b) => b,
                        Err(SocketError::WouldBlock) if sent > 0 => break,
                        Err(e) => return Err(e),
                    };
                    buf.space_mut()[..chunk.len()].copy_from_slice(chunk);
                    buf.set_len(chunk.len());
                    match self.submit_send(fd, buf, !(nonblocking || sent > 0))? {
                        Submit::Taken => sent += chunk.len(),
                        Submit::NoRoom(buf) => {
                            self.link.recycle(buf);
                            if sent > 0 {
                                break;
                            }
                            return Err(SocketError::WouldBlock);
                        }
                    }
                }
                return Ok(sent);
            }
            if nonblocking {
                self.pump_once(&mut pumped)?;
                continue;
            }
            self.wait_until_writable(fd)?;
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
                    let bytes = front.as_ref();
                    let n = bytes.len().min(buf.len() - written);
                    buf[written..written + n].copy_from_slice(&bytes[..n]);
                    written += n;
                    if n == bytes.len() {
                        s.rxq.pop_front();
                    } else {
                        front.consume(n);
                    }
                }
                if let Some(storage) = take_emptied(&mut s.rxq) {
                    self.rxq_spares.give(storage);
                }
                return Ok(written);
            }
            match stream_recv_empty(s) {
                Ok(()) => return Ok(0),
                Err(SocketError::WouldBlock) if !s.nonblocking => {}
                Err(SocketError::WouldBlock) => {
                    self.pump_once(&mut pumped)?;
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
        if data.len() > self.limits.max_datagram {
            return Err(SocketError::MessageTooLong);
        }
        if dst.port() == 0 || dst.ip().is_unspecified() {
            return Err(SocketError::InvalidInput);
        }
        let nonblocking = s.nonblocking;
        self.ensure_bound(fd)?;
        let mut buf = self.alloc_waiting(data.len().max(1), nonblocking)?;
        buf.space_mut()[..data.len()].copy_from_slice(data);
        buf.set_len(data.len());
        match self.submit_datagram(fd, dst, buf, !nonblocking)? {
            Submit::Taken => Ok(data.len()),
            Submit::NoRoom(buf) => {
                self.link.recycle(buf);
                Err(SocketError::WouldBlock)
            }
        }
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
                let bytes = dgram.as_ref();
                let n = bytes.len().min(buf.len());
                buf[..n].copy_from_slice(&bytes[..n]);
                return Ok((n, from));
            }
            if !s.bound {
                return Err(SocketError::NotConnected);
            }
            if s.nonblocking {
                self.pump_once(&mut pumped)?;
                continue;
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }

    pub(super) fn do_alloc_tx(&mut self, len: usize) -> Result<L::TxBuf, SocketError> {
        if len == 0 || len > self.limits.max_tx_len {
            return Err(SocketError::InvalidInput);
        }
        if self.link.tx_outstanding() >= self.limits.max_tx_buffers {
            return Err(SocketError::NoBuffers);
        }
        self.link.alloc(len).ok_or(SocketError::NoBuffers)
    }

    pub(super) fn do_send_zc(&mut self, fd: Fd, bufs: &mut Vec<L::TxBuf>) -> Result<usize, SocketError> {
        if self.entry(fd)?.proto == Proto::Udp {
            let s = self.entry(fd)?;
            let (peer, nonblocking) = (s.peer.ok_or(SocketError::NotConnected)?, s.nonblocking);
            let mut sent = 0;
            let mut pending = std::mem::take(bufs).into_iter();
            while let Some(buf) = pending.next() {
                if buf.filled().len() > self.limits.max_datagram {
                    self.link.recycle(buf);
                    return Err(SocketError::MessageTooLong);
                }
                if let Submit::NoRoom(buf) = self.submit_datagram(fd, peer, buf, !nonblocking)? {
                    // The caller keeps what did not go.
                    bufs.push(buf);
                    bufs.extend(pending);
                    return if sent > 0 { Ok(sent) } else { Err(SocketError::WouldBlock) };
                }
                sent += 1;
            }
            return Ok(sent);
        }
        let mut pumped = false;
        loop {
            let s = self.entry(fd)?;
            stream_send_check(s)?;
            let Some(first) = bufs.first() else { return Ok(0) };
            let need = first.filled().len();
            if need > s.sndbuf {
                return Err(SocketError::MessageTooLong);
            }
            if s.phase == Phase::Connected && s.send_room() >= need && s.send_room_within(&self.budget) < need
            {
                // Its buffer fits in its own room, not in what the budget gives: it waits.
                self.wait_for_budget(fd);
            }
            let s = self.entry(fd)?;
            if s.phase == Phase::Connected {
                let mut room = s.send_room_within(&self.budget);
                let fit = bufs
                    .iter()
                    .take_while(|b| {
                        let len = b.filled().len();
                        let ok = len <= room;
                        if ok {
                            room -= len;
                        }
                        ok
                    })
                    .count();
                if fit > 0 {
                    let nonblocking = s.nonblocking;
                    let mut going = bufs.drain(..fit).collect::<Vec<_>>().into_iter();
                    let mut taken = 0;
                    while let Some(buf) = going.next() {
                        if buf.filled().is_empty() {
                            self.link.recycle(buf);
                        } else if let Submit::NoRoom(buf) = self.submit_send(fd, buf, !nonblocking)? {
                            // The caller keeps what did not go, in order, before the rest.
                            let back: Vec<_> = std::iter::once(buf).chain(going).collect();
                            bufs.splice(0..0, back);
                            return if taken > 0 { Ok(taken) } else { Err(SocketError::WouldBlock) };
                        }
                        taken += 1;
                    }
                    return Ok(fit);
                }
            }
            if s.nonblocking {
                self.pump_once(&mut pumped)?;
                continue;
            }
            self.wait_until(None, |app| {
                app.sockets.get(&fd).is_none_or(|s| {
                    s.send_room_within(&app.budget) >= need
                        || s.failure.is_some()
                        || s.phase != Phase::Connecting && s.phase != Phase::Connected
                })
            })?;
        }
    }

    pub(super) fn do_recv_zc(&mut self, fd: Fd) -> Result<Option<L::RxBuf>, SocketError> {
        let mut pumped = false;
        loop {
            let s = self.entry_mut(fd)?;
            if s.proto == Proto::Udp {
                if let Some((_, dgram)) = s.datagrams.pop_front() {
                    return Ok(Some(dgram));
                }
                if s.nonblocking {
                    self.pump_once(&mut pumped)?;
                    continue;
                }
            } else {
                if s.rd_shut {
                    return Ok(None);
                }
                if let Some(buf) = s.rxq.pop_front() {
                    if let Some(storage) = take_emptied(&mut s.rxq) {
                        self.rxq_spares.give(storage);
                    }
                    return Ok(Some(buf));
                }
                match stream_recv_empty(s) {
                    Ok(()) => return Ok(None),
                    Err(SocketError::WouldBlock) if !s.nonblocking => {}
                    Err(SocketError::WouldBlock) => {
                        self.pump_once(&mut pumped)?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            self.wait_for(fd, |s| s.readable())?;
        }
    }
}
