//! The queue pair's mechanics: putting requests on the transmit queue, posting receive
//! buffers, taking back used chains, returning receive credit, and idling.

use std::time::{Duration, Instant};

use slimtcp_abi::{Request, RequestBody, RxMessage};
use slimtcp_api::app::Event;
use slimtcp_api::{Fd, Proto, SocketError};

use super::buffers::{Release, RxBuf, TxBuf};
use super::link::{GuestLink, TxSlot};
use super::{HDR_SLOT, TAG_QUIET_CREDIT};
use crate::ring::Segment;

/// Empty pumps between two link probes (one `poll` syscall each).
const EMPTY_PUMPS_PER_PROBE: u32 = 1024;

/// A stream socket past its share of held chains sends with `COPY` while those chains carry
/// fewer bytes than this (a TCP window without scaling); with more it waits for them.
const COPY_PAST_SHARE_BELOW: usize = 64 * 1024;

/// A socket's consumed bytes go back as credit once they reach its receive window divided by
/// this: half of it. Each credit is a request the device takes, validates and executes alone;
/// with thousands of sockets of 16 KiB windows, credits at every quarter could cost a request
/// per 4 KiB read (4096 connections, guest receives: 37% more requests per byte than at half,
/// 10% less goodput). Half a window is the receiver's own rule for a window update (RFC 1122
/// 4.2.3.3; Linux's `tcp_cleanup_rbuf`): the sender keeps at least the other half to send into
/// meanwhile.
const CREDIT_BATCH_DIVISOR: usize = 2;

impl GuestLink {
    /// Posts the receive buffers waiting in `rx_to_post`.
    pub(super) fn post_rx(&mut self) -> Result<(), SocketError> {
        if self.rx_to_post.is_empty() {
            return Ok(());
        }
        while let Some(&slot) = self.rx_to_post.last() {
            let gpa = self.rx_area.gpa() + (usize::from(slot) * self.rx_size) as u64;
            let seg = Segment { gpa, len: self.rx_size as u32, writable: true };
            match self.qp.rx.ring.add(&[seg]) {
                Ok(head) => {
                    self.rx_slot_of_head[usize::from(head)] = slot;
                    self.rx_to_post.pop();
                }
                Err(_) => break,
            }
        }
        self.qp.rx.flush().map_err(|_| self.down())
    }

    /// Marks the backend gone.
    pub(super) fn down(&mut self) -> SocketError {
        if !self.dead {
            log::error!("slimtcp-guest: the backend is gone (queue pair {})", self.qp.index);
        }
        self.dead = true;
        SocketError::StackDown
    }

    /// Whether a request with `payload_segs` payload descriptors fits now. A request with a
    /// payload (a send) leaves [`ring_share`](Self::ring_share) requests' room free: calls,
    /// closes and credit never wait behind sends the device holds for peers that do not read.
    pub(super) fn tx_room(&self, payload_segs: usize) -> bool {
        let reserve = if payload_segs > 0 { self.ring_share() } else { 0 };
        self.tx_outstanding + reserve < self.max_requests
            && usize::from(self.qp.tx.ring.num_free()) > payload_segs + reserve
    }

    /// An eighth of the requests the queue takes (at least one): the room kept for requests
    /// without payload, and the most send chains one stream socket may have the device hold
    /// (a socket whose peer stopped reading holds its chains; many small sends would otherwise
    /// fill the ring and stop every other socket's sends).
    pub(super) fn ring_share(&self) -> usize {
        (self.max_requests / 8).max(1)
    }

    /// Whether a send of stream socket `fd` may go now as far as held chains are concerned.
    ///
    /// Against a 1.0/1.1 backend: only within the socket's share. With `COPY` sends (1.2,
    /// [`send_copied`](Self::send_copied) says which go copied):
    /// - within its share, while held send chains take less than half the queue's
    ///   descriptors ([`send_pressure`](Self::send_pressure)): zero copy;
    /// - past its share, a socket whose held chains carry less than [`COPY_PAST_SHARE_BELOW`]
    ///   goes on copied (a stream of small sends is not held to a few kilobytes in flight); a
    ///   bulk one waits for its chains (its share keeps plenty in flight), zero copy;
    /// - at the pressure mark, sends wait for chains to come back (a busy pair's do within
    ///   milliseconds) unless half the chains the mark allows are old
    ///   ([`HeldAges`](super::held_age::HeldAges): held for peers that do not read): then they
    ///   go copied, so such sockets never stop the others, however many.
    pub(super) fn can_hold_send(&self, fd: Fd) -> bool {
        let Some(s) = self.socks.get(&fd) else { return true };
        let within_share = s.chains_held < self.ring_share();
        if !self.copy_sends() {
            return within_share;
        }
        if !within_share {
            return s.bytes_held < COPY_PAST_SHARE_BELOW;
        }
        !self.send_pressure() || self.held_chains_stuck()
    }

