//! Polling a condition with a deadline: the only way tests wait for each other.

use std::time::{Duration, Instant};

/// The first pause between polls; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_micros(50);
/// The longest pause between polls.
const MAX_BACKOFF: Duration = Duration::from_millis(10);

/// Polls `cond` until it returns true (then true) or `deadline` passes (then false).
///
/// Pauses grow from 50 µs to 10 ms, so a condition that becomes true quickly is seen quickly
/// without burning a shared core.
pub fn wait_until(deadline: Instant, mut cond: impl FnMut() -> bool) -> bool {
    let mut backoff = FIRST_BACKOFF;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(backoff.min(deadline - now));
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// [`wait_until`] with a deadline `timeout` from now.
pub fn wait_for(timeout: Duration, cond: impl FnMut() -> bool) -> bool {
    wait_until(Instant::now() + timeout, cond)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_true_condition_returns_at_once() {
        assert!(wait_for(Duration::ZERO, || true));
    }

    #[test]
    fn a_false_condition_gives_up_at_the_deadline() {
        let start = Instant::now();
        assert!(!wait_for(Duration::from_millis(30), || false));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_condition_that_becomes_true_is_seen() {
        let mut calls = 0;
        assert!(wait_for(Duration::from_secs(5), || {
            calls += 1;
            calls == 5
        }));
    }
}
