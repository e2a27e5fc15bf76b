//! Receive queues: completions, events and data written into guest-posted buffers; socket
//! activity from the stack turned into those messages; acknowledged sends completed.

use std::any::Any;
use std::sync::Arc;

use slimtcp::api::SocketError;
use slimtcp::nic::Nic;
use slimtcp::tcp::{Events, TxPayload};
use slimtcp_abi::{layout, Done, Errno, RxMessage, MIN_RX_BUFFER};
use virtio_queue::{Queue, QueueOwnedT};

use super::chain::walk;
use super::{errno_of, sock_id, Engine, GSock, Kind, Out, Phase, BAD_RX_BUFFERS_PER_SEARCH, RX_PER_STEP};
use crate::guest_mem::{GuestMem, GuestPayload, GuestWriter};
use crate::queues::{self, Vrings};

/// Bytes before a data payload (virtio-net header, receive header, data body).
const DATA_HDR: usize = layout::virtio_net_hdr::SIZE + layout::rx_header::SIZE + layout::data::SIZE;
/// Bytes before a datagram payload (virtio-net header, receive header, datagram body).
const DGRAM_HDR: usize = layout::virtio_net_hdr::SIZE + layout::rx_header::SIZE + layout::datagram::SIZE;

enum Delivery {
    Wrote,
    NoBuffer,
    Nothing,
}

impl<N: Nic> Engine<N> {
    /// Writes what pair `p` has pending and its sockets' data into its receive queue, and returns
    /// the transmit chains whose completions are out.
    pub(super) fn deliver<V: Vrings + ?Sized>(&mut self, p: usize, rings: &V, mem: &Arc<GuestMem>) -> bool {
        let pair = &self.pairs[p];
        if pair.pending.is_empty() && pair.readable.is_empty() {
            return false;
        }
        let mut returns: Vec<u16> = Vec::new();
        let mut wrote = 0usize;
        let bad_before = self.counters.bad_rx_buffers;
        rings.with(2 * p, |q| {
            while wrote < RX_PER_STEP {
                match self.pairs[p].pending.front() {
                    None => break,
                    Some(Out::Return(head)) => {
                        returns.push(*head);
                        self.pairs[p].pending.pop_front();
                        self.pairs[p].taken = self.pairs[p].taken.saturating_sub(1);
                    }
                    Some(Out::Msg(msg)) => {
                        let msg = *msg;
                        if !self.write_message(q, mem, &msg) {
                            break;
                        }
                        self.pairs[p].pending.pop_front();
                        self.pairs[p].pending_msgs -= 1;
                        wrote += 1;
                    }
                }
            }
            while wrote < RX_PER_STEP && self.pairs[p].pending.is_empty() {
                let Some(&id) = self.pairs[p].readable.front() else { break };
                match self.deliver_one(id, q, mem) {
                    Delivery::Wrote => {
                        wrote += 1;
                        // Round robin between the pair's sockets.
                        self.pairs[p].readable.rotate_left(1);
                    }
                    Delivery::NoBuffer => break,
                    Delivery::Nothing => {
                        self.pairs[p].readable.pop_front();
                        if let Some(s) = self.sockets.get_mut(&id) {
                            s.in_readable = false;
                        }
                    }
                }
            }
        });
        // Unusable buffers given back count as work: the search for a usable one goes on in
        // the next step rather than waiting for the guest's next kick.
        let bad_returned = self.counters.bad_rx_buffers != bad_before;
        if wrote > 0 || bad_returned {
            rings.notify(2 * p, mem);
        }
        if !returns.is_empty() {
            let added = rings.with(2 * p + 1, |q| {
                for head in &returns {
                    queues::add_used(q, mem, *head, 0);
                }
            });
            if added.is_some() {
                rings.notify(2 * p + 1, mem);
            } else {
                // The transmit queue is stopped: keep them, in order, for its restart.
                for &head in returns.iter().rev() {
                    self.pairs[p].pending.push_front(Out::Return(head));
                    self.pairs[p].taken += 1;
                }
                returns.clear();
            }
        }
        wrote > 0 || bad_returned || !returns.is_empty()
    }

