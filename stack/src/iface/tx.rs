//! The transmit path: building frames (template fast path for connections, general emitters for
//! SYNs, RSTs, UDP, ICMP, ARP), dispatching connections, timers, ARP resolution, and bursts.

use std::net::Ipv4Addr;

use super::counters::DropReason;
use super::socket_set::{FourTuple, SocketHandle};
use super::template::HeaderTemplate;
use super::tx_backlog::TxBacklog;
use super::tx_external::ExternalTx;
use super::{Interface, TX_BACKLOG_BURSTS};
use crate::iface::arp_cache::Resolution;
use crate::nic::{ExternalFrame, ExternalPayload, L4Proto, Nic, NicError, PacketBuf, TxOffload};
use crate::tcp::{emit_each, ConnError, LoanedSlice, Payload, SegmentRun, SegmentSink, SinkFull, State};
use crate::time::Instant;
use crate::wire::{
    ArpOperation, ArpPacket, ArpRepr, ChecksumCapabilities, EtherType, EthernetAddress, EthernetFrame,
    EthernetRepr, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr,
};

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const TTL: u8 = 64;

/// The shortest payload (TCP segment or UDP datagram) sent by reference
/// (`Nic::transmit_external`) when the NIC can; a shorter one is copied behind its headers. A reference costs a registration, a completion to
/// collect and, on DPDK, an mbuf attached to the memory; copying 256 bytes is a few vector moves
/// (and over memwire the reference path copies anyway). Linux's `MSG_ZEROCOPY` makes the same
/// trade for small sends.
pub const EXTERNAL_MIN_PAYLOAD: usize = 256;

/// Writes Ethernet + IPv4 headers for an L4 payload of `l4_len` bytes into the front of `frame`.
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_eth_ipv4(
    frame: &mut [u8],
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    l4_len: usize,
    caps: &ChecksumCapabilities,
) {
    let eth = EthernetRepr { src_addr: src_mac, dst_addr: dst_mac, ethertype: EtherType::Ipv4 };
    eth.emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
    let ip = Ipv4Repr { src_addr: src, dst_addr: dst, protocol, payload_len: l4_len, ttl: TTL };
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut frame[ETH_LEN..]), caps);
}

/// A TCP frame through the general emitters (segments with options, or without a template).
#[allow(clippy::too_many_arguments)]
fn build_tcp_frame(
    buf: &mut PacketBuf,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    tuple: FourTuple,
    repr: &TcpRepr,
    payload: &mut Payload<'_>,
    caps: &ChecksumCapabilities,
) -> Result<(), SinkFull> {
    let tcp_len = repr.header_len() + payload.len();
    let frame = buf.append(ETH_LEN + IP_LEN + tcp_len).ok_or(SinkFull)?;
    emit_eth_ipv4(
        frame,
        src_mac,
        dst_mac,
        *tuple.local.ip(),
        *tuple.remote.ip(),
        IpProtocol::Tcp,
        tcp_len,
        caps,
    );
    let tcp = &mut frame[ETH_LEN + IP_LEN..];
    payload.copy_to(&mut tcp[repr.header_len()..]);

    repr.emit(
        &mut TcpPacket::new_unchecked(&mut tcp[..]),
        *tuple.local.ip(),
        *tuple.remote.ip(),
        payload.len(),
        caps,
    );
    buf.offload = TxOffload::ipv4(L4Proto::Tcp, caps);
    Ok(())
}

/// The segment sink of one connection during dispatch: frames go onto the interface's transmit
/// queue, which is flushed to the NIC whenever a burst is full.
struct FrameSink<'a, N: Nic> {
    nic: &'a mut N,
    tx_queue: &'a mut TxBacklog<PacketBuf>,
    /// Frames with by-reference payloads (when the NIC can send them).
    ext: &'a mut ExternalTx,
    /// Whether the NIC sends external payloads.
    external: bool,
    handle: SocketHandle,
    counters: &'a mut super::Counters,
    template: &'a HeaderTemplate,
    src_mac: EthernetAddress,
    tuple: FourTuple,
    caps: ChecksumCapabilities,
    burst: usize,
    now: Instant,
    /// The device fell behind: the connection must be dispatched again once it drains.
    blocked: bool,
    /// The NIC refused frames earlier in this poll (its ring is full): not asked again until
    /// the poll's final flush; the connections after the first to find it full wait at once.
    ring_full: &'a mut bool,
    /// The buffer of the next frame, taken (and its lines asked for) one frame ahead.
    ahead: &'a mut Option<PacketBuf>,
}