    /// Whether the negotiated protocol has `COPY` sends (1.2).
    fn copy_sends(&self) -> bool {
        self.version.minor >= 2
    }

    /// Most send chains held before sends wait or go copied: those whose two descriptors take
    /// half the queue's.
    fn held_mark(&self) -> usize {
        (usize::from(self.qp.tx.ring.size()) / 4).max(1)
    }

    /// Whether the ages of `held` send chains can matter (they make half the mark or more):
    /// below it no send is held back by age, and the clock is not read.
    fn ages_matter(&self, held: usize) -> bool {
        2 * held >= self.held_mark()
    }

    /// Whether held send chains are at the mark.
    fn send_pressure(&self) -> bool {
        self.sends_held >= self.held_mark()
    }

    /// Whether old chains (see [`HeldAges`](super::held_age::HeldAges)) take half the mark, by
    /// the clock of the last pump.
    fn held_chains_stuck(&self) -> bool {
        2 * self.held_ages.old(self.sends_held, self.clock) >= self.held_mark()
    }

    /// Whether the next send of stream socket `fd`, which [`can_hold_send`](Self::can_hold_send)
    /// lets go, goes with `COPY` (the backend copies it and returns its chain at once): past
    /// the socket's share, or at the pressure mark.
    pub(super) fn send_copied(&self, fd: Fd) -> bool {
        let past_share = self.socks.get(&fd).is_some_and(|s| s.chains_held >= self.ring_share());
        self.copy_sends() && (past_share || self.send_pressure())
    }

    /// Puts a request (and its payload buffer) on the transmit queue; the caller checked
    /// [`tx_room`](Self::tx_room). `fd` names the socket a stream send counts against.
    pub(super) fn put(
        &mut self,
        req: Request,
        payload: Option<TxBuf>,
        fd: Option<Fd>,
    ) -> Result<(), SocketError> {
        let head = self.qp.tx.ring.next_head().ok_or(SocketError::NoBuffers)?;
        // Offset arithmetic only (the hot path takes no reference on the mapping).
        let offset = usize::from(head) * HDR_SLOT;
        if offset + HDR_SLOT > self.hdr_area.len() {
            return Err(SocketError::NoBuffers);
        }
        // SAFETY: the slot lies inside hdr_area (checked above), and the header slot of a free
        // head is ours until the chain is returned.
        let frame = unsafe { std::slice::from_raw_parts_mut(self.hdr_area.host().add(offset), HDR_SLOT) };
        let n = req.emit(frame).map_err(|_| SocketError::InvalidInput)?;
        let gpa = self.hdr_area.gpa() + offset as u64;
        let mut chain = [Segment { gpa, len: n as u32, writable: false }; 2];
        let mut slot = match (payload, req.body) {
            (Some(buf), RequestBody::Send { .. }) => {
                chain[1] = Segment { gpa: buf.gpa(), len: buf.len() as u32, writable: false };
                let by_acked = req.flags.is_copy();
                TxSlot::Send { fd: fd.unwrap_or(Fd(0)), bytes: buf.len(), by_acked, stamp: 0, _buf: buf }
            }
            (Some(buf), _) => {
                chain[1] = Segment { gpa: buf.gpa(), len: buf.len() as u32, writable: false };
                TxSlot::Datagram { _buf: buf }
            }
            (None, _) => TxSlot::Control,
        };
        let used = if matches!(slot, TxSlot::Control) { 1 } else { 2 };
        // A zero-length datagram has no payload descriptor.
        let used = if used == 2 && chain[1].len == 0 { 1 } else { used };
        let got = self.qp.tx.ring.add(&chain[..used]).map_err(|_| SocketError::NoBuffers)?;
        debug_assert_eq!(got, head);
        if let TxSlot::Send { fd, bytes, by_acked: false, stamp, .. } = &mut slot {
            // The clock is read once this chain makes half the mark: stamps below it may look
            // older, never younger, and are always fewer than half the mark.
            let now = self.ages_matter(self.sends_held + 1).then(Instant::now);
            if let Some(now) = now {
                self.clock = now;
            }
            *stamp = self.held_ages.stamp(now);
            self.sends_held += 1;
            if let Some(s) = self.socks.get_mut(fd) {
                s.chains_held += 1;
                s.bytes_held += *bytes;
            }
        }
        self.tx_slots[usize::from(head)] = slot;
        self.tx_outstanding += 1;
        self.qp.tx.flush().map_err(|_| self.down())
    }

