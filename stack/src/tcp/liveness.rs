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

use super::connection::Connection;
use super::state::State;
use super::ConnError;
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
    pub(super) una_seen: Option<super::SeqNumber>,
}

impl Liveness {
    /// Stops every liveness timer (the connection is closed).
    pub(super) fn stop(&mut self) {
        self.keepalive_deadline = None;
        self.keepalive_due = false;
        self.stalled_since = None;
        self.una_seen = None;
    }

    /// The settings of `cfg`, or `None` when neither keepalive nor a user timeout is on (most
    /// connections: their state then holds one word for this); the timers start with the
    /// first segment heard and the first data.
    pub(super) fn from_config(cfg: &super::TcpConfig) -> Option<Box<Self>> {
        Self::with(cfg.keepalive, cfg.user_timeout)
    }

    fn with(keepalive: Option<KeepAlive>, user_timeout: Option<Duration>) -> Option<Box<Self>> {
        let keepalive = keepalive.map(|k| KeepAlive { count: k.count.max(1), ..k });
        let user_timeout = user_timeout.filter(|t| !t.is_zero());
        (keepalive.is_some() || user_timeout.is_some())
            .then(|| Box::new(Liveness { keepalive, user_timeout, ..Liveness::default() }))
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
        let stalled = self.live.as_ref().map(|l| (l.stalled_since, l.una_seen));
        self.live = Liveness::with(keepalive, user_timeout);
        if let Some(live) = self.live.as_deref_mut() {
            live.keepalive_deadline = live.keepalive.map(|k| now + k.idle);
            // A stall already under way keeps its start.
            if let Some((since, una)) = stalled {
                live.stalled_since = since;
                live.una_seen = una;
            }
        }
        self.note_progress(now);
    }

    /// The keepalive settings, if on.
    pub fn keepalive(&self) -> Option<KeepAlive> {
        self.live.as_ref().and_then(|l| l.keepalive)
    }

    /// The user timeout, if set.
    pub fn user_timeout(&self) -> Option<Duration> {
        self.live.as_ref().and_then(|l| l.user_timeout)
    }

    /// A keepalive probe is to be sent on the next output.
    pub(super) fn keepalive_due(&self) -> bool {
        self.live.as_ref().is_some_and(|l| l.keepalive_due)
    }

    /// Something arrived from the peer: it is alive.
    pub(super) fn note_heard(&mut self, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        if let Some(live) = self.live.as_deref_mut() {
            live.keepalive_sent = 0;
            live.keepalive_due = false;
            live.keepalive_deadline = live.keepalive.map(|k| now + k.idle);
        }
    }

    /// Data waiting for the peer: anything sent and unacknowledged, or queued and unsent.
    fn data_waiting(&self) -> bool {
        self.snd_una != self.snd_max || !self.tx.is_empty()
    }

    /// Tracks since when data has been waiting without progress (called on output and timers).
    pub(super) fn note_progress(&mut self, now: Instant) {
        if self.live.is_none() {
            return;
        }
        let stalled = self.state.is_synchronized() && self.data_waiting();
        let una = self.snd_una;
        let Some(live) = self.live.as_deref_mut() else { return };
        if live.user_timeout.is_none() || !stalled {
            live.stalled_since = None;
            live.una_seen = None;
            return;
        }
        if live.una_seen != Some(una) || live.stalled_since.is_none() {
            live.una_seen = Some(una);
            live.stalled_since = Some(now);
        }
    }

    /// The earliest liveness deadline.
    pub(super) fn liveness_at(&self) -> Option<Instant> {
        let live = self.live.as_deref()?;
        let user = match (live.stalled_since, live.user_timeout) {
            (Some(since), Some(t)) => Some(since + t),
            _ => None,
        };
        [live.keepalive_deadline, user].into_iter().flatten().min()
    }

    /// Runs the liveness timers at `now`; true when the connection was reset.
    pub(super) fn on_liveness_timer(&mut self, now: Instant) -> bool {
        self.note_progress(now);
        let idle =
            matches!(self.state, State::Established | State::CloseWait) && self.snd_una == self.snd_max;
        let Some(live) = self.live.as_deref_mut() else { return false };
        if let (Some(since), Some(t)) = (live.stalled_since, live.user_timeout) {
            if now >= since + t {
                return self.reset_timed_out();
            }
        }
        let Some(k) = live.keepalive else { return false };
        if live.keepalive_deadline.is_none_or(|d| now < d) {
            return false;
        }
        if !idle {
            // Not idle in the keepalive sense (handshake, closing, or data in flight).
            live.keepalive_deadline = Some(now + k.idle);
            return false;
        }
        if live.keepalive_sent >= k.count {
            return self.reset_timed_out();
        }
        live.keepalive_due = true;
        live.keepalive_sent += 1;
        live.keepalive_deadline = Some(now + k.interval);
        false
    }

    fn reset_timed_out(&mut self) -> bool {
        self.rst_pending = Some(self.pending_reset());
        self.fail(ConnError::TimedOut);
        true
    }
}