impl<N: Nic> FrameSink<'_, N> {
    /// The queues' lengths for a frame of one kind: (its own kind's, the other kind's).
    #[inline]
    fn queue_lens(&self, external: bool) -> (usize, usize) {
        if external {
            (self.ext.queue.len(), self.tx_queue.len())
        } else {
            (self.tx_queue.len(), self.ext.queue.len())
        }
    }

    /// Frames leave in the order they were built: before queueing a frame of the other kind
    /// (plain / external payload), the other queue must drain; a queue is offered to the NIC
    /// each time it has grown by a whole burst (`burst_due`).
    #[inline]
    fn make_room(&mut self, external: bool) -> Result<(), SinkFull> {
        // Most frames: nothing of the other kind waits, no burst is due and the backlog has
        // room, so there is nothing to do (inline, without the flushes' register saves).
        let (own, other) = self.queue_lens(external);
        if other == 0 && !burst_due(own, self.burst) && own < self.burst * TX_BACKLOG_BURSTS {
            return Ok(());
        }
        self.make_room_flushing(external)
    }

    /// [`make_room`](Self::make_room) when a queue may be offered to the NIC or is full.
    #[inline(never)]
    fn make_room_flushing(&mut self, external: bool) -> Result<(), SinkFull> {
        let (now, burst) = (self.now, self.burst);
        let flush_ext = |s: &mut Self| {
            s.ext.flush(s.nic, s.counters, now).map_err(|_| SinkFull)?;
            *s.ring_full |= !s.ext.queue.is_empty();
            Ok(())
        };
        let flush_plain = |s: &mut Self| {
            flush(s.nic, s.tx_queue, s.counters, now).map_err(|_| SinkFull)?;
            *s.ring_full |= !s.tx_queue.is_empty();
            Ok(())
        };
        // After the NIC refused frames in this poll nothing is offered: the queues only grow
        // to the backlog.
        if !*self.ring_full {
            if external {
                if !self.tx_queue.is_empty() {
                    flush_plain(self)?;
                }
                if burst_due(self.ext.queue.len(), burst) {
                    flush_ext(self)?;
                }
            } else {
                if !self.ext.queue.is_empty() {
                    flush_ext(self)?;
                }
                if burst_due(self.tx_queue.len(), burst) {
                    flush_plain(self)?;
                }
            }
        }
        let (own, other) = self.queue_lens(external);
        if other > 0 || own >= burst * TX_BACKLOG_BURSTS {
            self.blocked = true;
            return Err(SinkFull);
        }
        Ok(())
    }

    /// Queues a segment whose payload the NIC sends from the loaned buffer itself (`slice`, the
    /// payload's piece of a by-reference loan). The caller records the transmission on the loan
    /// once this succeeded ([`Payload::lent`], or a run's at once).
    fn emit_external(&mut self, repr: &TcpRepr, slice: &LoanedSlice) -> Result<(), SinkFull> {
        self.make_room(true)?;
        let Ok(mut headers) = self.nic.alloc_tx() else {
            self.blocked = true;
            return Err(SinkFull);
        };
        self.template
            .write_headers(&mut headers, repr, slice.len, slice.sum, &self.caps)
            .map_err(|_| SinkFull)?;
        let token = self.ext.register(self.handle, slice.loan, slice.at);
        // SAFETY: the bytes belong to a loan that declared them sendable by reference: they stay
        // mapped while the stack holds the loan. The caller records this transmission on the
        // loan (`Payload::lent`, or `SegmentRun::lent` after the run) before the dispatch
        // returns, so before any acknowledgement or completion is processed; from then on the
        // stack holds the loan until this transmission's token is reported complete by the NIC.
        let external = unsafe { ExternalPayload::at(slice.addr, slice.len, token) };
        self.ext.queue.push(ExternalFrame { headers, payload: external });
        self.counters.tcp_segs_out += 1;
        Ok(())
    }
}