    /// Lets the device progress: returned chains, received messages, released buffers.
    pub(super) fn pump_rings(&mut self, events: &mut Vec<Event<RxBuf>>) -> Result<bool, SocketError> {
        if self.dead {
            return Err(SocketError::StackDown);
        }
        if self.ages_matter(self.sends_held) {
            // Every send past half the mark read the clock too.
            self.clock = Instant::now();
        }
        let mut progressed = self.drain_releases()?;
        // Transmit chains back.
        loop {
            match self.qp.tx.ring.pop_used() {
                Ok(Some((head, _))) => {
                    progressed = true;
                    self.tx_outstanding = self.tx_outstanding.saturating_sub(1);
                    let slot = std::mem::replace(&mut self.tx_slots[usize::from(head)], TxSlot::Free);
                    // A COPY send's bytes are acknowledged by `acked` messages instead.
                    if let TxSlot::Send { fd, bytes, by_acked: false, stamp, .. } = slot {
                        self.sends_held = self.sends_held.saturating_sub(1);
                        self.held_ages.returned(stamp);
                        if let Some(s) = self.socks.get_mut(&fd) {
                            s.chains_held = s.chains_held.saturating_sub(1);
                            s.bytes_held = s.bytes_held.saturating_sub(bytes);
                        }
                        events.push(Event::SendDone { fd, bytes });
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::error!("slimtcp-guest: transmit queue: {e}");
                    return Err(self.down());
                }
            }
        }
        self.pay_owed_credits()?;
        // Messages.
        loop {
            let (head, len) = match self.qp.rx.ring.pop_used() {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    log::error!("slimtcp-guest: receive queue: {e}");
                    return Err(self.down());
                }
            };
            progressed = true;
            let slot = self.rx_slot_of_head[usize::from(head)];
            let len = (len as usize).min(self.rx_size);
            let offset = usize::from(slot) * self.rx_size;
            // SAFETY: the slot's buffer lies inside rx_area; the device returned it, so it no
            // longer writes it until we repost it.
            let frame = unsafe { std::slice::from_raw_parts(self.rx_area.host().add(offset), len) };
            let msg = match RxMessage::parse(frame) {
                Ok(m) if matches!(m, RxMessage::Complete { result: Err(_), .. }) && !self.qp.link.alive() => {
                    // A backend that replaced ours behind the same device answers our requests
                    // with errors (it never heard our hello): the application sees ENETDOWN.
                    return Err(self.down());
                }
                Ok(m) => m,
                Err(e) => {
                    if len > 0 {
                        log::warn!("slimtcp-guest: dropped an unparsable message ({e})");
                    }
                    self.rx_to_post.push(slot);
                    continue;
                }
            };
            let payload = msg.payload_range();
            // SAFETY: as above; the payload range lies within `len` (checked by parse).
            let ptr = unsafe { self.rx_area.host().add(offset + payload.start) };
            // A pushed connection ends the batch: the application side names it before its
            // first data is looked up.
            if self.on_message(msg, slot, ptr, payload.len(), events) {
                break;
            }
        }
        self.post_rx()?;
        if progressed {
            self.empty_pumps = 0;
        } else {
            // An application that only polls (non-blocking calls, epoll_wait with timeout 0)
            // never reaches `idle_step`: probe the link every so often here too.
            self.empty_pumps = self.empty_pumps.wrapping_add(1);
            if self.empty_pumps % EMPTY_PUMPS_PER_PROBE == 0 && !self.qp.link.alive() {
                return Err(self.down());
            }
        }
        Ok(progressed)
    }

    /// Reposts buffers the application dropped and returns their credit.
    fn drain_releases(&mut self) -> Result<bool, SocketError> {
        // Out of `self` while its releases are applied (they need `&mut self`), then put back.
        let mut released = std::mem::take(&mut self.released);
        self.releases.take(&mut released);
        let result = self.repost_and_credit(&released);
        let any = !released.is_empty();
        released.clear();
        self.released = released;
        result.map(|()| any)
    }

    /// Reposts the released buffers' slots and credits their sockets (a credit goes out once a
    /// socket's pending credit reaches half its receive buffer, [`CREDIT_BATCH_DIVISOR`]).
    fn repost_and_credit(&mut self, released: &[Release]) -> Result<(), SocketError> {
        for r in released {
            if let Some(slot) = r.slot {
                self.rx_to_post.push(slot);
                self.rx_held = self.rx_held.saturating_sub(1);
            }
            let Some(fd) = r.fd else { continue };
            let Some(s) = self.socks.get_mut(&fd) else { continue };
            s.credit_pending = s.credit_pending.saturating_add(r.bytes);
            let batch = (s.rcvbuf / CREDIT_BATCH_DIVISOR).clamp(1, u32::MAX as usize) as u32;
            if s.credit_pending >= batch {
                self.send_credit(fd)?;
            }
        }
        Ok(())
    }

