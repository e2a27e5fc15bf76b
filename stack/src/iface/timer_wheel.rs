//! A hashed timing wheel: O(1) scheduling, expiry cost proportional to the occupied slots passed
//! plus the keys fired (empty slots are skipped through a bitmap, 64 at a time).
//!
//! Time is cut into ticks of `granularity`; tick `t` lives in slot `t % slots`. A deadline more
//! than one wheel span away shares its slot with nearer ones and is simply kept (its "round" has
//! not come) when the slot is visited: every entry carries its exact deadline and is fired only
//! once `deadline <= now`, so rounding to ticks can make a timer late by at most the time until the
//! next [`TimerWheel::expire`] call, never early.
//!
//! **Lazy cancellation.** There is no `cancel`: a socket that re-arms or disarms a timer just
//! schedules again (or not), and when an old entry fires the owner re-checks its real deadline and
//! ignores the stale key. A key may therefore fire more than once; [`TimerWheel::len`] counts
//! stale entries too.

use std::time::Duration;

use crate::time::Instant;

/// One scheduled key with its exact deadline.
#[derive(Debug, Clone, Copy)]
struct Entry<K> {
    key: K,
    at: Instant,
}

/// A hashed timing wheel of keys `K` (socket handles, connection ids...).
#[derive(Debug)]
pub struct TimerWheel<K: Copy> {
    granularity_us: u64,
    slots: Vec<Vec<Entry<K>>>,
    /// One bit per slot: set while the slot holds entries.
    occupied: Vec<u64>,
    /// The first tick not yet known to be fully expired; past deadlines are filed here.
    cursor: u64,
    /// A lower bound of every scheduled deadline (exact after `schedule`, conservative after
    /// `expire`); `None` when the wheel is empty.
    lower_bound: Option<Instant>,
    /// The latest `now` seen by `expire`, so a clock that steps back cannot rewind the cursor.
    last_now: Instant,
    len: usize,
}

impl<K: Copy> TimerWheel<K> {
    /// A wheel of `slots` slots of `granularity` each (span = `slots * granularity`).
    ///
    /// A granularity below one microsecond is raised to one microsecond, zero slots to one slot.
    pub fn new(granularity: Duration, slots: usize) -> Self {
        let granularity_us = u64::try_from(granularity.as_micros()).unwrap_or(u64::MAX).max(1);
        let slots = slots.max(1);
        TimerWheel {
            granularity_us,
            slots: (0..slots).map(|_| Vec::new()).collect(),
            occupied: vec![0; slots.div_ceil(64)],
            cursor: 0,
            lower_bound: None,
            last_now: Instant::ZERO,
            len: 0,
        }
    }

    /// Schedules `key` to fire at the first [`expire`](Self::expire) with `now >= at`.
    ///
    /// O(1). A deadline already in the past fires on the next `expire`.
    pub fn schedule(&mut self, key: K, at: Instant) {
        let tick = self.tick_of(at).max(self.cursor);
        let slot = self.slot_of(tick);
        self.slots[slot].push(Entry { key, at });
        self.mark_occupied(slot);
        self.len += 1;
        self.lower_bound = Some(self.lower_bound.map_or(at, |lb| lb.min(at)));
    }

    /// Appends to `out` every key whose deadline is `<= now` and forgets those entries.
    ///
    /// Costs O(1) when nothing can be due, otherwise O(slots passed / 64 + occupied slots passed +
    /// entries in them).
    /// The caller must re-check each key's real deadline (lazy cancellation, see module docs).
    pub fn expire(&mut self, now: Instant, out: &mut Vec<K>) {
        let now = now.max(self.last_now);
        self.last_now = now;
        let now_tick = self.tick_of(now);
        match self.lower_bound {
            Some(lb) if lb <= now => {}
            // Nothing can be due: every remaining deadline is > now, so none lies in a tick
            // before `now_tick`, and moving the cursor there skips only empty history.
            _ => {
                self.cursor = self.cursor.max(now_tick);
                return;
            }
        }

        let n = self.slots.len() as u64;
        let passed = now_tick.saturating_sub(self.cursor) + 1;
        let visits = passed.min(n);
        let first_tick = now_tick + 1 - visits;
        let mut kept_min: Option<Instant> = None;
        // Only occupied slots are visited, in tick order (the bitmap skips empty ones 64 at a
        // time), so a clock that jumps a whole revolution costs words, not slots.
        let mut done = 0u64;
        while let Some(distance) = self.first_occupied(self.slot_of(first_tick + done), visits - done) {
            let slot = self.slot_of(first_tick + done + distance);
            done += distance + 1;
            let mut fired = 0;
            self.slots[slot].retain(|e| {
                if e.at <= now {
                    out.push(e.key);
                    fired += 1;
                    false
                } else {
                    kept_min = Some(kept_min.map_or(e.at, |m: Instant| m.min(e.at)));
                    true
                }
            });
            self.len -= fired;
            if self.slots[slot].is_empty() {
                self.clear_occupied(slot);
            }
        }
        self.cursor = now_tick;

        // Slots not visited hold only deadlines at or after their next tick past `now_tick`.
        let unvisited = n - visits;
        let ahead = self.first_occupied(self.slot_of(now_tick + 1), unvisited).map(|distance| {
            Instant::from_micros((now_tick + 1 + distance).saturating_mul(self.granularity_us))
        });
        self.lower_bound = match (kept_min, ahead) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// A lower bound of the earliest scheduled deadline, or `None` if nothing is scheduled.
    ///
    /// O(1). It may be earlier than the true earliest deadline (never later), by at most one
    /// wheel revolution for keys scheduled beyond the span; an `expire` at that time may fire
    /// nothing and simply tighten the bound.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.lower_bound
    }