impl<N: Nic> SegmentSink for FrameSink<'_, N> {
    fn emit(&mut self, repr: &TcpRepr, mut payload: Payload<'_>) -> Result<(), SinkFull> {
        let plain_header = plain_header(repr);
        if self.external
            && plain_header
            && payload.len() >= EXTERNAL_MIN_PAYLOAD
            && payload.from_by_reference_loans()
        {
            // One look at the send buffer: the piece by reference (with its sum when the NIC
            // does not fill the checksum), or copied data. (Without a by-reference loan queued,
            // not even the look: copied data is the common case.)
            if let Some(slice) = payload.by_reference(!self.caps.tcp.tx) {
                self.emit_external(repr, &slice)?;
                payload.lent(&slice);
                return Ok(());
            }
        }
        self.emit_copied(repr, payload, plain_header)
    }

    fn emit_run(&mut self, first: &TcpRepr, run: &mut SegmentRun<'_>) -> usize {
        if !plain_header(first) {
            return emit_each(self, first, run);
        }
        if !run.from_by_reference_loans() || run.segment_len() < EXTERNAL_MIN_PAYLOAD {
            // Every segment copied behind the template's headers, as `emit` would build it,
            // without asking again per segment what the run already says (segments of a
            // by-reference loan too short to be sent by reference are copied as well).
            return run.emit_with(first, |repr, payload| self.emit_copied(repr, payload, true));
        }
        // Inside one by-reference loan, where the NIC fills the checksum (no sum to take per
        // segment): the loan's piece found once, each segment long enough sent as its part, as
        // `emit` would send it.
        let whole = if self.external && self.caps.tcp.tx { run.by_reference() } else { None };
        let Some(whole) = whole else { return emit_each(self, first, run) };
        // The transmissions queued by reference, recorded on the loan at once after the run.
        let mut lent = 0u32;
        let taken = run.emit_with(first, |repr, mut payload| {
            if payload.len() >= EXTERNAL_MIN_PAYLOAD {
                let at = repr.seq_number.since(first.seq_number);
                if let Some(slice) = whole.piece(at, payload.len()) {
                    debug_assert_eq!(
                        payload.by_reference(false),
                        Some(slice),
                        "the segment's piece of the loan"
                    );
                    self.emit_external(repr, &slice)?;
                    lent += 1;
                    return Ok(());
                }
            }
            self.emit_copied(repr, payload, true)
        });
        run.lent(&whole, lent);
        taken
    }
}

impl<N: Nic> FrameSink<'_, N> {
    /// Queues a segment whose payload is copied into its frame (`plain_header`: the template's
    /// headers fit it, no TCP option).
    #[inline(always)]
    fn emit_copied(
        &mut self,
        repr: &TcpRepr,
        mut payload: Payload<'_>,
        plain_header: bool,
    ) -> Result<(), SinkFull> {
        self.make_room(false)?;
        let mut buf = match self.ahead.take() {
            Some(buf) => buf,
            None => {
                let Ok(buf) = self.nic.alloc_tx() else {
                    self.blocked = true;
                    return Err(SinkFull);
                };
                buf
            }
        };
        self.counters.tx_payload_copied_bytes += payload.len() as u64;
        if !plain_header {
            build_tcp_frame(
                &mut buf,
                self.src_mac,
                self.template.dst_mac(),
                self.tuple,
                repr,
                &mut payload,
                &self.caps,
            )?;
        } else {
            self.template.write(&mut buf, repr, &mut payload, &self.caps).map_err(|_| SinkFull)?;
        }
        if self.external && payload.len() < EXTERNAL_MIN_PAYLOAD && payload.from_by_reference_loans() {
            self.counters.tx_short_payload_copied_bytes += payload.len() as u64;
        }
        self.counters.tcp_segs_out += 1;
        if repr.flags.contains(crate::wire::TcpFlags::RST) {
            self.counters.tcp_resets_sent += 1;
        }
        let frame_len = buf.len();
        self.tx_queue.push(buf);
        // The next frame's buffer, taken now and asked for as long as this frame: its lines
        // arrive while the next segment is prepared, instead of at the copy's stores.
        if let Ok(next) = self.nic.alloc_tx() {
            next.prefetch_tail(frame_len);
            *self.ahead = Some(next);
        }
        Ok(())
    }
}

/// Whether the template's headers fit a segment: segments with options (SYNs, ACKs with SACK
/// blocks) take the general emitter.
fn plain_header(repr: &TcpRepr) -> bool {
    repr.max_seg_size.is_none() && repr.window_scale.is_none() && repr.sack.is_none()
}