/// The five liveness socket options (one set of rules for every runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivenessOpt {
    /// `SO_KEEPALIVE` (0 or 1).
    KeepAlive,
    /// `TCP_KEEPIDLE`, seconds (1..=[`MAX_KEEP_SECS`]).
    KeepIdle,
    /// `TCP_KEEPINTVL`, seconds (1..=[`MAX_KEEP_SECS`]).
    KeepInterval,
    /// `TCP_KEEPCNT` (1..=[`MAX_KEEP_COUNT`]).
    KeepCount,
    /// `TCP_USER_TIMEOUT`, milliseconds (0: off).
    UserTimeout,
}

/// The largest keepalive idle time or interval, in seconds (Linux's limit).
pub const MAX_KEEP_SECS: u64 = 32767;
/// The largest keepalive probe count (Linux's limit).
pub const MAX_KEEP_COUNT: u64 = 127;

/// A value outside an option's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{value} is out of range for {opt:?}")]
pub struct OutOfRange {
    /// The option.
    pub opt: LivenessOpt,
    /// The value refused.
    pub value: u64,
}

/// A socket's liveness options as the application set them; the keepalive parameters are kept
/// while keepalive is off, as on Linux.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessOptions {
    /// `SO_KEEPALIVE`.
    pub keepalive: bool,
    /// `TCP_KEEPIDLE`, seconds.
    pub idle_secs: u32,
    /// `TCP_KEEPINTVL`, seconds.
    pub interval_secs: u32,
    /// `TCP_KEEPCNT`.
    pub count: u32,
    /// `TCP_USER_TIMEOUT`, milliseconds (0: off).
    pub user_timeout_ms: u32,
}

impl Default for LivenessOptions {
    fn default() -> Self {
        let k = KeepAlive::default();
        LivenessOptions {
            keepalive: false,
            idle_secs: k.idle.as_secs() as u32,
            interval_secs: k.interval.as_secs() as u32,
            count: k.count,
            user_timeout_ms: 0,
        }
    }
}

impl LivenessOptions {
    /// Sets `opt` to `value`, checking its range.
    pub fn set(&mut self, opt: LivenessOpt, value: u64) -> Result<(), OutOfRange> {
        let bad = OutOfRange { opt, value };
        let secs = |v: u64| if (1..=MAX_KEEP_SECS).contains(&v) { Ok(v as u32) } else { Err(bad) };
        match opt {
            LivenessOpt::KeepAlive if value <= 1 => self.keepalive = value == 1,
            LivenessOpt::KeepIdle => self.idle_secs = secs(value)?,
            LivenessOpt::KeepInterval => self.interval_secs = secs(value)?,
            LivenessOpt::KeepCount if (1..=MAX_KEEP_COUNT).contains(&value) => self.count = value as u32,
            LivenessOpt::UserTimeout => self.user_timeout_ms = u32::try_from(value).map_err(|_| bad)?,
            LivenessOpt::KeepAlive | LivenessOpt::KeepCount => return Err(bad),
        }
        Ok(())
    }

    /// The value of `opt`.
    pub fn get(&self, opt: LivenessOpt) -> u64 {
        match opt {
            LivenessOpt::KeepAlive => u64::from(self.keepalive),
            LivenessOpt::KeepIdle => u64::from(self.idle_secs),
            LivenessOpt::KeepInterval => u64::from(self.interval_secs),
            LivenessOpt::KeepCount => u64::from(self.count),
            LivenessOpt::UserTimeout => u64::from(self.user_timeout_ms),
        }
    }

    /// The keepalive a connection runs with (`None` while off).
    pub fn keepalive(&self) -> Option<KeepAlive> {
        self.keepalive.then(|| KeepAlive {
            idle: Duration::from_secs(u64::from(self.idle_secs)),
            interval: Duration::from_secs(u64::from(self.interval_secs)),
            count: self.count,
        })
    }

    /// The user timeout a connection runs with (`None` while 0).
    pub fn user_timeout(&self) -> Option<Duration> {
        (self.user_timeout_ms > 0).then(|| Duration::from_millis(u64::from(self.user_timeout_ms)))
    }
}

#[cfg(test)]
mod option_tests {
    use super::*;

    #[test]
    fn options_have_linux_ranges_and_defaults() {
        let mut o = LivenessOptions::default();
        assert_eq!(o.keepalive(), None);
        assert_eq!(o.user_timeout(), None);
        o.set(LivenessOpt::KeepIdle, 30).expect("idle");
        o.set(LivenessOpt::KeepAlive, 1).expect("on");
        assert_eq!(o.keepalive(), Some(KeepAlive { idle: Duration::from_secs(30), ..KeepAlive::default() }));
        for (opt, bad) in [
            (LivenessOpt::KeepAlive, 2),
            (LivenessOpt::KeepIdle, 0),
            (LivenessOpt::KeepIdle, MAX_KEEP_SECS + 1),
            (LivenessOpt::KeepInterval, 0),
            (LivenessOpt::KeepCount, 0),
            (LivenessOpt::KeepCount, 128),
            (LivenessOpt::UserTimeout, 1 << 32),
        ] {
            assert_eq!(o.set(opt, bad), Err(OutOfRange { opt, value: bad }));
        }
        o.set(LivenessOpt::UserTimeout, 2500).expect("user timeout");
        assert_eq!(o.user_timeout(), Some(Duration::from_millis(2500)));
        assert_eq!(o.get(LivenessOpt::KeepIdle), 30);
    }
}
