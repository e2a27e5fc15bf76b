//! Timers of a connection: retransmission (RFC 6298, go-back-N, retry limit), zero-window
//! persist, delayed ACK, and TIME-WAIT / orphaned FIN-WAIT-2 expiry. The owner asks `poll_at` when to come
//! back and calls `on_timer` then.

use super::connection::Connection;
use super::recovery::Frto;
use super::state::State;
use super::ConnError;
use crate::time::Instant;

/// Zero-window probes an orphaned connection sends before it gives up (see `on_persist_timeout`).
const ORPHAN_PROBES: u32 = 4;

impl Connection {
    /// The earliest time `on_timer` has work to do, if any.
    pub fn poll_at(&self) -> Option<Instant> {
        [
            self.rto_deadline,
            self.persist_deadline(),
            self.time_wait_deadline,
            self.liveness_at(),
            self.recovery_deadline(),
            self.delayed_ack_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs every timer that expired at `now`. Output (retransmissions, probes) follows on the
    /// next `dispatch`.
    pub fn on_timer(&mut self, now: Instant) {
        if self.time_wait_deadline.is_some_and(|t| now >= t) {
            self.time_wait_deadline = None;
            self.set_closed();
            return;
        }
        if self.rto_deadline.is_some_and(|t| now >= t) {
            self.rto_deadline = None;
            if let Some(r) = self.recovery.as_deref_mut() {
                r.deadline = None;
            }
            self.on_retransmit_timeout();
        }
        if self.recovery_deadline().is_some_and(|t| now >= t) {
            let unacknowledged = self.snd_una != self.snd_max && self.snd_wnd > 0;
            let snd_una = self.snd_una;
            let r = self.recovery_mut();
            r.deadline = None;
            if r.recover.is_some() && unacknowledged {
                // The head's retransmission drew no ACK within a round trip: lost as well.
                r.backoff += 1;
                r.rexmit_next = snd_una;
                self.rexmit_due = true;
                self.stats.rare().lost_retransmits += 1;
            }
        }
        if self.persist_deadline().is_some_and(|t| now >= t) {
            self.on_persist_timeout(now);
        }
        if self.delayed_ack_at.is_some_and(|t| now >= t) {
            // Nothing of ours carried it in time: it goes alone.
            self.delayed_ack_at = None;
            self.ack_pending = true;
        }
        if self.state != State::Closed {
            self.on_liveness_timer(now);
        }
    }

    fn on_retransmit_timeout(&mut self) {
        if self.snd_una == self.snd_max {
            return;
        }
        self.stats.rare().timeouts += 1;
        // A peer that answered the probe this timeout sent into its zero window (below) is
        // alive and only slow to read: like answered zero-window probes, that never times out.
        let answered_probe = self.state.is_synchronized()
            && self.snd_wnd == 0
            && self.probes_unanswered() == 0
            && self.retries > 0;
        if !answered_probe {
            self.retries += 1;
        }
        let limit = match self.state {
            State::SynSent | State::SynReceived => self.cfg.max_syn_retries,
            _ => self.cfg.max_retries,
        };
        if self.retries > limit {
            if self.state.is_synchronized() || self.state == State::SynReceived {
                self.rst_pending = Some(self.pending_reset());
            }
            self.fail(ConnError::TimedOut);
            return;
        }
        self.rtt.backoff();
        let window_below_a_segment = (self.snd_wnd as usize) < self.send_mss().min(self.tx.len()).max(1);
        if self.state.is_synchronized() && window_below_a_segment {
            // The window shut (or shrank below a segment) with data in flight: the persist
            // timer is off while data is in flight, so this timeout probes instead (`SND.UNA-1`,
            // no data). The answer carries the window; it may have reopened in an update that
            // was lost. Go-back-N follows once the window allows.
            self.probe_due = true;
        }
        // Karn: the segment being timed will be retransmitted, so its sample is ambiguous.
        self.rtt_probe = None;
        // F-RTO (RFC 5682) on a first timeout of data in flight, when no SACK block already
        // tells what was lost: only the head goes again now (`retransmit_head`), the next ACKs
        // decide (`input.rs`). Otherwise go-back-N from the first unacknowledged byte (the SYN,
        // before the handshake ends). The duplicate ACKs those resends draw start no fast
        // retransmit (RFC 6582 3.2 step 2).
        let frto = self.retries == 1
            && self.state.is_synchronized()
            && !window_below_a_segment
            && self.sacked.is_empty();
        if !frto {
            self.snd_nxt = self.snd_una;
        }
        let snd_max = self.snd_max;
        let r = self.recovery_mut();
        r.recover = None;
        r.guard = Some(snd_max);
        r.backoff = 0;
        r.frto = if frto { Frto::FirstAck } else { Frto::Off };
        self.dup_acks = 0;
        self.rexmit_due = frto;
        // Go-back-N skips what the peer SACKed; a second timeout in a row forgets it (the
        // receiver may have reneged, RFC 2018 section 8; that costs one more timeout).
        if self.retries > 1 {
            self.sacked.clear();
        }
    }

    fn on_persist_timeout(&mut self, now: Instant) {
        self.stop_persist_timer();
        if self.snd_una != self.snd_max || !self.state.is_synchronized() {
            // Data in flight: the retransmission timer covers it.
            return;
        }
        // A closed (orphaned) connection whose peer keeps its window shut is given up after a
        // few answered probes: nobody here will read again, and the peer may be waiting for our
        // window as we wait for its (two closed echoes); Linux bounds orphans likewise.
        let backoff = self.persist.as_ref().map_or(0, |p| p.backoff);
        let orphan_given_up = self.orphaned && backoff >= ORPHAN_PROBES;
        if self.probes_unanswered() > self.cfg.max_retries || orphan_given_up {
            self.rst_pending = Some(self.pending_reset());
            self.fail(ConnError::TimedOut);
            return;
        }
        self.probe_due = true;
        let backoff = (backoff + 1).min(16);
        let interval = (self.rtt.rto() * (1u32 << backoff.min(6))).min(self.cfg.rto_max);
        let p = self.persist_mut();
        p.backoff = backoff;
        p.deadline = Some(now + interval);
    }
}
