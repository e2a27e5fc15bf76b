//! Time as the stack sees it: a monotonic microsecond count.
//!
//! The stack never reads a clock itself (sans-IO): callers pass `now` into every `poll`.
//! Tests drive a [`VirtualClock`]; real programs use [`Instant::from_std`] against a start point.

use std::num::NonZeroU64;
use std::ops::{Add, AddAssign, Sub};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A point in time, in microseconds since an arbitrary epoch chosen by the caller.
///
/// Stored as the count plus one, so `Option<Instant>` (every timer deadline of a connection)
/// is one word: the count saturates one microsecond short of `u64::MAX` (585,000 years).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    micros_plus_one: NonZeroU64,
}

impl Default for Instant {
    fn default() -> Self {
        Instant::ZERO
    }
}

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant { micros_plus_one: NonZeroU64::MIN };

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        match NonZeroU64::new(micros.saturating_add(1)) {
            Some(micros_plus_one) => Instant { micros_plus_one },
            None => Instant::ZERO,
        }
    }

    /// An instant `millis` milliseconds after the epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Instant::from_micros(millis.saturating_mul(1000))
    }

    /// Microseconds since the epoch.
    pub const fn total_micros(self) -> u64 {
        self.micros_plus_one.get() - 1
    }

    /// Milliseconds since the epoch.
    pub const fn total_millis(self) -> u64 {
        self.total_micros() / 1000
    }

    /// The time elapsed since `start`, as a stack instant (start = epoch).
    pub fn from_std(start: std::time::Instant) -> Self {
        let elapsed = start.elapsed();
        Instant::from_micros(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros_plus_one.get().saturating_sub(earlier.micros_plus_one.get()))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        let add = u64::try_from(rhs.as_micros()).unwrap_or(u64::MAX);
        Instant::from_micros(self.total_micros().saturating_add(add))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl std::fmt::Display for Instant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let micros = self.total_micros();
        write!(f, "{}.{:06}s", micros / 1_000_000, micros % 1_000_000)
    }
}

/// A shared clock that only moves when told to: simulations and tests.
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    micros: Arc<AtomicU64>,
}

impl VirtualClock {
    /// A clock at the epoch.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.micros.load(Ordering::Acquire))
    }

    /// Moves the clock forward to `t` (never backwards).
    pub fn advance_to(&self, t: Instant) {
        self.micros.fetch_max(t.total_micros(), Ordering::AcqRel);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let d = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.micros.fetch_add(d, Ordering::AcqRel);
    }
}

/// Where a component that needs the time (a delaying link, a runtime) reads it from.
#[derive(Debug, Clone)]
pub enum Clock {
    /// Wall-clock time since the given start.
    Real(std::time::Instant),
    /// A simulation clock.
    Virtual(VirtualClock),
}

impl Clock {
    /// A real clock starting now.
    pub fn real() -> Self {
        Clock::Real(std::time::Instant::now())
    }

    /// The current time on this clock.
    pub fn now(&self) -> Instant {
        match self {
            Clock::Real(start) => Instant::from_std(*start),
            Clock::Virtual(v) => v.now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_instant_is_one_word() {
        assert_eq!(std::mem::size_of::<Option<Instant>>(), 8);
    }

    #[test]
    fn the_count_round_trips_orders_and_saturates() {
        assert_eq!(Instant::ZERO.total_micros(), 0);
        assert_eq!(Instant::default(), Instant::ZERO);
        assert_eq!(Instant::from_micros(7).total_micros(), 7);
        assert_eq!(Instant::from_millis(3).total_micros(), 3_000);
        assert!(Instant::from_micros(1) > Instant::ZERO);
        let last = Instant::from_micros(u64::MAX);
        assert_eq!(last.total_micros(), u64::MAX - 1);
        assert_eq!(last + Duration::from_secs(1), last, "saturates");
        assert_eq!(
            Instant::from_micros(5).saturating_since(Instant::from_micros(2)),
            Duration::from_micros(3)
        );
        assert_eq!(Instant::from_micros(2).saturating_since(Instant::from_micros(5)), Duration::ZERO);
        assert_eq!(Instant::from_micros(1_500_000).to_string(), "1.500000s");
    }
}