    /// Returns a socket's pending credit (QUIET) if the transmit queue has room now; else
    /// the socket is owed it ([`pay_owed_credits`](Self::pay_owed_credits)).
    fn send_credit(&mut self, fd: Fd) -> Result<(), SocketError> {
        let room = self.tx_room(0);
        let Some(s) = self.socks.get_mut(&fd) else { return Ok(()) };
        if s.credit_pending == 0 || s.proto != Proto::Tcp {
            return Ok(());
        }
        if !room {
            if !s.credit_owed {
                s.credit_owed = true;
                self.credit_owed.push(fd);
            }
            return Ok(());
        }
        let req = Request::new(
            (u64::from(fd.0) << 8) | TAG_QUIET_CREDIT,
            s.sid,
            RequestBody::Credit { bytes: s.credit_pending },
        )
        .quiet();
        if let Some(s) = self.socks.get_mut(&fd) {
            s.credit_pending = 0;
        }
        self.put(req, None, None)
    }

    /// Sends the credit that was due while the transmit queue was full, as far as it has room
    /// now (oldest first).
    fn pay_owed_credits(&mut self) -> Result<(), SocketError> {
        let mut paid = 0;
        while paid < self.credit_owed.len() && self.tx_room(0) {
            let fd = self.credit_owed[paid];
            paid += 1;
            if let Some(s) = self.socks.get_mut(&fd) {
                s.credit_owed = false;
            }
            self.send_credit(fd)?;
        }
        self.credit_owed.drain(..paid);
        Ok(())
    }

    /// Returns every pending credit (before sleeping: a peer may be waiting for window).
    fn flush_credits(&mut self) -> Result<(), SocketError> {
        let fds: Vec<Fd> =
            self.socks.iter().filter(|(_, s)| s.credit_pending > 0).map(|(fd, _)| *fd).collect();
        for fd in fds {
            self.send_credit(fd)?;
        }
        Ok(())
    }

    /// Before a sleep the caller does itself on [`wait_fd`](Self::wait_fd) beside its own
    /// descriptors: returns pending credit, checks the link and arms the interrupts. False when
    /// the rings already have news (do not sleep, pump); after a sleep, call
    /// [`sleep_end`](Self::sleep_end).
    pub(super) fn sleep_begin(&mut self) -> Result<bool, SocketError> {
        self.flush_credits()?;
        if !self.qp.link.alive() {
            return Err(self.down());
        }
        let pending = self.qp.rx.ring.arm_interrupt() | self.qp.tx.ring.arm_interrupt();
        if pending {
            self.sleep_end();
            return Ok(false);
        }
        if let Some(call) = &self.qp.rx.call {
            if let Err(e) = call.prepare() {
                log::debug!("queue pair {}: interrupt not prepared: {e}", self.qp.index);
            }
        }
        Ok(true)
    }

    /// After a sleep begun with [`sleep_begin`](Self::sleep_begin): clears the interrupt and
    /// disarms.
    pub(super) fn sleep_end(&mut self) {
        if let Some(call) = &self.qp.rx.call {
            call.acknowledge();
        }
        self.qp.rx.ring.disarm_interrupt();
        self.qp.tx.ring.disarm_interrupt();
    }

    /// The descriptor the receive interrupt makes readable, when the transport has one.
    pub(super) fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.qp.rx.call.as_ref().and_then(|c| c.wait_fd())
    }

    /// One idle step of a wait: spin, then yield, then sleep on the receive interrupt.
    pub(super) fn idle_step(&mut self, idle: u32) -> Result<(), SocketError> {
        if idle < 256 {
            std::hint::spin_loop();
            return Ok(());
        }
        if idle == 256 {
            self.flush_credits()?;
        }
        self.idle_checks = self.idle_checks.wrapping_add(1);
        if idle < 4096 {
            if self.idle_checks % 512 == 0 && !self.qp.link.alive() {
                return Err(self.down());
            }
            std::thread::yield_now();
            return Ok(());
        }
        if !self.qp.link.alive() {
            return Err(self.down());
        }
        let pending = self.qp.rx.ring.arm_interrupt() | self.qp.tx.ring.arm_interrupt();
        if !pending {
            match &self.qp.rx.call {
                Some(call) => {
                    let _ = call.wait(Duration::from_millis(1));
                }
                None => std::thread::sleep(Duration::from_micros(50)),
            }
        }
        self.qp.rx.ring.disarm_interrupt();
        self.qp.tx.ring.disarm_interrupt();
        Ok(())
    }
}
