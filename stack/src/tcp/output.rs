//! Segment output: SYN / SYN-ACK, data cut at the MSS within the peer's window (new data of two
//! segments or more handed to the sink as one run, [`SegmentRun`]; go-back-N after a timeout;
//! one segment at SND.UNA for a fast retransmit), FIN, zero-window probes, and at most one pure
//! ACK per call. The caller calls
//! `dispatch` once per socket after a whole receive burst, which is what makes "one pure ACK
//! per socket per burst" hold.

use super::connection::Connection;
use super::rtt::RttProbe;
use super::send_buffer::{LoanedSlice, SendBuffer};
use super::state::State;
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr, TcpSack};

/// The sink could not take the segment now (no transmit buffer); the connection stops and
/// tries again on its next dispatch, with its state unchanged for that segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no transmit buffer for the segment")]
pub struct SinkFull;

/// A segment's payload: a byte range of the send buffer, read without an intermediate copy.
#[derive(Debug)]
pub struct Payload<'a> {
    tx: Option<&'a mut SendBuffer>,
    offset: usize,
    len: usize,
}

impl<'a> Payload<'a> {
    /// A payload of no bytes.
    pub fn empty() -> Self {
        Payload { tx: None, offset: 0, len: 0 }
    }

    /// Bytes `offset..offset+len` of `tx` (for tests of frame builders).
    #[cfg(test)]
    pub(crate) fn for_test(tx: &'a mut SendBuffer, offset: usize, len: usize) -> Self {
        Payload { tx: Some(tx), offset, len }
    }

    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for segments without payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the payload into `dst` (which must hold `len()` bytes); returns bytes written.
    pub fn copy_to(&mut self, dst: &mut [u8]) -> usize {
        match self.tx.as_deref_mut() {
            Some(tx) => {
                let n = self.len.min(dst.len());
                tx.copy_out(self.offset, &mut dst[..n])
            }
            None => 0,
        }
    }

    /// [`copy_to`](Self::copy_to), also returning the ones-complement sum of the bytes written
    /// (`checksum::data` of them), taken in the same pass.
    pub fn copy_to_summed(&mut self, dst: &mut [u8]) -> (usize, u16) {
        match self.tx.as_deref_mut() {
            Some(tx) => {
                let n = self.len.min(dst.len());
                tx.copy_out_summed(self.offset, &mut dst[..n])
            }
            None => (0, 0),
        }
    }

    /// The payload as one piece of a loaned buffer that may be sent by reference (zero copy):
    /// its address, sum (when `with_sum`: a NIC that fills the checksum needs none, and then
    /// the payload is not read) and loan; `None` for copied data, an empty payload, or one
    /// spanning buffers.
    pub fn by_reference(&mut self, with_sum: bool) -> Option<LoanedSlice> {
        let (offset, len) = (self.offset, self.len);
        self.tx.as_deref_mut()?.by_reference_slice(offset, len, with_sum)
    }

    /// True when the connection queues loans a NIC may send by reference (so this payload may
    /// be one: a segment copied anyway counts as a copy of them).
    #[inline]
    pub fn from_by_reference_loans(&self) -> bool {
        self.tx.as_deref().is_some_and(SendBuffer::holds_by_reference_loans)
    }

    /// Records that a NIC transmission referencing `slice`'s loan was queued: the loan is not
    /// handed back before that transmission completes. Call only once the frame is committed.
    pub fn lent(&mut self, slice: &LoanedSlice) {
        if let Some(tx) = self.tx.as_deref_mut() {
            tx.transmissions_started(slice.loan, slice.at, 1);
        }
    }
}

/// Consecutive segments of new data cut from the send buffer at one size (the last may be
/// shorter), without FIN and within one by-reference loan if any: what a dispatch sends into
/// an open window, given to the sink in one call ([`SegmentSink::emit_run`]).
#[derive(Debug)]
pub struct SegmentRun<'a> {
    tx: &'a mut SendBuffer,
    /// The first segment's offset in the send buffer.
    offset: usize,
    /// Bytes of the whole run.
    len: usize,
    /// Bytes of every segment but the last.
    seg_len: usize,
    /// Whether the last segment ends what is queued (it carries PSH).
    push_last: bool,
}