    /// The number of scheduled entries, stale ones included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no entry is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn tick_of(&self, at: Instant) -> u64 {
        at.total_micros() / self.granularity_us
    }

    fn slot_of(&self, tick: u64) -> usize {
        // The remainder is < slots.len(), which is a usize.
        (tick % self.slots.len() as u64) as usize
    }

    fn mark_occupied(&mut self, slot: usize) {
        self.occupied[slot / 64] |= 1 << (slot % 64);
    }

    fn clear_occupied(&mut self, slot: usize) {
        self.occupied[slot / 64] &= !(1 << (slot % 64));
    }

    /// The distance from `start` of the first occupied slot among the `count` slots from
    /// `start` (wrapping), skipping empty 64-slot words at once.
    fn first_occupied(&self, start: usize, count: u64) -> Option<u64> {
        let n = self.slots.len();
        let mut distance = 0u64;
        while distance < count {
            let pos = (start + (distance % n as u64) as usize) % n;
            let bits = self.occupied[pos / 64] >> (pos % 64);
            if bits == 0 {
                let skip = (64 - pos % 64).min(n - pos);
                distance += skip as u64;
                continue;
            }
            let found = distance + u64::from(bits.trailing_zeros());
            return (found < count).then_some(found);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    fn wheel() -> TimerWheel<u32> {
        TimerWheel::new(Duration::from_millis(1), 64)
    }

    fn fire(w: &mut TimerWheel<u32>, now: Instant) -> Vec<u32> {
        let mut out = Vec::new();
        w.expire(now, &mut out);
        out
    }

    #[test]
    fn timers_fire_in_deadline_order_across_calls() {
        let mut w = wheel();
        w.schedule(3, ms(30));
        w.schedule(1, ms(10));
        w.schedule(2, ms(20));
        assert_eq!(fire(&mut w, ms(9)), Vec::<u32>::new());
        assert_eq!(fire(&mut w, ms(10)), vec![1]);
        assert_eq!(fire(&mut w, ms(25)), vec![2]);
        assert_eq!(fire(&mut w, ms(30)), vec![3]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn a_timer_never_fires_before_its_deadline_despite_tick_rounding() {
        let mut w = TimerWheel::new(Duration::from_millis(10), 8);
        let deadline = Instant::from_micros(15_500);
        w.schedule(7, deadline);
        for now_us in (10_000..15_500).step_by(100) {
            assert!(fire(&mut w, Instant::from_micros(now_us)).is_empty(), "fired early at {now_us}us");
        }
        assert!(fire(&mut w, Instant::from_micros(15_499)).is_empty());
        assert_eq!(fire(&mut w, deadline), vec![7]);
    }

    #[test]
    fn far_future_timers_wait_for_their_round() {
        let mut w = wheel(); // span 64 ms
        w.schedule(1, ms(1_000));
        w.schedule(2, ms(5));
        for t in (0..1_000).step_by(3) {
            let got = fire(&mut w, ms(t));
            assert!(!got.contains(&1), "far timer fired at {t} ms");
        }
        assert_eq!(fire(&mut w, ms(1_000)), vec![1]);
        assert!(w.is_empty());
    }

    #[test]
    fn far_future_timer_fires_when_expire_jumps_over_many_revolutions() {
        let mut w = wheel();
        w.schedule(1, ms(10_000));
        assert!(fire(&mut w, ms(9_999)).is_empty());
        assert_eq!(fire(&mut w, ms(20_000)), vec![1]);
    }

    #[test]
    fn past_deadlines_fire_on_the_next_expire() {
        let mut w = wheel();
        assert!(fire(&mut w, ms(500)).is_empty());
        w.schedule(1, ms(100));
        w.schedule(2, ms(500));
        assert_eq!(w.next_deadline(), Some(ms(100)));
        let mut got = fire(&mut w, ms(500));
        got.sort();
        assert_eq!(got, vec![1, 2]);
    }

    #[test]
    fn a_clock_stepping_back_neither_fires_nor_loses_timers() {
        let mut w = wheel();
        assert!(fire(&mut w, ms(100)).is_empty());
        w.schedule(1, ms(150));
        assert!(fire(&mut w, ms(50)).is_empty());
        assert_eq!(fire(&mut w, ms(150)), vec![1]);
    }

    #[test]
    fn many_timers_all_fire_exactly_once_and_never_early() {
        let mut w: TimerWheel<u32> = TimerWheel::new(Duration::from_micros(250), 128);
        let mut rng = crate::nic::fault::Rng::new(0x1234_5678_9abc_def0);
        let mut deadlines = Vec::new();
        for key in 0..10_000u32 {
            let at = Instant::from_micros(rng.gen_range(0..2_000_000));
            deadlines.push(at);
            w.schedule(key, at);
        }
        assert_eq!(w.len(), 10_000);
        let mut seen = vec![false; deadlines.len()];
        let mut now = Instant::ZERO;
        let mut out = Vec::new();
        while !w.is_empty() {
            now += Duration::from_micros(333);
            out.clear();
            w.expire(now, &mut out);
            for &k in &out {
                let i = k as usize;
                assert!(deadlines[i] <= now, "key {k} fired early");
                assert!(!seen[i], "key {k} fired twice");
                seen[i] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn next_deadline_is_a_lower_bound_that_tightens_after_expire() {
        let mut w = wheel();
        assert_eq!(w.next_deadline(), None);
        w.schedule(1, ms(40));
        w.schedule(2, ms(7));
        assert_eq!(w.next_deadline(), Some(ms(7)));
        assert_eq!(fire(&mut w, ms(7)), vec![2]);
        let bound = w.next_deadline().expect("one timer left");
        assert!(bound <= ms(40), "bound {bound} is later than the deadline");
        assert!(bound > ms(7), "bound {bound} did not move past now");
    }

    #[test]
    fn next_deadline_never_exceeds_a_far_future_deadline() {
        let mut w = wheel();
        w.schedule(1, ms(3));
        w.schedule(2, ms(500));
        assert_eq!(fire(&mut w, ms(3)), vec![1]);
        let mut now = ms(3);
        // Following next_deadline must reach the far timer without firing early or stalling.
        for _ in 0..100 {
            let next = w.next_deadline().expect("far timer still scheduled");
            assert!(next <= ms(500));
            assert!(next > now);
            now = next;
            if fire(&mut w, now) == vec![2] {
                assert_eq!(now, ms(500));
                return;
            }
        }
        panic!("next_deadline did not converge on the far timer");
    }

    #[test]
    fn a_jump_across_the_wrap_fires_in_tick_order_and_keeps_later_rounds() {
        let mut w = wheel(); // 64 slots of 1 ms
        assert!(fire(&mut w, ms(50)).is_empty());
        // Ticks 60..70 wrap around slot 0; key 9 shares slot 62 with key 2 one round later.
        for (key, t) in [(3, 66), (1, 60), (4, 69), (2, 62), (9, 126)] {
            w.schedule(key, ms(t));
        }
        assert_eq!(fire(&mut w, ms(70)), vec![1, 2, 3, 4]);
        assert_eq!(w.len(), 1);
        let bound = w.next_deadline().expect("key 9 left");
        assert!(bound > ms(70) && bound <= ms(126));
        assert!(fire(&mut w, ms(125)).is_empty());
        assert_eq!(fire(&mut w, ms(126)), vec![9]);
    }

    #[test]
    fn stale_entries_fire_and_the_owner_ignores_them() {
        let mut w = wheel();
        w.schedule(1, ms(10)); // armed
        w.schedule(1, ms(20)); // re-armed later: the first entry is now stale
        assert_eq!(w.len(), 2);
        assert_eq!(fire(&mut w, ms(10)), vec![1]);
        assert_eq!(fire(&mut w, ms(20)), vec![1]);
    }
}
