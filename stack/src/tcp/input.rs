//! Segment arrival (RFC 9293 section 3.10.7) for a connection that exists, with the RFC 5961
//! checks on RST, SYN and ACK. In-order payload is queued for the application in its packet
//! buffer; a segment that starts beyond `rcv_nxt` is kept in the bounded reorder queue
//! (`reorder.rs`) and answered at once with a duplicate ACK.

use super::connection::{Connection, PendingReset};
use super::events::Events;
use super::recovery::Frto;
use super::reorder::Insert;
use super::state::State;
use super::ConnError;
use super::SeqNumber;
use crate::nic::PacketBuf;
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// Least time between two ACKs answering out-of-window or challenged segments.
const OOW_ACK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

impl Connection {
    /// Processes one received segment. `payload` holds exactly the segment's payload bytes: when
    /// the data is in order its buffer is taken out (left empty) and queued for the application
    /// without copying, or the bytes are copied behind earlier small ones (see
    /// [`RecvBuffer::push`](super::recv_buffer::RecvBuffer::push)).
    /// Any reply (ACK, RST) is produced by the next output call, so the caller can process a
    /// whole burst of segments first and then send one ACK.
    pub fn on_segment(&mut self, now: Instant, seg: &TcpRepr, payload: &mut PacketBuf) {
        self.stats.segs_in += 1;
        match self.state {
            State::Closed | State::Listen => return,
            State::SynSent => self.input_syn_sent(now, seg, payload),
            _ => self.input_synchronized(now, seg, payload),
        }
        self.note_input(now);
    }

    /// Whether [`on_continuation`](Self::on_continuation) takes a segment at `seq` whose ACK is
    /// `ack`: what header prediction expects next (in order, established, no recovery, window
    /// probe or SACK scoreboard), with an ACK that acknowledges nothing new.
    pub fn takes_continuation(&self, seq: SeqNumber, ack: SeqNumber) -> bool {
        self.state == State::Established
            && seq == self.rcv_nxt
            && ack == self.snd_una
            && self.recovery.is_none()
            && self.persist.is_none()
            && self.sacked.is_empty()
    }

    /// A data segment that continues the one this connection was given just before, in the same
    /// burst: its header repeats that one's but for the sequence number (`seq`), so it has an
    /// ACK (`ack`), no SYN, RST, FIN or options, and `window_len` and `push` are that header's.
    /// The interface reads such a header without parsing it (`iface/rx_flow.rs`). Call only when
    /// [`takes_continuation`](Self::takes_continuation) says so: the segment is then one that
    /// [`predicted_ack`](Self::predicted_ack) recognises, and this does what
    /// [`on_segment`](Self::on_segment) does with it.
    pub fn on_continuation(
        &mut self,
        now: Instant,
        seq: SeqNumber,
        window_len: u16,
        push: bool,
        payload: &mut PacketBuf,
    ) {
        debug_assert!(self.takes_continuation(seq, self.snd_una) && !payload.is_empty());
        self.stats.segs_in += 1;
        self.take_predicted(now, seq, window_len, self.snd_una, push, payload);
        self.note_input(now);
    }

    /// The payload of a segment that continues a run, taken the short way: appended to the
    /// receive queue with none of [`on_continuation`](Self::on_continuation)'s per-segment
    /// bookkeeping, which [`end_continuation_run`](Self::end_continuation_run) then does once
    /// for all the run's segments taken so (a bulk sender's burst of one connection costs one
    /// window update and one note of the peer). Call only when
    /// [`takes_continuation`](Self::takes_continuation) says so. False, with nothing done, when
    /// the segment needs `on_continuation`: the application closed, the reorder queue waits
    /// for this data, or the payload does not fit the window.
    #[inline]
    pub fn take_continued_payload(&mut self, now: Instant, push: bool, payload: &mut PacketBuf) -> bool {
        debug_assert!(!payload.is_empty());
        if self.orphaned || !self.ooo.is_empty() || payload.len() > self.receive_window() {
            return false;
        }
        self.stats.segs_in += 1;
        // What `accept_payload` does with in-order data that fits, past its checks.
        self.dup_acks_owed = 0;
        if self.deliver(payload) {
            self.owe_ack(now, !push);
        }
        true
    }