    /// The next usable posted buffer (head, writable bytes); unusable ones are returned empty,
    /// at most [`BAD_RX_BUFFERS_PER_SEARCH`] per call (then `None`: try again next step).
    fn next_rx_buffer(&mut self, q: &mut Queue, mem: &GuestMem) -> Option<(u16, usize)> {
        for _ in 0..BAD_RX_BUFFERS_PER_SEARCH {
            let chain = queues::pop_head(q, mem)?;
            let head = chain.head_index();
            walk(chain, mem, true, self.cfg.limits.max_chain as usize, &mut self.walked);
            let len = usize::try_from(self.walked.len).unwrap_or(usize::MAX);
            if self.walked.fault.is_none() && len >= MIN_RX_BUFFER {
                return Some((head, len));
            }
            self.counters.bad_rx_buffers += 1;
            queues::add_used(q, mem, head, 0);
        }
        None
    }

    /// Emits `msg`'s header and body (not its payload) into the scratch buffer, which grows to
    /// the largest header (not to the payload: a data message may announce 64 MiB).
    fn emit_header(&mut self, msg: &RxMessage) -> usize {
        let wire = msg.wire_len();
        if self.scratch.len() < wire {
            self.scratch.resize(wire, 0);
        }
        match msg.emit_header(&mut self.scratch[..wire]) {
            Ok(n) => n,
            Err(e) => {
                log::error!("emitting {msg:?}: {e}");
                0
            }
        }
    }

    /// Writes a message without payload into the next posted buffer; false when none is posted.
    fn write_message(&mut self, q: &mut Queue, mem: &GuestMem, msg: &RxMessage) -> bool {
        let Some((head, _)) = self.next_rx_buffer(q, mem) else { return false };
        let n = self.emit_header(msg);
        let mut w = GuestWriter::new(&self.walked.slices);
        let written = w.write(&self.scratch[..n]);
        queues::add_used(q, mem, head, written as u32);
        self.counters.rx_messages += 1;
        true
    }

    fn deliver_one(&mut self, id: u32, q: &mut Queue, mem: &GuestMem) -> Delivery {
        let Some(s) = self.sockets.get_mut(&id) else { return Delivery::Nothing };
        let Some(h) = s.handle else { return Delivery::Nothing };
        match s.kind {
            Kind::Udp => self.deliver_datagram(id, h, q, mem),
            Kind::Tcp if s.phase == Phase::Listening => Delivery::Nothing,
            Kind::Tcp => self.deliver_stream(id, h, q, mem),
        }
    }

    fn deliver_stream(
        &mut self,
        id: u32,
        h: slimtcp::iface::SocketHandle,
        q: &mut Queue,
        mem: &GuestMem,
    ) -> Delivery {
        let Some(s) = self.sockets.get_mut(&id) else { return Delivery::Nothing };
        if s.rx_partial.is_none() {
            match self.iface.tcp_recv_segment_held(h) {
                Ok(Some(seg)) => s.rx_partial = Some(seg),
                Ok(None) => {
                    if !s.eof_sent {
                        s.eof_sent = true;
                        let pair = s.pair;
                        self.push(pair, Out::Msg(RxMessage::PeerClosed { socket: sock_id(id) }));
                    }
                    return Delivery::Nothing;
                }
                Err(SocketError::Connection(e)) => {
                    self.on_connection_error(id, errno_of(SocketError::Connection(e)));
                    return Delivery::Nothing;
                }
                Err(_) => return Delivery::Nothing,
            }
        }
        let Some((head, cap)) = self.next_rx_buffer(q, mem) else { return Delivery::NoBuffer };
        let mut room = cap - DATA_HDR;
        let mut total = 0usize;
        let mut w = GuestWriter::new(&self.walked.slices);
        w.skip(DATA_HDR);
        let Some(s) = self.sockets.get_mut(&id) else { return Delivery::Nothing };
        while room > 0 {
            let Some(mut seg) = s.rx_partial.take() else { break };
            let n = room.min(seg.len());
            w.write(&seg.as_slice()[..n]);
            total += n;
            room -= n;
            if n < seg.len() {
                seg.advance(n);
                s.rx_partial = Some(seg);
                break;
            }
            if room > 0 {
                if let Ok(Some(next)) = self.iface.tcp_recv_segment_held(h) {
                    s.rx_partial = Some(next);
                }
            }
        }
        s.outstanding_rx += total as u64;
        self.counters.rx_payload_copied += total as u64;
        let msg = RxMessage::Data { socket: sock_id(id), len: total as u32 };
        let n = self.emit_header(&msg);
        let mut w = GuestWriter::new(&self.walked.slices);
        w.write(&self.scratch[..n]);
        queues::add_used(q, mem, head, (DATA_HDR + total) as u32);
        self.counters.rx_messages += 1;
        Delivery::Wrote
    }