/// Whether a transmit queue of `queued` frames is offered to the NIC now: once per whole burst.
/// A NIC whose ring is full takes nothing; asking again at every further frame (a DPDK
/// `tx_burst` call, a lock on memwire) costs as much as building the frame, so the queue grows
/// by another burst (up to the backlog, then the connection waits) before the next offer.
fn burst_due(queued: usize, burst: usize) -> bool {
    queued >= burst && queued % burst == 0
}

/// Hands queued frames to the NIC; returns how many it took.
fn flush<N: Nic>(
    nic: &mut N,
    tx_queue: &mut TxBacklog<PacketBuf>,
    counters: &mut super::Counters,
    now: Instant,
) -> Result<usize, NicError> {
    let (taken, result) = tx_queue.offer(|frames| nic.transmit(now, frames));
    counters.tx_frames += taken.frames as u64;
    counters.tx_bytes += taken.bytes;
    result.map(|()| taken.frames)
}

impl<N: Nic> Interface<N> {
    /// Transmits everything queued (as far as the device takes it).
    pub(super) fn flush_tx(&mut self, now: Instant) -> Result<usize, NicError> {
        // The next poll's connections offer the NIC their frames afresh.
        self.tx_ring_full = false;
        Ok(self.ext.flush(&mut self.nic, &mut self.counters, now)?
            + flush(&mut self.nic, &mut self.tx_queue, &mut self.counters, now)?)
    }

    /// Once the transmit backlog has drained to half, the connections it held back go on,
    /// oldest first, one at a time until one is held again. (Resuming them all at once had each
    /// of thousands of connections find the backlog full again after the first few: a look at
    /// state in no cache, per connection, for every burst the NIC took.)
    pub(super) fn resume_held(&mut self, now: Instant) {
        if self.tx_queue.len() + self.ext.queue.len() >= self.cfg.burst * TX_BACKLOG_BURSTS / 2 {
            return;
        }
        while let Some(h) = self.tx_blocked.pop_front() {
            let Some(sock) = self.sockets.tcp_mut(h) else { continue };
            sock.tx_held = false;
            // A connection on the dispatch list runs at the next poll anyway.
            if !sock.queued && self.dispatch_socket(now, h) {
                break;
            }
        }
    }

    /// Queues a complete frame; drops it (counted) when the device is far behind.
    pub(super) fn enqueue_frame(&mut self, frame: PacketBuf) {
        if self.tx_queue.len() >= self.cfg.burst * TX_BACKLOG_BURSTS {
            return self.counters.drop(DropReason::TxFull);
        }
        self.tx_queue.push(frame);
    }

    /// Runs the connection's expired timers.
    pub(super) fn on_socket_timer(&mut self, now: Instant, h: SocketHandle) {
        let Some(sock) = self.sockets.tcp_mut(h) else { return };
        sock.scheduled = None;
        match sock.conn.poll_at() {
            Some(t) if t <= now => {
                sock.conn.on_timer(now);
                Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
            }
            Some(t) => {
                sock.scheduled = Some(t);
                self.timers.schedule(h, t);
            }
            None => {}
        }
    }

