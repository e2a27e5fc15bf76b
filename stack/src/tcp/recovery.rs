//! What a connection keeps for loss recovery (RFC 5681 fast retransmit, RFC 6582 NewReno, SACK
//! holes, and F-RTO after a timeout, RFC 5682; see the module documentation of `tcp`): created
//! at its first fast recovery or retransmission timeout, kept from then on. Most connections never lose a
//! segment; theirs holds one word for it (`iface::socket_set::TCP_STATE_BYTES`). The logic stays
//! with input (`input.rs`), output (`output.rs`) and timers (`timers.rs`).

use super::connection::Connection;
use super::SeqNumber;
use crate::time::Instant;

/// Loss recovery state (see the module documentation).
#[derive(Debug, Clone)]
pub(super) struct Recovery {
    /// In fast recovery until SND.UNA reaches this (SND.MAX when it began).
    pub(super) recover: Option<SeqNumber>,
    /// No fast retransmit for duplicate ACKs at or below this (SND.MAX at the last timeout,
    /// whose go-back-N resends draw duplicate ACKs of their own: RFC 6582 section 3.2 step 2).
    /// (Cleared once SND.UNA passes it, so sequence-number wrap-around cannot revive it.)
    pub(super) guard: Option<SeqNumber>,
    /// In fast recovery: when the head's retransmission counts as lost if still unacknowledged
    /// (no duplicate ACK may come to tell: a window full of SACKed data sends nothing more).
    pub(super) deadline: Option<Instant>,
    /// Consecutive expiries of `deadline` without progress (each doubles the next).
    pub(super) backoff: u32,
    /// SND.MAX when the head was last retransmitted: SACKed data beyond it was sent later.
    pub(super) rexmit_mark: SeqNumber,
    /// In fast recovery with SACK: holes below this were retransmitted already.
    pub(super) rexmit_next: SeqNumber,
    /// When the segment at SND.UNA was last retransmitted in fast recovery (to see that
    /// retransmission lost: see `note_ack_for_recovery`).
    pub(super) rexmit_at: Option<Instant>,
    /// Where F-RTO stands after a retransmission timeout.
    pub(super) frto: Frto,
}

/// F-RTO (RFC 5682), after a first retransmission timeout: only the segment at SND.UNA went
/// again, and the next two ACKs tell a spurious timeout (the ACKs were late: the data got
/// through) from a loss. Spurious: sending goes on with new data, nothing in flight is sent
/// twice. A loss (a duplicate ACK): go-back-N, as without F-RTO, one round trip later. Without
/// it a late ACK cost a whole window of duplicates, which on a starved worker lengthen the
/// queue that made the ACKs late (`docs/benchmarks.md`, 4,096 connections).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frto {
    /// No timeout being judged.
    Off,
    /// The head went again; waiting for the first ACK after the timeout.
    FirstAck,
    /// The first ACK moved SND.UNA and new data went out; waiting for the second.
    SecondAck,
}

impl Recovery {
    /// The state of a connection that never recovered yet: `iss` marks nothing retransmitted.
    fn new(iss: SeqNumber) -> Self {
        Recovery {
            recover: None,
            guard: None,
            deadline: None,
            backoff: 0,
            rexmit_mark: iss,
            rexmit_next: iss,
            rexmit_at: None,
            frto: Frto::Off,
        }
    }
}

impl Connection {
    /// The loss recovery state, created at its first use.
    pub(super) fn recovery_mut(&mut self) -> &mut Recovery {
        let iss = self.iss;
        self.recovery.get_or_insert_with(|| Box::new(Recovery::new(iss)))
    }

    /// True in fast recovery (SND.UNA has not reached the point where it ends).
    pub(super) fn in_recovery(&self) -> bool {
        self.recovery.as_ref().is_some_and(|r| r.recover.is_some())
    }

    /// Where F-RTO stands (off for a connection that never timed out).
    pub(super) fn frto(&self) -> Frto {
        self.recovery.as_ref().map_or(Frto::Off, |r| r.frto)
    }

    /// When the head's retransmission counts as lost, in fast recovery.
    pub(super) fn recovery_deadline(&self) -> Option<Instant> {
        self.recovery.as_ref().and_then(|r| r.deadline)
    }
}