    fn deliver_datagram(
        &mut self,
        id: u32,
        h: slimtcp::iface::SocketHandle,
        q: &mut Queue,
        mem: &GuestMem,
    ) -> Delivery {
        if !self.iface.udp_can_recv(h) {
            return Delivery::Nothing;
        }
        let Some((head, cap)) = self.next_rx_buffer(q, mem) else { return Delivery::NoBuffer };
        let Ok((from, buf)) = self.iface.udp_recv_buf(h) else {
            // Nothing after all: give the buffer back untouched.
            q.go_to_previous_position();
            return Delivery::Nothing;
        };
        let n = (cap - DGRAM_HDR).min(buf.len());
        if n < buf.len() {
            self.counters.datagrams_truncated += 1;
        }
        let mut w = GuestWriter::new(&self.walked.slices);
        w.skip(DGRAM_HDR);
        w.write(&buf.as_slice()[..n]);
        self.counters.rx_payload_copied += n as u64;
        let msg =
            RxMessage::Datagram { socket: sock_id(id), from, len: n as u32, orig_len: buf.len() as u32 };
        let hn = self.emit_header(&msg);
        let mut w = GuestWriter::new(&self.walked.slices);
        w.write(&self.scratch[..hn]);
        queues::add_used(q, mem, head, (DGRAM_HDR + n) as u32);
        self.counters.rx_messages += 1;
        Delivery::Wrote
    }

    /// Data for a connection the guest closed (its sends still finishing): nobody will read it,
    /// so the connection is reset, as a kernel does for data after close. True when it was.
    fn zombie_got_data(&mut self, id: u32, h: slimtcp::iface::SocketHandle) -> bool {
        let zombie = self.sockets.get(&id).is_some_and(|s| s.phase == Phase::Zombie);
        if !zombie || self.iface.tcp_info(h).map_or(0, |i| i.recv_queued) == 0 {
            return false;
        }
        self.fail_sends(id, Errno::ECONNABORTED);
        if let Some(s) = self.sockets.remove(&id) {
            self.release_stack_socket(&s, true);
        }
        true
    }