    /// Lets one connection emit what is due, then files its next deadline and frees it when done.
    /// Returns whether a full transmit backlog held it back (it is then on `tx_blocked`).
    pub(super) fn dispatch_socket(&mut self, now: Instant, h: SocketHandle) -> bool {
        let Some(sock) = self.sockets.tcp_mut(h) else { return false };
        sock.queued = false;
        if sock.template.is_none() && sock.conn.state() != State::Closed {
            let remote = *sock.conn.remote().ip();
            match self.cfg.next_hop(remote) {
                None => sock.conn.fail_with(ConnError::Unreachable),
                Some(hop) => match self.arp.resolve(hop, now) {
                    Resolution::Known(mac) => {
                        sock.template = Some(HeaderTemplate::new(
                            self.cfg.mac,
                            mac,
                            sock.conn.local(),
                            sock.conn.remote(),
                        ));
                    }
                    Resolution::SendRequest => {
                        self.pending.add_socket(hop, h);
                        self.send_arp_request(hop);
                        return false;
                    }
                    Resolution::Wait => {
                        self.pending.add_socket(hop, h);
                        return false;
                    }
                    Resolution::Failed => {
                        self.counters.drop(DropReason::Unresolved);
                        sock.conn.fail_with(ConnError::Unreachable);
                    }
                },
            }
        }
        let Some(sock) = self.sockets.tcp_mut(h) else { return false };
        let mut held = false;
        if let Some(template) = sock.template.as_ref() {
            let external = self.nic.supports_external();
            let mut sink = FrameSink {
                nic: &mut self.nic,
                tx_queue: &mut self.tx_queue,
                ext: &mut self.ext,
                external,
                handle: h,
                counters: &mut self.counters,
                template,
                src_mac: self.cfg.mac,
                tuple: sock.tuple(),
                caps: self.caps.checksum,
                burst: self.cfg.burst,
                now,
                blocked: false,
                ring_full: &mut self.tx_ring_full,
                ahead: &mut self.tx_ahead,
            };
            sock.conn.dispatch(now, &mut sink);
            if sink.blocked {
                held = true;
                self.counters.tx_connections_held += 1;
                if !sock.tx_held {
                    sock.tx_held = true;
                    self.tx_blocked.push_back(h);
                }
            }
        }
        self.after_dispatch(now, h);
        held
    }

    /// Bookkeeping after a connection ran: accept queue, timers, freeing.
    fn after_dispatch(&mut self, now: Instant, h: SocketHandle) {
        self.note_news(h);
        let Some(sock) = self.sockets.tcp_mut(h) else { return };
        let state = sock.conn.state();
        if state == State::Closed {
            if self.connections.get(&sock.tuple()) == Some(&h) {
                self.connections.remove(&sock.tuple());
            }
            let unaccepted = sock.listener.is_some();
            if sock.released || unaccepted {
                self.free_socket(h);
            }
            return;
        }
        if let (Some(lh), true) = (sock.listener, state.is_synchronized()) {
            if !sock.in_accept_queue {
                sock.in_accept_queue = true;
                match self.sockets.listener_mut(lh) {
                    Some(l) => {
                        l.accept_queue.push_back(h);
                        if self.track_activity && !l.in_activity {
                            l.in_activity = true;
                            self.activity.push(lh);
                        }
                    }
                    None => {
                        // The listener is gone: nobody will accept this connection.
                        if let Some(sock) = self.sockets.tcp_mut(h) {
                            sock.listener = None;
                            sock.released = true;
                            sock.conn.abort();
                            Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
                        }
                        return;
                    }
                }
            }
        }
        let Some(sock) = self.sockets.tcp_mut(h) else { return };
        if let Some(t) = sock.conn.poll_at() {
            if sock.scheduled.is_none_or(|s| t < s) {
                sock.scheduled = Some(t);
                self.timers.schedule(h, t.max(now));
            }
        }
    }

    /// Resends ARP requests that are due and fails what could not be resolved.
    pub(super) fn retry_neighbors(&mut self, now: Instant) {
        if self.arp.has_evicted_pending() {
            self.release_evicted_neighbors();
        }
        if self.pending.is_empty() || self.arp.next_deadline().is_none_or(|t| t > now) {
            return;
        }
        for ip in self.pending.addresses() {
            match self.arp.resolve(ip, now) {
                Resolution::SendRequest => self.send_arp_request(ip),
                Resolution::Wait => {}
                Resolution::Known(_) => {}
                Resolution::Failed => self.fail_neighbor(ip),
            }
        }
    }

    /// The cache forgot resolutions in progress to make room (more addresses pending than it
    /// holds, `ArpConfig::capacity`): they fail as if unanswered. Held frames are dropped
    /// (counted) and waiting connections fail with `Unreachable`; starting them over instead
    /// would evict others in turn and broadcast ARP requests at the poll rate.
    fn release_evicted_neighbors(&mut self) {
        for ip in self.arp.take_evicted_pending() {
            if self.arp.is_pending(ip) {
                continue; // Asked for again meanwhile: what waits belongs to the new request.
            }
            self.fail_neighbor(ip);
        }
    }

