//! A one-line picture of a connection's protocol state, for finding out why a connection
//! lingers (the backend logs the connections still open when a guest goes away; the soak lists
//! what was not released). For people, not programs: the wording may change.

use crate::time::Instant;
use std::fmt::Write;

use super::connection::Connection;

impl Connection {
    /// State, sequence spaces (relative to the initial sequence numbers), queues, windows, and
    /// each armed timer as the time left from `now`.
    pub fn describe(&self, now: Instant) -> String {
        let mut s = String::with_capacity(256);
        let sent = |seq: super::SeqNumber| seq.since(self.iss);
        let _ = write!(
            s,
            "{:?} {} -> {}{} snd una/nxt/max {}/{}/{} queued {}{} wnd {} | rcv nxt {} wnd {} queued {} ooo {}{}",
            self.state,
            self.local,
            self.remote,
            if self.orphaned { " orphaned" } else { "" },
            sent(self.snd_una),
            sent(self.snd_nxt),
            sent(self.snd_max),
            self.tx.len(),
            if self.fin_queued { "+fin" } else { "" },
            self.snd_wnd,
            self.rcv_nxt.since(self.irs),
            self.rcv_adv.since(self.rcv_nxt),
            self.rx.len(),
            self.ooo.bytes(),
            if self.fin_received { " fin" } else { "" },
        );
        let left = |t: Option<Instant>| t.map(|t| t.saturating_since(now));
        let timers = [
            ("rto", left(self.rto_deadline)),
            ("persist", left(self.persist_deadline())),
            ("recovery", left(self.recovery_deadline())),
            ("time-wait", left(self.time_wait_deadline)),
            ("keepalive", left(self.live.as_ref().and_then(|l| l.keepalive_deadline))),
        ];
        for (name, t) in timers {
            if let Some(t) = t {
                let _ = write!(s, " | {name} in {t:?}");
            }
        }
        let stats = self.stats.snapshot();
        let _ = write!(
            s,
            " | rto {:?} retries {} probes {} (backoff {}) | segs in/out {}/{} rexmit {} timeouts {} oow {} challenges {} suppressed {}",
            self.rtt.rto(),
            self.retries,
            self.probes_unanswered(),
            self.persist.as_ref().map_or(0, |p| p.backoff),
            stats.segs_in,
            stats.segs_out,
            stats.retransmits,
            stats.timeouts,
            stats.out_of_window,
            stats.challenge_acks,
            stats.oow_acks_suppressed,
        );
        if self.rexmit_due || self.in_recovery() || !self.sacked.is_empty() {
            let _ = write!(
                s,
                " | rexmit_due {} recover {:?} sacked {} rexmit_next {}",
                self.rexmit_due,
                self.recovery.as_ref().and_then(|r| r.recover).map(sent),
                !self.sacked.is_empty(),
                self.recovery.as_ref().map_or(0, |r| sent(r.rexmit_next))
            );
        }
        let _ = write!(s, " | tx {}", self.tx.describe());
        if let Some(e) = self.error {
            let _ = write!(s, " | error {e}");
        }
        s
    }
}