    /// The bookkeeping that [`take_continued_payload`](Self::take_continued_payload) left for
    /// the segments it took since the connection was last otherwise touched (the last of them
    /// at `last_seq`, all with the run's `window_len`), as their
    /// [`on_continuation`](Self::on_continuation) calls would have done it: their window updates
    /// differ only in the sequence number, so the last one stands for all, and the peer was
    /// heard at `now`.
    pub fn end_continuation_run(&mut self, now: Instant, last_seq: SeqNumber, window_len: u16) {
        self.update_send_window(last_seq, window_len, self.snd_una);
        self.note_input(now);
    }

    /// After any segment: the peer was heard and may have moved the connection on.
    fn note_input(&mut self, now: Instant) {
        if self.state != State::Closed {
            self.note_heard(now);
            self.note_progress(now);
        }
    }

    fn input_syn_sent(&mut self, now: Instant, seg: &TcpRepr, payload: &mut PacketBuf) {
        let rst = seg.flags.contains(TcpFlags::RST);
        let ack_ok = match seg.ack_number {
            Some(ack) => {
                if ack <= self.iss || ack > self.snd_max {
                    if !rst {
                        self.rst_pending = Some(reset_for_ack(ack));
                    }
                    return;
                }
                true
            }
            None => false,
        };
        if rst {
            if ack_ok {
                self.fail(ConnError::Refused);
            }
            return;
        }
        if !seg.flags.contains(TcpFlags::SYN) {
            return;
        }
        self.irs = seg.seq_number;
        self.rcv_nxt = seg.seq_number + 1;
        self.rcv_adv = self.rcv_nxt;
        self.apply_syn_options(seg);
        self.snd_wnd = u32::from(seg.window_len);
        self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
        self.snd_wl1 = seg.seq_number;
        self.ack_pending = true;
        if let Some(ack) = seg.ack_number.filter(|_| ack_ok) {
            self.snd_wl2 = ack;
            self.ack_new_data(now, ack, true);
            self.state = self.synchronized_state();
            self.events.insert(Events::CONNECTED | Events::WRITABLE);
            let data_seq = seg.seq_number + 1;
            let fin = seg.flags.contains(TcpFlags::FIN);
            self.accept_payload(data_seq, payload, fin, false, now);
        } else {
            // Simultaneous open: answer with SYN-ACK (rewind so the SYN goes out again with ACK).
            self.state = State::SynReceived;
            self.snd_nxt = self.iss;
            self.rto_deadline = None;
        }
    }

    fn input_synchronized(&mut self, now: Instant, seg: &TcpRepr, payload: &mut PacketBuf) {
        if let Some(ack) = self.predicted_ack(seg, payload.len()) {
            return self.input_predicted(now, seg, ack, payload);
        }
        let syn = seg.flags.contains(TcpFlags::SYN);
        let rst = seg.flags.contains(TcpFlags::RST);
        let fin = seg.flags.contains(TcpFlags::FIN);

        // A retransmitted SYN while our SYN-ACK is outstanding: send the SYN-ACK again.
        if self.state == State::SynReceived && syn && seg.ack_number.is_none() && seg.seq_number == self.irs {
            if !rst {
                self.snd_nxt = self.iss;
            }
            return;
        }
        if !self.acceptable(seg, payload.len()) {
            self.on_unacceptable(now, seg, payload.len());
            return;
        }
        if rst {
            self.on_reset(now, seg);
            return;
        }
        if syn {
            // RFC 5961 section 4.2: any SYN in a synchronized state gets a challenge ACK.
            self.challenge_ack(now);
            return;
        }
        let Some(ack) = seg.ack_number else { return };
        let syn_outstanding = self.state == State::SynReceived;
        if !self.ack_acceptable(now, ack) {
            return;
        }
        if let Some(p) = self.persist.as_deref_mut() {
            p.unanswered = 0;
        }
        if self.sack_ok {
            self.note_sack_blocks(seg, ack);
        }
        self.note_ack_for_recovery(seg, ack, payload.len());
        let fin_acked = if ack > self.snd_una { self.ack_new_data(now, ack, syn_outstanding) } else { false };
        self.update_send_window(seg.seq_number, seg.window_len, ack);
        if fin_acked && self.on_fin_acked(now) {
            return;
        }
        let push = seg.flags.contains(TcpFlags::PSH);
        self.accept_payload(seg.seq_number, payload, fin, push, now);
    }

