//! How long the device has held the link's send chains, coarsely: chains are stamped with an
//! epoch of [`EPOCH`], and a chain put two or more epochs ago is *old* (held 50-100 ms or
//! more). A busy pair's chains come back within milliseconds (the queueing behind thousands of
//! connections included); a chain held that long belongs to a socket whose peer does not
//! read (or acknowledge). The link uses the count of old chains to tell a full ring that
//! drains (wait for it, zero copy) from one that does not (send with `COPY`).

use std::time::{Duration, Instant};

/// One epoch.
pub(super) const EPOCH: Duration = Duration::from_millis(50);

/// The epoch stamps of held chains, counted for the current and the previous epoch (all
/// others are old).
#[derive(Debug)]
pub(super) struct HeldAges {
    /// The epoch `current` counts (stamps are its number).
    epoch: u32,
    /// When that epoch began.
    started: Instant,
    /// When it ends and when the next one does (`started` + one and two epochs): the checks
    /// that only tell 0, 1 or more epochs apart compare instants, with no clock arithmetic.
    ends: [Instant; 2],
    /// Held chains stamped `epoch`.
    current: usize,
    /// Held chains stamped `epoch - 1`.
    previous: usize,
}

impl HeldAges {
    pub(super) fn new(now: Instant) -> HeldAges {
        HeldAges { epoch: 0, started: now, ends: epoch_ends(now), current: 0, previous: 0 }
    }

    /// Epochs begun since `started` by `now` (a division only past two of them).
    fn passed(&self, now: Instant) -> u32 {
        if now < self.ends[0] {
            0
        } else if now < self.ends[1] {
            1
        } else {
            let n = now.saturating_duration_since(self.started).as_nanos() / EPOCH.as_nanos();
            u32::try_from(n).unwrap_or(u32::MAX)
        }
    }

    /// The stamp of a chain put now: with `now`, the epoch at that time; without (the caller
    /// did not read the clock), the last epoch seen, which only makes the chain look older
    /// than it is.
    pub(super) fn stamp(&mut self, now: Option<Instant>) -> u32 {
        if let Some(now) = now {
            let passed = self.passed(now);
            if passed > 0 {
                self.previous = if passed == 1 { self.current } else { 0 };
                self.current = 0;
                self.epoch = self.epoch.wrapping_add(passed);
                self.started += EPOCH * passed;
                self.ends = epoch_ends(self.started);
            }
        }
        self.current += 1;
        self.epoch
    }

    /// A chain stamped `stamp` came back.
    pub(super) fn returned(&mut self, stamp: u32) {
        if stamp == self.epoch {
            self.current = self.current.saturating_sub(1);
        } else if stamp == self.epoch.wrapping_sub(1) {
            self.previous = self.previous.saturating_sub(1);
        }
    }

    /// Of `held` chains, the old ones at `now`.
    pub(super) fn old(&self, held: usize, now: Instant) -> usize {
        let young = match self.passed(now) {
            0 => self.current + self.previous,
            1 => self.current,
            _ => 0,
        };
        held.saturating_sub(young)
    }
}

/// The ends of the epoch that begins at `start` and of the one after it.
fn epoch_ends(start: Instant) -> [Instant; 2] {
    [start + EPOCH, start + EPOCH * 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_become_old_two_epochs_after_their_stamp() {
        let t0 = Instant::now();
        let mut ages = HeldAges::new(t0);
        let a = ages.stamp(Some(t0));
        let b = ages.stamp(Some(t0 + EPOCH));
        assert_eq!(ages.old(2, t0 + EPOCH), 0);
        assert_eq!(ages.old(2, t0 + EPOCH * 2), 1, "a is old, b is not");
        assert_eq!(ages.old(2, t0 + EPOCH * 3), 2);
        ages.returned(a);
        assert_eq!(ages.old(1, t0 + EPOCH * 2), 0, "b only, one epoch old");
        ages.returned(b);
        assert_eq!(ages.old(0, t0 + EPOCH * 9), 0);
    }

    #[test]
    fn a_stamp_without_the_clock_only_looks_older() {
        let t0 = Instant::now();
        let mut ages = HeldAges::new(t0);
        let stale = ages.stamp(None);
        // Put "now" at t0 + 5 epochs, stamped with epoch 0: old at once.
        assert_eq!(ages.old(1, t0 + EPOCH * 5), 1);
        let fresh = ages.stamp(Some(t0 + EPOCH * 5));
        assert_eq!(ages.old(2, t0 + EPOCH * 5), 1, "the fresh one is young");
        ages.returned(stale);
        ages.returned(fresh);
        assert_eq!(ages.old(0, t0 + EPOCH * 5), 0);
    }

    #[test]
    fn epochs_passed_are_counted_the_same_by_comparison_and_by_division() {
        let t0 = Instant::now();
        let ages = HeldAges::new(t0);
        let tick = Duration::from_nanos(1);
        for (at, passed) in [
            (t0, 0),
            (t0 + EPOCH - tick, 0),
            (t0 + EPOCH, 1),
            (t0 + EPOCH * 2 - tick, 1),
            (t0 + EPOCH * 2, 2),
            (t0 + EPOCH * 7 + tick, 7),
        ] {
            assert_eq!(ages.passed(at), passed, "{:?} after the start", at - t0);
        }
        // After a jump of several epochs, the boundaries move with the epoch.
        let mut ages = HeldAges::new(t0);
        ages.stamp(Some(t0 + EPOCH * 3 + tick));
        assert_eq!(ages.passed(t0 + EPOCH * 4 - tick), 0);
        assert_eq!(ages.passed(t0 + EPOCH * 4), 1);
        assert_eq!(ages.passed(t0 + EPOCH * 5), 2);
    }
}
