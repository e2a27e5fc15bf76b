//! Receive queues: completions, events and data written into guest-posted buffers, pulled from
//! the socket server as buffers are there.

use std::sync::Arc;

use slimtcp::nic::Nic;
use slimtcp::server::StreamReady;
use slimtcp_abi::{layout, RxMessage, MIN_RX_BUFFER};
use virtio_queue::{Queue, QueueOwnedT};

use super::chain::walk;
use super::{sock_id, Engine, Out, BAD_RX_BUFFERS_PER_SEARCH, RX_PER_STEP};
use crate::guest_mem::{GuestMem, GuestWriter};
use crate::queues::{self, Vrings};

/// Bytes before a data payload (virtio-net header, receive header, data body).
const DATA_HDR: usize = layout::virtio_net_hdr::SIZE + layout::rx_header::SIZE + layout::data::SIZE;
/// How far ahead of a stream delivery's copy the guest buffer's lines are asked for: 32 lines
/// (fair bench, guest receives at MSS 1460: +4% against the whole buffer at once; 1 and 4 KiB
/// no better).
const RX_WRITE_AHEAD: usize = 2048;
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
                    Some(Out::Acked(id)) => {
                        let id = *id;
                        // A socket's COPY bytes in flight are at most its send buffer (64 MiB
                        // at most), and no more are sent before this message: fits in u32.
                        let bytes = self.pairs[p].acked.remove(&id).unwrap_or(0);
                        let msg = RxMessage::Acked {
                            socket: sock_id(id),
                            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
                        };
                        if bytes > 0 && !self.write_message(q, mem, &msg) {
                            self.pairs[p].acked.insert(id, bytes);
                            break;
                        }
                        self.pairs[p].pending.pop_front();
                        self.pairs[p].pending_msgs -= 1;
                        wrote += usize::from(bytes > 0);
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
                        self.server.readable_done(id);
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
        match self.server.ready(id) {
            StreamReady::Nothing => Delivery::Nothing,
            StreamReady::Eof => {
                if let Some(pair) = self.server.lane_of(id) {
                    self.push(pair, Out::Msg(RxMessage::PeerClosed { socket: sock_id(id) }));
                }
                Delivery::Nothing
            }
            StreamReady::Data => self.deliver_stream(id, q, mem),
            StreamReady::Datagram => self.deliver_datagram(id, q, mem),
        }
    }

    /// Stream bytes into the next posted buffer (the one receive copy); they hold the window
    /// until the guest credits them back.
    fn deliver_stream(&mut self, id: u32, q: &mut Queue, mem: &GuestMem) -> Delivery {
        let Some((head, cap)) = self.next_rx_buffer(q, mem) else { return Delivery::NoBuffer };
        // The guest read this buffer last, on its own core: its lines are asked for, to be
        // written, a little ahead of the copy, as far as the bytes there are to write.
        let readable = self.server.stream_readable(id).min(cap - DATA_HDR);
        let mut w = GuestWriter::with_write_ahead(&self.walked.slices, RX_WRITE_AHEAD, DATA_HDR + readable);
        w.skip(DATA_HDR);
        let total = self.server.stream_read(id, cap - DATA_HDR, |bytes| {
            w.write(bytes);
        });
        self.counters.rx_payload_copied += total as u64;
        let msg = RxMessage::Data { socket: sock_id(id), len: total as u32 };
        let n = self.emit_header(&msg);
        let mut w = GuestWriter::new(&self.walked.slices);
        w.write(&self.scratch[..n]);
        queues::add_used(q, mem, head, (DATA_HDR + total) as u32);
        self.counters.rx_messages += 1;
        Delivery::Wrote
    }

    fn deliver_datagram(&mut self, id: u32, q: &mut Queue, mem: &GuestMem) -> Delivery {
        let Some((head, cap)) = self.next_rx_buffer(q, mem) else { return Delivery::NoBuffer };
        let Some((from, buf)) = self.server.take_datagram(id) else {
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
}