    /// The connection of `id` failed: a reset event (once) and its held sends fail.
    fn on_connection_error(&mut self, id: u32, errno: Errno) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let zombie = s.phase == Phase::Zombie;
        let first = !s.reset_sent;
        s.reset_sent = true;
        let pair = s.pair;
        self.fail_sends(id, errno);
        if zombie {
            if let Some(s) = self.sockets.remove(&id) {
                self.release_stack_socket(&s, true);
            }
        } else if first {
            self.push(pair, Out::Msg(RxMessage::Reset { socket: sock_id(id), errno }));
        }
    }

    /// Turns one socket's news into messages.
    pub(super) fn on_activity(&mut self, id: u32, events: Events) {
        let Some(s) = self.sockets.get(&id) else { return };
        let Some(h) = s.handle else { return };
        match (s.kind, s.phase) {
            (Kind::Udp, _) => self.mark_readable(id),
            (Kind::Tcp, Phase::Listening) => self.accept_all(id, h),
            (Kind::Tcp, Phase::Connecting { cookie, quiet }) => {
                let pair = s.pair;
                let info = self.iface.tcp_info(h);
                let error = info.as_ref().ok().and_then(|i| i.error);
                if let Some(e) = error {
                    self.counters.error_completions += 1;
                    let errno = errno_of(SocketError::Connection(e));
                    self.push(pair, complete_connect(cookie, id, Err(errno)));
                    // The socket may be closed or connected again; the stack's one is gone.
                    self.by_handle.remove(&h);
                    let _ = self.iface.tcp_close(h);
                    if let Some(s) = self.sockets.get_mut(&id) {
                        s.handle = None;
                        s.phase = Phase::Fresh;
                        s.port = None;
                    }
                } else if events.contains(Events::CONNECTED) {
                    let local = info.map(|i| i.local).unwrap_or(self.local_addr(0));
                    if !quiet {
                        self.push(pair, complete_connect(cookie, id, Ok(Done { value: 0, addr: local })));
                    }
                    if let Some(s) = self.sockets.get_mut(&id) {
                        s.phase = Phase::Connected;
                    }
                    self.mark_readable(id);
                }
            }
            (Kind::Tcp, _) => {
                if events.contains(Events::READABLE) && self.zombie_got_data(id, h) {
                    return;
                }
                if events.intersects(Events::READABLE | Events::PEER_CLOSED | Events::ERROR | Events::CLOSED)
                {
                    self.mark_readable(id);
                }
                if events.contains(Events::ERROR) {
                    if let Some(e) = self.iface.tcp_info(h).ok().and_then(|i| i.error) {
                        if self.sockets.get(&id).is_some_and(|s| s.phase == Phase::Zombie) {
                            self.on_connection_error(id, errno_of(SocketError::Connection(e)));
                            return;
                        }
                    }
                }
                self.collect_completed(id);
            }
        }
    }

    fn accept_all(&mut self, listener: u32, lh: slimtcp::iface::SocketHandle) {
        let Some(l) = self.sockets.get(&listener) else { return };
        let (pair, opts) = (l.pair, l.opts);
        loop {
            let visible = self.sockets.values().filter(|s| s.phase != Phase::Zombie).count();
            if visible >= self.cfg.limits.max_sockets as usize {
                // The rest wait in the stack's accept queue; announced when sockets close.
                break;
            }
            let Ok(h) = self.iface.tcp_accept(lh) else { break };
            let Ok(info) = self.iface.tcp_info(h) else { continue };
            let id = self.new_id();
            let mut s = GSock::new(pair, Kind::Tcp, opts);
            s.handle = Some(h);
            s.port = None;
            s.phase = Phase::Connected;
            self.sockets.insert(id, s);
            self.by_handle.insert(h, id);
            self.push(
                pair,
                Out::Msg(RxMessage::Accepted {
                    listener: sock_id(listener),
                    socket: sock_id(id),
                    remote: info.remote,
                    local: info.local,
                }),
            );
            self.mark_readable(id);
        }
    }

    /// Completes the sends of `id` whose loans came back: bytes the peer acknowledged (TCP), or
    /// datagrams the NIC no longer reads (UDP).
    pub(super) fn collect_completed(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let Some(h) = s.handle else { return };
        if s.sends.is_empty() {
            return;
        }
        // Loans the stack could not take at once go first.
        while let Some(back) = s.backlog.pop_front() {
            match self.iface.tcp_send_loaned(h, back) {
                Ok(Ok(())) => {}
                Ok(Err(back)) => {
                    s.backlog.push_front(back);
                    break;
                }
                Err(_) => break,
            }
        }
        let mut completed = std::mem::take(&mut self.completed);
        let taken = match s.kind {
            Kind::Tcp => self.iface.tcp_take_completed(h, &mut completed),
            Kind::Udp => self.iface.udp_take_returned(h, &mut completed),
        };
        if taken.is_err() {
            // The connection is gone; its error (if any) arrives as activity or on delivery.
        }
        let pair = s.pair;
        for payload in completed.drain(..) {
            let Some(tag) = downcast(payload) else { continue };
            let Some(s) = self.sockets.get_mut(&id) else { break };
            let Some(send) = s.sends.get_mut(&tag.seq) else { continue };
            send.loans_left = send.loans_left.saturating_sub(1);
            if send.loans_left > 0 {
                continue;
            }
            let Some(send) = s.sends.remove(&tag.seq) else { continue };
            s.in_flight = s.in_flight.saturating_sub(u64::from(send.len));
            self.finish_send(pair, id, &send, Ok(Done::value(u64::from(send.len))));
        }
        self.completed = completed;
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if s.writable_wanted && s.in_flight < u64::from(s.opts.sndbuf) {
            s.writable_wanted = false;
            let available = (u64::from(s.opts.sndbuf) - s.in_flight) as u32;
            self.push(pair, Out::Msg(RxMessage::Writable { socket: sock_id(id), available }));
        }
        let Some(s) = self.sockets.get(&id) else { return };
        if s.sends.is_empty() {
            if s.phase == Phase::Zombie {
                if let Some(s) = self.sockets.remove(&id) {
                    self.release_stack_socket(&s, false);
                }
            }
        } else if !self.sending.contains(&id) {
            self.sending.push(id);
        }
    }
}

fn complete_connect(cookie: u64, id: u32, result: Result<Done, Errno>) -> Out {
    Out::Msg(RxMessage::Complete { cookie, socket: sock_id(id), op: slimtcp_abi::Op::Connect.code(), result })
}

/// The request tag of a payload the stack handed back.
fn downcast(payload: Box<dyn TxPayload>) -> Option<crate::guest_mem::SendTag> {
    let any: Box<dyn Any + Send> = payload;
    match any.downcast::<GuestPayload>() {
        Ok(p) => Some(p.tag),
        Err(_) => {
            log::error!("a loaned payload of a foreign type came back; dropped");
            None
        }
    }
}