    /// `ip` cannot be resolved: what waited for it fails (frames dropped and counted, loaned
    /// datagrams given back, connections `Unreachable`).
    fn fail_neighbor(&mut self, ip: Ipv4Addr) {
        let Some(waiting) = self.pending.take(ip) else { return };
        for _ in &waiting.frames {
            self.counters.drop(DropReason::Unresolved);
        }
        for datagram in waiting.datagrams {
            self.drop_loaned_datagram(datagram);
        }
        for h in waiting.sockets {
            if let Some(sock) = self.sockets.tcp_mut(h) {
                sock.conn.fail_with(ConnError::Unreachable);
                Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
            }
        }
    }

    pub(super) fn send_arp_request(&mut self, ip: Ipv4Addr) {
        let req = ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: self.cfg.mac,
            source_protocol_addr: self.cfg.ip,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: ip,
        };
        if self.send_arp(EthernetAddress::BROADCAST, &req) {
            self.counters.arp_requests_sent += 1;
        }
    }

    pub(super) fn send_arp(&mut self, dst_mac: EthernetAddress, repr: &ArpRepr) -> bool {
        let Ok(mut buf) = self.nic.alloc_tx() else {
            self.counters.drop(DropReason::TxFull);
            return false;
        };
        let Some(frame) = buf.append(ETH_LEN + repr.buffer_len()) else { return false };
        EthernetRepr { src_addr: self.cfg.mac, dst_addr: dst_mac, ethertype: EtherType::Arp }
            .emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
        repr.emit(&mut ArpPacket::new_unchecked(&mut frame[ETH_LEN..]));
        self.enqueue_frame(buf);
        true
    }

    pub(super) fn send_icmp(
        &mut self,
        dst_mac: EthernetAddress,
        dst: Ipv4Addr,
        repr: &Icmpv4Repr<'_>,
    ) -> bool {
        match self.build_icmp(dst_mac, dst, repr) {
            Some(buf) => {
                self.enqueue_frame(buf);
                true
            }
            None => false,
        }
    }

    pub(super) fn build_icmp(
        &mut self,
        dst_mac: EthernetAddress,
        dst: Ipv4Addr,
        repr: &Icmpv4Repr<'_>,
    ) -> Option<PacketBuf> {
        let Ok(mut buf) = self.nic.alloc_tx() else {
            self.counters.drop(DropReason::TxFull);
            return None;
        };
        let l4_len = repr.buffer_len();
        let frame = buf.append(ETH_LEN + IP_LEN + l4_len)?;
        let no_offload = ChecksumCapabilities::none();
        emit_eth_ipv4(frame, self.cfg.mac, dst_mac, self.cfg.ip, dst, IpProtocol::Icmp, l4_len, &no_offload);
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut frame[ETH_LEN + IP_LEN..]));
        Some(buf)
    }

    /// A segment sent without a connection: a RST for a segment that matched none, or a
    /// SYN-ACK carrying a SYN cookie.
    pub(super) fn send_tcp_control(&mut self, dst_mac: EthernetAddress, tuple: FourTuple, repr: &TcpRepr) {
        let Ok(mut buf) = self.nic.alloc_tx() else {
            return self.counters.drop(DropReason::TxFull);
        };
        let no_offload = ChecksumCapabilities::none();
        if build_tcp_frame(&mut buf, self.cfg.mac, dst_mac, tuple, repr, &mut Payload::empty(), &no_offload)
            .is_ok()
        {
            self.counters.tcp_segs_out += 1;
            if repr.flags.contains(crate::wire::TcpFlags::RST) {
                self.counters.tcp_resets_sent += 1;
            }
            self.enqueue_frame(buf);
        }
    }

    /// Writes Ethernet + IPv4 headers in front of a UDP datagram (used by `udp_send_to`).
    pub(super) fn frame_headers(
        &self,
        frame: &mut [u8],
        dst_mac: EthernetAddress,
        dst: Ipv4Addr,
        l4_len: usize,
    ) {
        emit_eth_ipv4(
            frame,
            self.cfg.mac,
            dst_mac,
            self.cfg.ip,
            dst,
            IpProtocol::Udp,
            l4_len,
            &self.caps.checksum,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::burst_due;

    #[test]
    fn a_queue_is_offered_once_per_whole_burst() {
        let offered: Vec<usize> = (0..=100).filter(|&q| burst_due(q, 32)).collect();
        assert_eq!(offered, [32, 64, 96]);
        assert!((1..=5).all(|q| burst_due(q, 1)), "a burst of one: every frame");
    }
}
