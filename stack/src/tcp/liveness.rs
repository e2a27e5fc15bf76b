//! Connection liveness: TCP keepalive (RFC 9293 3.8.4: `SO_KEEPALIVE`, `TCP_KEEPIDLE`,
//! `TCP_KEEPINTVL`, `TCP_KEEPCNT`) and the user timeout (RFC 5482, `TCP_USER_TIMEOUT`).
//!
//! - **Keepalive**: a synchronized connection from which nothing was heard for `idle` (and
//!   that has no data in flight: the retransmission timer covers that) sends a probe, an ACK
//!   for `SND.UNA - 1`, which a live peer must answer; then one every `interval`. Anything
//!   heard from the peer re-arms the idle timer; `count` unanswered probes reset the
//!   connection with `ETIMEDOUT`. Dead peers and silent middleboxes release their resources.
//! - **User timeout**: data that stays unacknowledged (or queued against a zero window) for
//!   longer than the timeout resets the connection with `ETIMEDOUT`, even while the peer keeps
//!   answering zero-window probes: a peer that never opens its window cannot hold the buffers
//!   forever.
//!
//! Both are off by default, as on Linux; they apply from the moment they are set.

use std::time::Duration;

use super::connection::{ConnError, Connection};
use super::state::State;
use crate::time::Instant;

/// Keepalive settings (Linux's defaults: 7200 s idle, 75 s interval, 9 probes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// Silence before the first probe (`TCP_KEEPIDLE`).
    pub idle: Duration,
    /// Between probes (`TCP_KEEPINTVL`).
    pub interval: Duration,
    /// Unanswered probes before the connection is reset (`TCP_KEEPCNT`).
    pub count: u32,
}

impl Default for KeepAlive {
    fn default() -> Self {
        KeepAlive { idle: Duration::from_secs(7200), interval: Duration::from_secs(75), count: 9 }
    }
}

/// A connection's liveness state (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    pub(super) keepalive: Option<KeepAlive>,
    pub(super) user_timeout: Option<Duration>,
    /// When the next keepalive step is due (first probe, or the next one).
    pub(super) keepalive_deadline: Option<Instant>,
    /// Probes sent since the peer was last heard.
    pub(super) keepalive_sent: u32,
    /// A keepalive probe is to be sent on the next output.
    pub(super) keepalive_due: bool,
    /// Since when data has been waiting for the peer without `SND.UNA` moving.
    pub(super) stalled_since: Option<Instant>,
    /// `SND.UNA` when `stalled_since` was last updated.
    pub(super) una_seen: Option<super::seq::SeqNumber>,
}

impl Liveness {
    /// Stops every liveness timer (the connection is closed).
    pub(super) fn stop(&mut self) {
        self.keepalive_deadline = None;
        self.keepalive_due = false;
        self.stalled_since = None;
        self.una_seen = None;
    }

    /// The settings of `cfg`; the timers start with the first segment heard and the first data.
    pub(super) fn from_config(cfg: &super::TcpConfig) -> Self {
        Liveness {
            keepalive: cfg.keepalive,
            user_timeout: cfg.user_timeout.filter(|t| !t.is_zero()),
            ..Liveness::default()
        }
    }
}

impl Connection {
    /// Sets (or clears) keepalive and the user timeout, effective now.
    pub fn set_liveness(
        &mut self,
        now: Instant,
        keepalive: Option<KeepAlive>,
        user_timeout: Option<Duration>,
    ) {
        self.live.keepalive = keepalive.map(|k| KeepAlive { count: k.count.max(1), ..k });
        self.live.user_timeout = user_timeout.filter(|t| !t.is_zero());
        self.live.keepalive_sent = 0;
        self.live.keepalive_due = false;
        self.live.keepalive_deadline = self.live.keepalive.map(|k| now + k.idle);
        self.note_progress(now);
    }

    /// The keepalive settings, if on.
    pub fn keepalive(&self) -> Option<KeepAlive> {
        self.live.keepalive
    }

    /// The user timeout, if set.
    pub fn user_timeout(&self) -> Option<Duration> {
        self.live.user_timeout
    }

    /// Something arrived from the peer: it is alive.
    pub(super) fn note_heard(&mut self, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        self.live.keepalive_sent = 0;
        self.live.keepalive_due = false;
        self.live.keepalive_deadline = self.live.keepalive.map(|k| now + k.idle);
    }

    /// Data waiting for the peer: anything sent and unacknowledged, or queued and unsent.
    fn data_waiting(&self) -> bool {
        self.snd_una != self.snd_max || !self.tx.is_empty()
    }

    /// Tracks since when data has been waiting without progress (called on output and timers).
    pub(super) fn note_progress(&mut self, now: Instant) {
        if self.live.user_timeout.is_none() || !self.state.is_synchronized() || !self.data_waiting() {
            self.live.stalled_since = None;
            self.live.una_seen = None;
            return;
        }
        if self.live.una_seen != Some(self.snd_una) || self.live.stalled_since.is_none() {
            self.live.una_seen = Some(self.snd_una);
            self.live.stalled_since = Some(now);
        }
    }

    /// The earliest liveness deadline.
    pub(super) fn liveness_at(&self) -> Option<Instant> {
        let user = match (self.live.stalled_since, self.live.user_timeout) {
            (Some(since), Some(t)) => Some(since + t),
            _ => None,
        };
        [self.live.keepalive_deadline, user].into_iter().flatten().min()
    }

    /// Runs the liveness timers at `now`; true when the connection was reset.
    pub(super) fn on_liveness_timer(&mut self, now: Instant) -> bool {
        self.note_progress(now);
        if let (Some(since), Some(t)) = (self.live.stalled_since, self.live.user_timeout) {
            if now >= since + t {
                return self.reset_timed_out();
            }
        }
        let Some(k) = self.live.keepalive else { return false };
        if self.live.keepalive_deadline.is_none_or(|d| now < d) {
            return false;
        }
        if !matches!(self.state, State::Established | State::CloseWait) || self.snd_una != self.snd_max {
            // Not idle in the keepalive sense (handshake, closing, or data in flight).
            self.live.keepalive_deadline = Some(now + k.idle);
            return false;
        }
        if self.live.keepalive_sent >= k.count {
            return self.reset_timed_out();
        }
        self.live.keepalive_due = true;
        self.live.keepalive_sent += 1;
        self.live.keepalive_deadline = Some(now + k.interval);
        false
    }

    fn reset_timed_out(&mut self) -> bool {
        self.rst_pending = Some(self.reset_repr());
        self.fail(ConnError::TimedOut);
        true
    }
}
