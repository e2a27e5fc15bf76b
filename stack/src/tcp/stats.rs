//! A connection's counters: what every segment moves, kept inline, and the counts of events most
//! connections never see (losses, reordering, attacks, probes), on the heap from the first one,
//! so a connection's state stays small (`iface::socket_set::TCP_STATE_BYTES`). The rate limit of
//! the answers to out-of-window segments keeps its one timestamp there too, beside their counts.

use crate::time::Instant;

/// Per-connection counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Segments sent (all kinds).
    pub segs_out: u64,
    /// Segments received and accepted for processing.
    pub segs_in: u64,
    /// Payload bytes delivered in order to the receive queue.
    pub bytes_received: u64,
    /// Payload bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Segments sent again (after a timeout, go-back-N, or by fast retransmit).
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Of those, timeouts F-RTO found spurious (the ACKs were late, nothing was lost): the
    /// window in flight was not sent again.
    pub spurious_timeouts: u64,
    /// Out-of-order segments (each answered with a duplicate ACK).
    pub out_of_order: u64,
    /// Of those, segments kept in the reorder queue until the hole before them was filled.
    pub reordered: u64,
    /// Out-of-order segments dropped because the reorder queue held its most ranges.
    pub reorder_drops: u64,
    /// Segments retransmitted by fast recovery (after three duplicate ACKs, a partial ACK, or
    /// SACK blocks that revealed holes), without a timeout.
    pub fast_retransmits: u64,
    /// Of those, retransmissions sent again because duplicate ACKs kept coming for longer than
    /// a round trip after them (the retransmission was lost too).
    pub lost_retransmits: u64,
    /// Segments outside the receive window.
    pub out_of_window: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// Pure ACKs sent.
    pub pure_acks: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keepalive probes sent.
    pub keepalive_probes: u64,
    /// Out-of-window ACKs not sent because of the rate limit.
    pub oow_acks_suppressed: u64,
}

/// The counters of rare events (their meaning: [`ConnStats`]), and when the last answer to an
/// out-of-window or challenged segment went out (their rate limit: see `input.rs`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RareCounts {
    pub(super) retransmits: u64,
    pub(super) timeouts: u64,
    pub(super) spurious_timeouts: u64,
    pub(super) out_of_order: u64,
    pub(super) reordered: u64,
    pub(super) reorder_drops: u64,
    pub(super) fast_retransmits: u64,
    pub(super) lost_retransmits: u64,
    pub(super) out_of_window: u64,
    pub(super) challenge_acks: u64,
    pub(super) window_probes: u64,
    pub(super) keepalive_probes: u64,
    pub(super) oow_acks_suppressed: u64,
    /// When we last answered an out-of-window or challenged segment.
    pub(super) last_oow_ack: Option<Instant>,
}

/// A connection's counters as it keeps them.
#[derive(Debug, Clone, Default)]
pub(super) struct Counts {
    pub(super) segs_out: u64,
    pub(super) segs_in: u64,
    pub(super) bytes_received: u64,
    pub(super) bytes_acked: u64,
    pub(super) pure_acks: u64,
    rare: Option<Box<RareCounts>>,
}

impl Counts {
    /// The rare-event counters, to count one (allocated at the first).
    pub(super) fn rare(&mut self) -> &mut RareCounts {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Segments sent again so far.
    pub(super) fn retransmits(&self) -> u64 {
        self.rare.as_ref().map_or(0, |r| r.retransmits)
    }

    /// All counters.
    pub(super) fn snapshot(&self) -> ConnStats {
        let r = self.rare.as_deref().copied().unwrap_or_default();
        ConnStats {
            segs_out: self.segs_out,
            segs_in: self.segs_in,
            bytes_received: self.bytes_received,
            bytes_acked: self.bytes_acked,
            retransmits: r.retransmits,
            timeouts: r.timeouts,
            spurious_timeouts: r.spurious_timeouts,
            out_of_order: r.out_of_order,
            reordered: r.reordered,
            reorder_drops: r.reorder_drops,
            fast_retransmits: r.fast_retransmits,
            lost_retransmits: r.lost_retransmits,
            out_of_window: r.out_of_window,
            challenge_acks: r.challenge_acks,
            pure_acks: self.pure_acks,
            window_probes: r.window_probes,
            keepalive_probes: r.keepalive_probes,
            oow_acks_suppressed: r.oow_acks_suppressed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_counters_appear_in_the_snapshot_once_counted() {
        let mut c = Counts { segs_out: 3, pure_acks: 1, ..Counts::default() };
        assert_eq!(c.snapshot(), ConnStats { segs_out: 3, pure_acks: 1, ..ConnStats::default() });
        assert_eq!(c.retransmits(), 0);
        c.rare().retransmits += 2;
        c.rare().out_of_window += 1;
        let s = c.snapshot();
        assert_eq!((s.retransmits, s.out_of_window, s.segs_out), (2, 1, 3));
        assert_eq!(c.retransmits(), 2);
    }
}