    /// Header prediction (Van Jacobson's, as in BSD's `tcp_input`): the segment an established
    /// connection expects next: it starts at RCV.NXT, carries no SYN, RST or FIN and no SACK
    /// blocks, and either acknowledges new data (its ACK in (SND.UNA, SND.MAX]) or carries data
    /// with an ACK in [SND.UNA, SND.MAX], while no recovery, window probe or SACK scoreboard is
    /// active. For such a segment every check of the general path is known to pass (it is
    /// acceptable, its ACK is, it is no duplicate and starts no recovery), so
    /// [`input_predicted`](Self::input_predicted) skips them. Returns its ACK number.
    pub(super) fn predicted_ack(&self, seg: &TcpRepr, payload_len: usize) -> Option<SeqNumber> {
        let ack = seg.ack_number?;
        let expected = self.state == State::Established
            && seg.seq_number == self.rcv_nxt
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::RST | TcpFlags::FIN)
            && seg.sack.is_none()
            && self.recovery.is_none()
            && self.persist.is_none()
            && self.sacked.is_empty()
            && ack >= self.snd_una
            && ack <= self.snd_max
            && (ack > self.snd_una || payload_len > 0);
        expected.then_some(ack)
    }

    /// A segment [`predicted_ack`](Self::predicted_ack) recognised: what the general path does
    /// with it, without the checks it is known to pass.
    fn input_predicted(&mut self, now: Instant, seg: &TcpRepr, ack: SeqNumber, payload: &mut PacketBuf) {
        if ack > self.snd_una {
            self.dup_acks = 0;
            if self.ack_new_data(now, ack, false) && self.on_fin_acked(now) {
                return;
            }
        }
        let push = seg.flags.contains(TcpFlags::PSH);
        self.take_predicted(now, seg.seq_number, seg.window_len, ack, push, payload);
    }

    /// The rest of a predicted segment, once its ACK acknowledged what it had to: the window
    /// update and the payload.
    fn take_predicted(
        &mut self,
        now: Instant,
        seq: SeqNumber,
        window_len: u16,
        ack: SeqNumber,
        push: bool,
        payload: &mut PacketBuf,
    ) {
        self.update_send_window(seq, window_len, ack);
        if !payload.is_empty() {
            self.accept_payload(seq, payload, false, push, now);
        }
    }

    /// A segment outside the receive window: acknowledged (unless it is a reset), and a FIN in
    /// TIME-WAIT restarts 2*MSL (the peer did not get our last ACK). A data segment is answered
    /// every time, as Linux does (`tcp_oow_rate_limited`): two ends cannot ping-pong ACKs over
    /// data, and a sender resending what we already hold (its ACKs lost, its timer fired) learns
    /// from that answer alone that it can stop. Rate-limiting it left both ends of an echo
    /// resending into each other's old data for minutes.
    fn on_unacceptable(&mut self, now: Instant, seg: &TcpRepr, payload_len: usize) {
        self.stats.rare().out_of_window += 1;
        if seg.flags.contains(TcpFlags::RST) {
            return;
        }
        if payload_len > 0 && !seg.flags.contains(TcpFlags::SYN) {
            self.ack_pending = true;
        } else {
            self.out_of_window_ack(now);
        }
        if self.state == State::TimeWait && seg.flags.contains(TcpFlags::FIN) {
            self.enter_time_wait(now);
        }
    }

    /// RFC 5961 section 3.2: a reset in the window resets only on an exact match; otherwise it
    /// gets a challenge ACK.
    fn on_reset(&mut self, now: Instant, seg: &TcpRepr) {
        if seg.seq_number == self.rcv_nxt {
            match self.state {
                State::Closing | State::LastAck | State::TimeWait => self.set_closed(),
                _ => self.fail(ConnError::Reset),
            }
        } else {
            self.challenge_ack(now);
        }
    }

    /// Whether `ack` may be processed. In SYN-RECEIVED it must acknowledge our SYN (then the
    /// connection is established; otherwise a reset is sent); then RFC 5961 section 5.2:
    /// acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.MAX], others are answered.
    fn ack_acceptable(&mut self, now: Instant, ack: SeqNumber) -> bool {
        if self.state == State::SynReceived {
            if ack <= self.snd_una || ack > self.snd_max {
                self.rst_pending = Some(reset_for_ack(ack));
                return false;
            }
            self.state = self.synchronized_state();
            self.events.insert(Events::CONNECTED | Events::WRITABLE);
        }
        if ack > self.snd_max {
            self.out_of_window_ack(now);
            return false;
        }
        if ack < self.snd_una - self.max_snd_wnd.max(1) as usize {
            self.challenge_ack(now);
            return false;
        }
        true
    }

    /// Records the segment's SACK blocks: only blocks of data in flight above the ACK (D-SACK
    /// and stale blocks go).
    fn note_sack_blocks(&mut self, seg: &TcpRepr, ack: SeqNumber) {
        for &(left, right) in seg.sack.ranges() {
            if left > ack && left > self.snd_una && left < right && right <= self.snd_max {
                self.sacked.add(left, right);
            }
        }
    }

    /// Window update (RFC 9293 3.10.7.4, fifth check): only from newer segments. A window that
    /// opened far enough ends the zero-window probing.
    fn update_send_window(&mut self, seq: SeqNumber, window_len: u16, ack: SeqNumber) {
        if self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack) {
            self.snd_wnd = u32::from(window_len) << self.snd_wscale;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
            if self.persist.is_some() && self.usable_window() >= self.send_mss().min(self.tx.len()).max(1) {
                let p = self.persist_mut();
                p.deadline = None;
                p.backoff = 0;
            }
        }
    }

    /// Our FIN was acknowledged: FIN-WAIT-1 -> FIN-WAIT-2, CLOSING -> TIME-WAIT, LAST-ACK ->
    /// closed. True when the connection is closed (nothing more to process).
    fn on_fin_acked(&mut self, now: Instant) -> bool {
        match self.state {
            State::FinWait1 => {
                self.state = State::FinWait2;
                if self.orphaned {
                    self.time_wait_deadline = Some(now + self.cfg.fin_wait2_timeout);
                }
            }
            State::Closing => self.enter_time_wait(now),
            State::LastAck => {
                self.set_closed();
                return true;
            }
            _ => {}
        }
        false
    }

    /// RFC 9293 3.10.7.4 first check: does any part of the segment fall in the receive window?
    fn acceptable(&self, seg: &TcpRepr, payload_len: usize) -> bool {
        let seg_len = seg.segment_len(payload_len);
        let wnd = self.rcv_adv.since(self.rcv_nxt);
        let seq = seg.seq_number;
        let right = self.rcv_nxt + wnd;
        match (seg_len, wnd) {
            (0, 0) => seq == self.rcv_nxt,
            // Up to the right edge inclusive, as Linux (`tcp_sequence`): a peer that filled our
            // window sends its ACKs at that edge.
            (0, _) => seq.in_window(self.rcv_nxt, right) || seq == right,
            // No data fits a zero window, but "special allowance should be made to accept valid
            // ACKs" (RFC 9293 3.10.7.4): a segment at RCV.NXT is processed for its ACK and its
            // window, and its data dropped for lack of room. Else two ends whose windows are
            // both shut, each sending data, would never see the other's ACKs.
            (_, 0) => seq == self.rcv_nxt,
            (len, _) => {
                seq.in_window(self.rcv_nxt, right) || (seq + (len - 1)).in_window(self.rcv_nxt, right)
            }
        }
    }

    fn challenge_ack(&mut self, now: Instant) {
        self.stats.rare().challenge_acks += 1;
        self.out_of_window_ack(now);
    }

    /// Answers a segment that does not fit our state with an ACK, at most once per
    /// `OOW_ACK_INTERVAL`: two ends that disagree (or a flood of forged segments) cannot make us
    /// ping-pong ACKs forever (cf. RFC 5961 section 7).
    fn out_of_window_ack(&mut self, now: Instant) {
        let rare = self.stats.rare();
        if rare.last_oow_ack.is_some_and(|t| now.saturating_since(t) < OOW_ACK_INTERVAL) {
            rare.oow_acks_suppressed += 1;
            return;
        }
        rare.last_oow_ack = Some(now);
        self.ack_pending = true;
    }

    /// Fast retransmit and NewReno partial ACKs (RFC 5681 section 3.2, RFC 6582), called before
    /// SND.UNA moves: the third duplicate ACK (or, with SACK, three segments' worth SACKed above
    /// the hole) starts a recovery up to SND.MAX; in recovery, each ACK that moves SND.UNA short
    /// of that point (a receiver that kept what followed the hole) retransmits the next hole at
    /// once, instead of waiting for the retransmission timeout. The head's retransmission counts
    /// as lost when SACK blocks show that data sent after it arrived (the link keeps order), or
    /// when the recovery timer expires (`timers.rs`): it goes again, instead of a 200 ms
    /// timeout and a go-back-N of the window. Congestion control stays absent by design.
    fn note_ack_for_recovery(&mut self, seg: &TcpRepr, ack: SeqNumber, payload_len: usize) {
        if self.frto() != Frto::Off && self.judge_timeout(ack, self.is_duplicate_ack(seg, ack, payload_len)) {
            return;
        }
        if ack > self.snd_una {
            self.dup_acks = 0;
            let Some(r) = self.recovery.as_deref_mut() else {
                if self.sack_says_lost(ack) {
                    self.start_recovery(ack);
                }
                return;
            };
            r.backoff = 0;
            r.deadline = None;
            if r.guard.is_some_and(|guard| ack > guard) {
                r.guard = None;
            }
            match r.recover {
                Some(recover) if ack >= recover => r.recover = None,
                Some(_) => {
                    r.rexmit_next = r.rexmit_next.max(ack);
                    self.rexmit_due = true;
                }
                None => {
                    if self.sack_says_lost(ack) {
                        self.start_recovery(ack);
                    }
                }
            }
            return;
        }
        if !self.is_duplicate_ack(seg, ack, payload_len) {
            return;
        }
        self.dup_acks = self.dup_acks.saturating_add(1);
        let in_recovery = self.in_recovery();
        let r = match self.recovery.as_deref_mut() {
            Some(r) if in_recovery => r,
            guarded => {
                // After a timeout, duplicates may come from our own resends (RFC 6582 3.2), but
                // SACK blocks report data the peer holds: those start a recovery at once.
                let guarded = guarded.is_some_and(|r| r.guard.is_some());
                let by_dups = self.dup_acks == super::DUP_ACK_THRESHOLD && !guarded;
                if by_dups || self.sack_says_lost(ack) {
                    self.start_recovery(ack);
                }
                return;
            }
        };
        let sent_later_arrived = self.sacked.high().is_some_and(|high| high > r.rexmit_mark);
        if !self.rexmit_due && r.rexmit_at.is_some() && sent_later_arrived {
            // Data sent after the head's retransmission arrived, the head did not: it was lost
            // too (the link keeps order). Everything not SACKed below the highest block goes again.
            self.rexmit_due = true;
            r.rexmit_next = self.snd_una;
            self.stats.rare().lost_retransmits += 1;
        } else if self.sacked.high().is_some_and(|high| high > r.rexmit_next) {
            // New SACK blocks revealed holes beyond those retransmitted.
            self.rexmit_due = true;
        }
    }

    /// A duplicate ACK: it moves nothing, carries nothing, keeps a window open, and data is in
    /// flight. A zero window is no duplicate (RFC 5681 section 2: a duplicate keeps the window):
    /// a receiver out of room answers each segment it cannot take, and resending into its shut
    /// window would only draw the next answer, at the speed of the round trip.
    fn is_duplicate_ack(&self, seg: &TcpRepr, ack: SeqNumber, payload_len: usize) -> bool {
        ack == self.snd_una
            && payload_len == 0
            && seg.window_len != 0
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::FIN)
            && self.snd_una != self.snd_max
    }

    /// F-RTO's verdict on an ACK after a first timeout (RFC 5682 steps 2 and 3; the ACK is seen
    /// before SND.UNA moves). A duplicate says the peer misses data: the timeout was real, and
    /// go-back-N resends the window (the duplicate is used up here). The first ACK that moves
    /// SND.UNA short of SND.MAX at the timeout lets new data go, so that the second can tell:
    /// if that one moves SND.UNA too, it acknowledges data sent once only, and the timeout was
    /// spurious. With no new data to send, the first ACK cannot be judged: go-back-N. Returns
    /// true when the ACK needs no further loss processing.
    fn judge_timeout(&mut self, ack: SeqNumber, duplicate: bool) -> bool {
        let advanced = ack > self.snd_una;
        if !advanced && !duplicate {
            // A window update or data: no verdict.
            return false;
        }
        let timeout_max = self.recovery.as_ref().and_then(|r| r.guard);
        let unsent = self.tx.len() > self.snd_nxt.since(self.snd_una);
        let stage = self.frto();
        let (next, go_back) = if !advanced {
            (Frto::Off, true)
        } else if stage == Frto::SecondAck {
            // It acknowledges data that was sent once only.
            self.stats.rare().spurious_timeouts += 1;
            (Frto::Off, false)
        } else if timeout_max.is_none_or(|max| ack >= max) {
            // All that was in flight at once: the peer may have missed the head alone. Nothing
            // is left to judge, nor to resend.
            (Frto::Off, false)
        } else if unsent {
            (Frto::SecondAck, false)
        } else {
            (Frto::Off, true)
        };
        if go_back {
            self.snd_nxt = self.snd_una;
        }
        self.recovery_mut().frto = next;
        duplicate
    }

    /// RFC 6675's IsLost for the segment at `una`: three segments' worth SACKed above it (a
    /// loss seen even when fewer than three segments follow it, or when the ACK that brings the
    /// blocks also moves SND.UNA).
    fn sack_says_lost(&self, una: SeqNumber) -> bool {
        let above: usize =
            self.sacked.ranges().iter().filter(|(_, r)| *r > una).map(|(l, r)| r.since((*l).max(una))).sum();
        above >= usize::from(super::DUP_ACK_THRESHOLD) * self.send_mss()
    }

    /// Fast recovery from the hole at `una` up to SND.MAX.
    fn start_recovery(&mut self, una: SeqNumber) {
        let snd_max = self.snd_max;
        let r = self.recovery_mut();
        r.recover = Some(snd_max);
        r.rexmit_next = una;
        self.rexmit_due = true;
    }

    /// Processes an ACK that advances SND.UNA to `ack`. Returns true when it acknowledges our FIN.
    pub(super) fn ack_new_data(&mut self, now: Instant, ack: SeqNumber, syn_outstanding: bool) -> bool {
        let mut acked = ack.since(self.snd_una);
        if syn_outstanding {
            acked = acked.saturating_sub(1);
        }
        let fin_seq = self.data_end();
        let fin_acked = self.fin_queued && ack == fin_seq + 1;
        if fin_acked {
            acked = acked.saturating_sub(1);
        }
        let data_acked = acked.min(self.tx.len());
        self.tx.ack(data_acked);
        self.stats.bytes_acked += data_acked as u64;
        self.snd_una = ack;
        if !self.sacked.is_empty() {
            self.sacked.advance(ack);
        }
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        if let Some(probe) = self.rtt_probe {
            if ack >= probe.end {
                self.rtt.sample(now.saturating_since(probe.sent));
                self.rtt_probe = None;
            }
        }
        if self.retries > 0 && data_acked > 0 {
            self.rtt.reset_backoff();
        }
        self.retries = 0;
        self.rto_deadline = if self.snd_una == self.snd_max { None } else { Some(now + self.rtt.rto()) };
        if data_acked > 0 {
            self.events.insert(Events::WRITABLE);
        }
        fin_acked
    }

    /// The sequence number just past the last queued data byte (where our FIN goes).
    pub(super) fn data_end(&self) -> SeqNumber {
        self.snd_una + self.tx.len()
    }

    /// Queues in-order payload (and whatever the reorder queue held right after it), keeps
    /// out-of-order payload in the reorder queue, and processes a FIN that follows the data.
    /// `push`: the segment carried PSH (it ends what the peer's application wrote).
    fn accept_payload(
        &mut self,
        seq: SeqNumber,
        payload: &mut PacketBuf,
        mut fin: bool,
        push: bool,
        now: Instant,
    ) {
        let fin_seq_if_all = seq + payload.len();
        if !payload.is_empty() {
            if self.orphaned {
                // The application closed and will never read: tell the peer (as Linux does).
                self.abort();
                return;
            }
            if !self.state.peer_may_send() {
                // Data after the peer's FIN: nothing to deliver, just acknowledge.
                self.ack_pending = true;
                return;
            }
            if seq > self.rcv_nxt {
                self.hold_out_of_order(seq, payload, fin);
                return;
            }
            // In-order data moves the ACK: duplicates of the old one would only mislead.
            self.dup_acks_owed = 0;
            let dup = self.rcv_nxt.since(seq);
            if dup >= payload.len() {
                // All of it is old: our ACK of it was lost, or the peer probes. Answer now.
                self.ack_pending = true;
            } else {
                payload.advance(dup);
                let room = self.receive_window();
                // Only the end of a write may draw an answer worth waiting for; within a
                // stream the next segment is already coming (and a burst draws one ACK).
                let mut at_once = !push;
                if payload.len() > room {
                    payload.truncate(room);
                    // The FIN lies beyond what we accepted; the peer will send it again.
                    fin = false;
                    at_once = true;
                }
                if !self.deliver(payload) {
                    return;
                }
                if !self.ooo.is_empty() {
                    // A hole filled: the sender learns at once (RFC 5681 section 4.2).
                    at_once = true;
                    fin |= self.deliver_reordered();
                }
                self.owe_ack(now, at_once);
            }
        } else if fin && fin_seq_if_all > self.rcv_nxt {
            self.stats.rare().out_of_order += 1;
            self.ack_pending = true;
            self.ooo.note_fin(fin_seq_if_all);
            return;
        }
        if !fin {
            return;
        }
        if (fin_seq_if_all == self.rcv_nxt || self.ooo.take_fin_at(self.rcv_nxt)) && !self.fin_received {
            self.rcv_nxt += 1;
            self.fin_received = true;
            self.ack_pending = true;
            self.events.insert(Events::PEER_CLOSED | Events::READABLE);
            match self.state {
                State::SynReceived | State::Established => self.state = State::CloseWait,
                // Our FIN is not acknowledged yet (else we would be in FIN-WAIT-2): simultaneous close.
                State::FinWait1 => self.state = State::Closing,
                State::FinWait2 => self.enter_time_wait(now),
                _ => {}
            }
        } else if fin_seq_if_all > self.rcv_nxt {
            self.stats.rare().out_of_order += 1;
            self.ack_pending = true;
        } else if self.state == State::TimeWait {
            self.ack_pending = true;
            self.enter_time_wait(now);
        }
    }

    /// New in-order data was queued: acknowledge it on this dispatch, or let the ACK wait up to
    /// `ack_delay` for data of ours to carry it (the application's answer to a request). Only a
    /// lone segment that ends a write (PSH) waits: the second in a row is acknowledged at once
    /// (RFC 5681 section 4.2: at least every second full-sized segment), and so is data that
    /// leaves less than two of our segments of window, which a sender cannot follow up without
    /// our ACK. Segments inside a stream are acknowledged per burst as before: waiting for their
    /// successor would only cost a timer per burst.
    fn owe_ack(&mut self, now: Instant, at_once: bool) {
        if self.ack_pending {
            // Due already: a further segment only says so again (a run's every segment).
            return;
        }
        // The first segment owed an ACK: none is pending or delayed yet.
        let first_owed = self.delayed_ack_at.is_none();
        if let Some(delay) = self.cfg.ack_delay.filter(|_| !at_once && first_owed) {
            if self.receive_window() >= 2 * usize::from(self.cfg.mss) {
                self.delayed_ack_at = Some(now + delay);
                return;
            }
        }
        self.ack_pending = true;
    }

    /// Appends in-order payload (trimmed to the window) to the receive queue; false when the
    /// receive budget refused its storage (it stays in its frame, dropped with the burst): an ACK
    /// is then due, and the peer sends the data again once windows reopen.
    fn deliver(&mut self, payload: &mut PacketBuf) -> bool {
        let n = payload.len();
        if n == 0 {
            return true;
        }
        if !self.rx.push(payload) {
            self.ack_pending = true;
            return false;
        }
        self.advance_received(n);
        true
    }

    /// Accounts for `n` bytes appended to the receive queue.
    fn advance_received(&mut self, n: usize) {
        self.rcv_nxt += n;
        self.stats.bytes_received += n as u64;
        self.events.insert(Events::READABLE);
    }

    /// Moves what the reorder queue holds right after `rcv_nxt` to the receive queue. Returns
    /// true when a FIN held there is now next (the caller processes it).
    fn deliver_reordered(&mut self) -> bool {
        while let Some(mut p) = self.ooo.pop_ready(self.rcv_nxt) {
            // Held bytes lay inside the window we advertised, so they fit; never trust that.
            let room = self.receive_window();
            if p.len() > room {
                p.truncate(room);
            }
            // Admitted to the receive memory when it arrived: moved, not charged again.
            let n = p.len();
            self.rx.push_admitted(&mut p);
            self.advance_received(n);
        }
        self.ooo.fin_is_next(self.rcv_nxt)
    }

    /// An out-of-order segment: kept in the reorder queue (the part inside the window we
    /// advertised), and answered at once with a duplicate ACK (a sender's fast retransmit).
    fn hold_out_of_order(&mut self, seq: SeqNumber, payload: &mut PacketBuf, mut fin: bool) {
        self.stats.rare().out_of_order += 1;
        self.ack_pending = true;
        self.dup_acks_owed = (self.dup_acks_owed + 1).min(super::DUP_ACKS_PER_BURST);
        let right = self.rcv_nxt + self.receive_window();
        if seq >= right {
            return;
        }
        let room = right.since(seq);
        if payload.len() > room {
            payload.truncate(room);
            fin = false;
        }
        let end = seq + payload.len();
        match self.ooo.insert(seq, std::mem::take(payload), self.rx.budget()) {
            Insert::Stored => self.stats.rare().reordered += 1,
            Insert::Duplicate => {}
            Insert::TooManyRanges | Insert::NoMemory => {
                self.stats.rare().reorder_drops += 1;
                return;
            }
        }
        if fin {
            self.ooo.note_fin(end);
        }
    }

    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.rto_deadline = None;
        self.stop_persist_timer();
        self.time_wait_deadline = Some(now + self.cfg.time_wait);
    }
}

/// `<SEQ=SEG.ACK><CTL=RST>`: the reset for an unacceptable ACK (RFC 9293 3.10.7.3).
fn reset_for_ack(ack: SeqNumber) -> PendingReset {
    PendingReset { seq: ack, ack: None }
}