impl SegmentRun<'_> {
    /// How many segments the run has.
    pub fn segments(&self) -> usize {
        self.len.div_ceil(self.seg_len)
    }

    /// Bytes of its longest segment (every one but maybe the last).
    pub fn segment_len(&self) -> usize {
        self.seg_len.min(self.len)
    }

    /// True when the send buffer queues loans a NIC may send by reference (the run may be one:
    /// [`Payload::from_by_reference_loans`]).
    pub fn from_by_reference_loans(&self) -> bool {
        self.tx.holds_by_reference_loans()
    }

    /// The run's bytes as one piece of a by-reference loan, without a sum (for a NIC that fills
    /// the checksum), when they lie in one; each segment's is its part of it
    /// ([`LoanedSlice::piece`] at the distance of its sequence number from the first's).
    pub fn by_reference(&mut self) -> Option<LoanedSlice> {
        self.tx.by_reference_slice(self.offset, self.len, false)
    }

    /// Records that `n` NIC transmissions referencing `whole`'s loan (parts of the run's piece,
    /// [`by_reference`](Self::by_reference)) were queued, as [`Payload::lent`] does for one: the
    /// loan is not handed back before they complete. Call once the frames are committed.
    pub fn lent(&mut self, whole: &LoanedSlice, n: u32) {
        if n > 0 {
            self.tx.transmissions_started(whole.loan, whole.at, n);
        }
    }

    /// Hands `emit` the run's segments in order, each `first` with its own sequence number
    /// and flags (PSH on the last when it ends what is queued) and its payload, until `emit`
    /// fails; returns how many it took.
    #[inline(always)]
    pub fn emit_with(
        &mut self,
        first: &TcpRepr,
        mut emit: impl FnMut(&TcpRepr, Payload<'_>) -> Result<(), SinkFull>,
    ) -> usize {
        let mut repr = *first;
        let mut at = 0;
        let mut taken = 0;
        while at < self.len {
            let len = self.seg_len.min(self.len - at);
            let last = at + len == self.len;
            repr.seq_number = first.seq_number + at;
            repr.flags = if last && self.push_last { TcpFlags::PSH } else { TcpFlags::empty() };
            if emit(&repr, Payload { tx: Some(&mut *self.tx), offset: self.offset + at, len }).is_err() {
                break;
            }
            taken += 1;
            at += len;
        }
        taken
    }
}

/// Where a connection's segments go (the worker builds frames from them).
pub trait SegmentSink {
    /// Sends one segment of the connection from `local` to `remote`.
    fn emit(&mut self, repr: &TcpRepr, payload: Payload<'_>) -> Result<(), SinkFull>;

    /// Sends a run's segments in order, stopping at the first the sink cannot take; returns
    /// how many went. Each is `first` with its own sequence number and flags
    /// ([`SegmentRun::emit_with`]). What it does is [`emit_each`]'s: one [`emit`](Self::emit)
    /// per segment; a sink may build the frames in one pass instead, the same frames.
    fn emit_run(&mut self, first: &TcpRepr, run: &mut SegmentRun<'_>) -> usize {
        emit_each(self, first, run)
    }
}

/// A run's segments one [`SegmentSink::emit`] at a time (the meaning of
/// [`SegmentSink::emit_run`]); returns how many the sink took.
pub fn emit_each<S: SegmentSink + ?Sized>(sink: &mut S, first: &TcpRepr, run: &mut SegmentRun<'_>) -> usize {
    run.emit_with(first, |repr, payload| sink.emit(repr, payload))
}

impl Connection {
    /// Emits every segment that is due now. Returns how many were emitted.
    pub fn dispatch(&mut self, now: Instant, sink: &mut dyn SegmentSink) -> usize {
        let mut sent = 0;
        if let Some(rst) = self.rst_pending.take() {
            if sink.emit(&self.reset_segment(rst), Payload::empty()).is_err() {
                self.rst_pending = Some(rst);
                return 0;
            }
            self.stats.segs_out += 1;
            sent += 1;
        }
        match self.state {
            State::Closed | State::Listen => return sent,
            State::SynSent | State::SynReceived => {
                if self.snd_nxt == self.iss {
                    if self.send_syn(now, sink).is_err() {
                        return sent;
                    }
                    sent += 1;
                }
            }
            State::TimeWait => {}
            _ => {
                // Into a shut window only the timeout's zero-window probe goes (`timers.rs`).
                if self.rexmit_due && self.snd_wnd > 0 {
                    sent += if self.sacked.is_empty() {
                        self.retransmit_head(now, sink)
                    } else {
                        self.retransmit_holes(now, sink)
                    };
                }
                sent += self.send_data(now, sink);
                if self.snd_una != self.snd_max && self.rto_deadline.is_none() {
                    // Data in flight always has a retransmission timer, whatever cut this
                    // dispatch short: a timeout is recoverable, a connection nobody wakes is not.
                    self.rto_deadline = Some(now + self.rtt.rto());
                }
            }
        }
        if self.keepalive_due() && self.send_ack_at(sink, self.snd_una - 1).is_ok() {
            if let Some(live) = self.live.as_deref_mut() {
                live.keepalive_due = false;
            }
            self.stats.rare().keepalive_probes += 1;
            sent += 1;
        }
        self.note_progress(now);
        if self.probe_due && self.send_ack_at(sink, self.snd_una - 1).is_ok() {
            self.probe_due = false;
            self.persist_mut().unanswered += 1;
            self.stats.rare().window_probes += 1;
            sent += 1;
        }
        let ack_seq = self.acceptable_seq();
        if self.ack_pending && self.state != State::SynSent && self.send_ack_at(sink, ack_seq).is_ok() {
            self.stats.pure_acks += 1;
            sent += 1;
            // One ACK went out for the burst; out-of-order segments each earn a duplicate.
            while self.dup_acks_owed > 1 && self.send_ack_at(sink, ack_seq).is_ok() {
                self.dup_acks_owed -= 1;
                self.stats.pure_acks += 1;
                sent += 1;
            }
        }
        if !self.ack_pending {
            self.dup_acks_owed = 0;
        }
        sent
    }

    /// True when `dispatch` has something to send right now.
    pub fn wants_output(&self) -> bool {
        if self.rst_pending.is_some() || self.ack_pending || self.probe_due || self.keepalive_due() {
            return true;
        }
        match self.state {
            State::SynSent | State::SynReceived => self.snd_nxt == self.iss,
            State::Closed | State::Listen | State::TimeWait => false,
            _ => {
                let sent = self.snd_nxt.since(self.snd_una);
                let unsent = self.tx.len().saturating_sub(sent);
                let fin_unsent = self.fin_outstanding() && self.snd_nxt <= self.data_end();
                (unsent > 0 && self.usable_window() > 0) || fin_unsent || self.rexmit_due
            }
        }
    }

    /// The sequence number of a pure ACK: `SND.MAX`, the first octet never sent, or the right
    /// edge of the peer's window when we sent past it (its window shut or shrank after our
    /// segments left, which it then dropped): a receiver takes a segment without data only at
    /// or after its `RCV.NXT`, and an ACK it refused would leave both ends waiting (Linux's
    /// `tcp_acceptable_seq`). Not `SND.NXT`: after a timeout it went back to resend, and the
    /// peer may hold everything up to `SND.MAX` (BSD's `tcp_output` uses `snd_max` for the same
    /// reason).
    fn acceptable_seq(&self) -> super::SeqNumber {
        let edge = self.snd_una + self.snd_wnd as usize;
        if self.snd_max > edge {
            edge
        } else {
            self.snd_max
        }
    }

    pub(super) fn usable_window(&self) -> usize {
        (self.snd_una + self.snd_wnd as usize).since(self.snd_nxt)
    }

    fn send_syn(&mut self, now: Instant, sink: &mut dyn SegmentSink) -> Result<(), super::output::SinkFull> {
        let passive = self.state == State::SynReceived;
        let window = self.receive_window().min(usize::from(u16::MAX));
        let offer_scale = if passive { self.wscale_negotiated() } else { self.cfg.window_scale.is_some() };
        let repr = TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq_number: self.iss,
            ack_number: passive.then_some(self.rcv_nxt),
            flags: TcpFlags::SYN,
            window_len: window as u16,
            max_seg_size: Some(self.cfg.mss),
            window_scale: if offer_scale { self.cfg.window_scale } else { None },
            sack: if self.offer_sack(passive) { TcpSack::PERMITTED } else { TcpSack::NONE },
        };
        sink.emit(&repr, Payload::empty())?;
        self.stats.segs_out += 1;
        if passive {
            self.rcv_adv = self.rcv_adv.max(self.rcv_nxt + window);
            self.ack_sent();
        }
        self.snd_nxt = self.iss + 1;
        if self.snd_max < self.snd_nxt {
            self.snd_max = self.snd_nxt;
        }
        if self.retries == 0 && self.rtt_probe.is_none() {
            self.rtt_probe = Some(RttProbe { end: self.snd_nxt, sent: now });
        } else {
            self.stats.rare().retransmits += 1;
        }
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rtt.rto());
        }
        Ok(())
    }

    /// Data segments (and the FIN) that fit the peer's window.
    fn send_data(&mut self, now: Instant, sink: &mut dyn SegmentSink) -> usize {
        let mut sent = 0;
        // The segments' common fields (ports, ACK, window), made at the first segment: nothing
        // here moves what they carry (the window advertised once is the one advertised again).
        let mut common: Option<TcpRepr> = None;
        loop {
            // Resending after a timeout: what the peer SACKed is not sent again.
            let mut sack_limit = usize::MAX;
            if self.snd_nxt < self.snd_max && !self.sacked.is_empty() {
                self.snd_nxt = self.sacked.skip(self.snd_nxt);
                if let Some(left) = self.sacked.next_left(self.snd_nxt) {
                    sack_limit = left.since(self.snd_nxt);
                }
            }
            let queued = self.tx.len();
            let offset = self.snd_nxt.since(self.snd_una);
            let unsent = queued.saturating_sub(offset);
            let wanted = self.send_mss().min(unsent);
            let window = self.usable_window();
            if let Some(run_len) = self.run_len(offset, unsent, window) {
                // Segments the window takes whole: one call to the sink for all of them.
                let seq = self.snd_nxt;
                let repr =
                    common.get_or_insert_with(|| self.segment_repr(seq, TcpFlags::empty(), TcpSack::NONE));
                repr.seq_number = seq;
                let seg_len = self.send_mss();
                let push_last = offset + run_len == queued;
                let mut run = SegmentRun { tx: &mut self.tx, offset, len: run_len, seg_len, push_last };
                let segments = run.segments();
                let taken = sink.emit_run(repr, &mut run);
                if taken > 0 {
                    sent += taken;
                    self.stats.segs_out += taken as u64;
                    // As after each segment: the first's end is the one a new RTT probe times,
                    // the last's is where SND.NXT and SND.MAX stand.
                    self.segment_sent(now, seq + seg_len.min(run_len));
                    if taken > 1 {
                        self.segment_sent(now, seq + (taken * seg_len).min(run_len));
                    }
                }
                if taken < segments {
                    break;
                }
                continue;
            }
            // Sender-side silly window avoidance (RFC 9293 3.8.6.2.1): when the window alone
            // would make the segment short, wait for it to open further. (A segment cut short
            // by a SACKed range or a loan's edge goes: nothing else will send those bytes.)
            let mut len = if window < wanted && window * 2 < self.max_snd_wnd as usize {
                0
            } else {
                wanted.min(window)
            };
            len = len.min(sack_limit);
            if let Some(limit) = self.tx.segment_limit(offset) {
                // A by-reference loan's edge: each segment's payload is one slice of one buffer.
                len = len.min(limit);
            }
            let fin = self.fin_outstanding() && offset <= queued && offset + len == queued;
            if len == 0 && !fin {
                break;
            }
            let mut flags = TcpFlags::empty();
            if len > 0 && offset + len == queued {
                flags.insert(TcpFlags::PSH);
            }
            if fin {
                flags.insert(TcpFlags::FIN);
            }
            let seq = self.snd_nxt;
            let repr = common.get_or_insert_with(|| self.segment_repr(seq, flags, TcpSack::NONE));
            repr.seq_number = seq;
            repr.flags = flags;
            let payload = Payload { tx: Some(&mut self.tx), offset, len };
            if sink.emit(repr, payload).is_err() {
                break;
            }
            sent += 1;
            self.stats.segs_out += 1;
            self.segment_sent(now, self.snd_nxt + len + usize::from(fin));
            if fin {
                break;
            }
        }
        // Data waiting, nothing in flight, yet the window forbids sending (zero, or too small to
        // be worth a segment): probe until it opens, so a lost window update cannot stall us.
        let unsent = self.tx.len().saturating_sub(self.snd_nxt.since(self.snd_una));
        if unsent > 0 && self.snd_una == self.snd_max && self.persist_deadline().is_none() {
            let deadline = now + self.rtt.rto();
            self.persist_mut().deadline = Some(deadline);
        }
        sent
    }

    /// A segment from SND.NXT to `end` went out (new data or a go-back-N resend).
    fn segment_sent(&mut self, now: Instant, end: super::SeqNumber) {
        if end > self.snd_max {
            // Only a segment with something new is sure to be read: a go-back-N resend may
            // be an old duplicate to the peer, refused whole, ACK included.
            self.ack_sent();
            if self.rtt_probe.is_none() && self.snd_nxt >= self.snd_max {
                self.rtt_probe = Some(RttProbe { end, sent: now });
            }
            self.snd_max = end;
        } else {
            self.stats.rare().retransmits += 1;
        }
        self.snd_nxt = end;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rtt.rto());
        }
    }

    /// The bytes from SND.NXT (`offset` in the send buffer) that go as one run
    /// ([`SegmentRun`]): new data (nothing sent past SND.NXT, so no SACKed range to skip) in
    /// at least two segments: as many as the send MSS cuts whole from the usable `window`, or
    /// all `unsent` bytes where the window holds them (the last segment shorter), not past the
    /// edge of a by-reference loan (where the last is cut short, as segment by segment), and
    /// not the last segment when it carries a FIN (it goes on its own). None when the
    /// segments go one at a time. Within a run no segment is cut by the window, so silly
    /// window avoidance holds none back.
    fn run_len(&mut self, offset: usize, unsent: usize, window: usize) -> Option<usize> {
        let mss = self.send_mss();
        if mss == 0 || self.snd_nxt != self.snd_max {
            return None;
        }
        let mut len = if unsent <= window { unsent } else { window / mss * mss };
        if len > mss {
            if let Some(limit) = self.tx.segment_limit(offset) {
                len = len.min(limit);
            }
        }
        if len == unsent && len > 0 && self.fin_outstanding() {
            // The segment that ends what is queued carries the FIN.
            len -= (len - 1) % mss + 1;
        }
        (len > mss).then_some(len)
    }

    /// Fast retransmit: the one segment at SND.UNA (or the FIN there), sent again without
    /// moving SND.NXT. Returns 1 if it went out (or there was nothing left to resend).
    fn retransmit_head(&mut self, now: Instant, sink: &mut dyn SegmentSink) -> usize {
        let in_flight = self.snd_max.since(self.snd_una);
        let queued = self.tx.len();
        let mut len = self.send_mss().min(queued).min(in_flight);
        if let Some(limit) = self.tx.segment_limit(0) {
            len = len.min(limit);
        }
        let fin = self.fin_outstanding() && len == queued && in_flight > queued;
        if len == 0 && !fin {
            self.rexmit_due = false;
            return 0;
        }
        let mut flags = TcpFlags::empty();
        if fin {
            flags.insert(TcpFlags::FIN);
        }
        let repr = self.segment_repr(self.snd_una, flags, TcpSack::NONE);
        let payload = Payload { tx: Some(&mut self.tx), offset: 0, len };
        if sink.emit(&repr, payload).is_err() {
            return 0;
        }
        self.rexmit_due = false;
        let fast = self.in_recovery();
        if fast {
            // F-RTO's resend after a timeout goes the same way, without fast recovery's timer.
            self.note_head_retransmitted(now);
        }
        let sent_up_to = self.snd_una + len;
        let r = self.recovery_mut();
        r.rexmit_next = r.rexmit_next.max(sent_up_to);
        self.stats.segs_out += 1;
        self.stats.rare().retransmits += 1;
        if fast {
            self.stats.rare().fast_retransmits += 1;
        }
        self.ack_sent();
        // Karn: an ACK may now answer either copy.
        if self.rtt_probe.is_some_and(|p| p.end > self.snd_una) {
            self.rtt_probe = None;
        }
        1
    }

    /// Whether our SYN (`passive`: our SYN-ACK) carries SACK-permitted.
    fn offer_sack(&self, passive: bool) -> bool {
        if passive {
            self.sack_ok
        } else {
            self.cfg.sack
        }
    }

    /// SACK blocks for a pure ACK: what the reorder queue holds, when SACK was negotiated.
    fn sack_blocks(&self) -> TcpSack {
        if !self.sack_ok || self.ooo.bytes() == 0 {
            return TcpSack::NONE;
        }
        let (ranges, n) = self.ooo.sack_ranges();
        TcpSack::blocks(ranges[..n].iter().copied())
    }

    /// The segment at SND.UNA went out again: remember when, and arm the recovery timer (a
    /// round trip, doubled for each expiry in a row).
    fn note_head_retransmitted(&mut self, now: Instant) {
        let (rto, snd_max) = (self.rtt.rto(), self.snd_max);
        let delay = self.rtt.loss_delay().unwrap_or(rto);
        let r = self.recovery_mut();
        r.rexmit_at = Some(now);
        r.rexmit_mark = snd_max;
        let delay = (delay * (1u32 << r.backoff.min(8))).min(rto);
        r.deadline = Some(now + delay);
    }

    /// Fast recovery with SACK: every hole between SND.UNA and the highest SACKed byte that was
    /// not retransmitted yet in this recovery, at once (no congestion control: the peer's
    /// window is the only limit, and the holes lie inside it). Returns segments sent.
    fn retransmit_holes(&mut self, now: Instant, sink: &mut dyn SegmentSink) -> usize {
        let Some(high) = self.sacked.high() else { return 0 };
        let data_end = self.data_end();
        let mut sent = 0;
        let mut seq = self.recovery_mut().rexmit_next.max(self.snd_una);
        loop {
            seq = self.sacked.skip(seq);
            let end = self.sacked.next_left(seq).unwrap_or(high).min(high).min(data_end);
            if seq >= end {
                break;
            }
            let offset = seq.since(self.snd_una);
            let mut len = self.send_mss().min(end.since(seq));
            if let Some(limit) = self.tx.segment_limit(offset) {
                len = len.min(limit);
            }
            let repr = self.segment_repr(seq, TcpFlags::empty(), TcpSack::NONE);
            let payload = Payload { tx: Some(&mut self.tx), offset, len };
            if sink.emit(&repr, payload).is_err() {
                // The rest goes on the next dispatch (rexmit_due stays set).
                return sent;
            }
            sent += 1;
            if seq == self.snd_una {
                // The head's retransmission is the one whose loss the duplicates reveal.
                self.note_head_retransmitted(now);
            }
            seq += len;
            self.recovery_mut().rexmit_next = seq;
            self.stats.segs_out += 1;
            self.stats.rare().retransmits += 1;
            self.stats.rare().fast_retransmits += 1;
            self.ack_sent();
        }
        self.rexmit_due = false;
        // Karn: an ACK may now answer either copy.
        if sent > 0 && self.rtt_probe.is_some_and(|p| p.end > self.snd_una) {
            self.rtt_probe = None;
        }
        sent
    }

    /// A segment of this connection at `seq` with `flags`, our current ACK and window, `sack`
    /// blocks and no other option.
    fn segment_repr(&mut self, seq: super::SeqNumber, flags: TcpFlags, sack: TcpSack) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq_number: seq,
            ack_number: Some(self.rcv_nxt),
            flags,
            window_len: self.advertise_window(),
            max_seg_size: None,
            window_scale: None,
            sack,
        }
    }

    /// A segment without payload carrying our current ACK and window at sequence `seq`.
    fn send_ack_at(&mut self, sink: &mut dyn SegmentSink, seq: super::SeqNumber) -> Result<(), SinkFull> {
        let repr = self.segment_repr(seq, TcpFlags::empty(), self.sack_blocks());
        sink.emit(&repr, Payload::empty())?;
        self.stats.segs_out += 1;
        self.ack_sent();
        Ok(())
    }

    /// A segment carrying our current ACK went out: nothing is owed any more, delayed or not.
    pub(super) fn ack_sent(&mut self) {
        self.ack_pending = false;
        self.delayed_ack_at = None;
    }

    /// The window field for the next segment; moves the advertised right edge, never left:
    /// scaling rounds a window down to its unit, so a promise that the rounded free space no
    /// longer covers is rounded up instead (Linux's `tcp_select_window`). A peer that saw the
    /// edge move left would hold data it already sent past the new edge and clamp its ACKs there,
    /// where we refuse them.
    fn advertise_window(&mut self) -> u16 {
        let promised = self.rcv_adv.since(self.rcv_nxt).div_ceil(1 << self.rcv_wscale);
        let field = (self.receive_window() >> self.rcv_wscale).max(promised).min(usize::from(u16::MAX));
        let edge = self.rcv_nxt + (field << self.rcv_wscale);
        self.rcv_adv = self.rcv_adv.max(edge);
        field as u16
    }
}
