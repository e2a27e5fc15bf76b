//! Ring stops between the control thread and the tenant's worker.
//!
//! vhost-user stops a ring with GET_VRING_BASE and expects every descriptor the device took to
//! be back on the used ring when it answers (no in-flight records are kept). Only the worker can
//! give back what the engine holds, so the control thread asks it through [`RingStops`] and
//! waits (bounded) until it has.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Queue pairs a stop request can name (the configuration allows at most 64).
pub const MAX_PAIRS: usize = 64;

/// Stop requests for transmit queues, by queue pair (a bit each).
#[derive(Debug, Default)]
pub struct RingStops {
    requested: AtomicU64,
    served: Mutex<u64>,
    cv: Condvar,
    worker_active: AtomicBool,
}

impl RingStops {
    /// Asks the worker to give back everything pair `pair` holds and waits until it has, or
    /// `timeout` passed, or no worker is serving the rings (then nothing is held). Returns true
    /// when the worker confirmed, or went away while the request was open; false on timeout or
    /// when no worker served the rings to begin with.
    pub fn request_and_wait(&self, pair: usize, timeout: Duration) -> bool {
        if pair >= MAX_PAIRS || !self.worker_active.load(Ordering::Acquire) {
            return false;
        }
        let bit = 1u64 << pair;
        let deadline = Instant::now() + timeout;
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        *served &= !bit;
        self.requested.fetch_or(bit, Ordering::AcqRel);
        while *served & bit == 0 {
            if !self.worker_active.load(Ordering::Acquire) {
                // The worker went away (it may not have reached `served` yet, which needs the
                // lock held here): nothing touches the rings any more.
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                log::warn!("queue pair {pair}: the worker did not confirm the ring stop in time");
                return false;
            }
            served = self.cv.wait_timeout(served, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        true
    }

    /// The worker's cheap check: pairs whose stop was requested since the last call (and are
    /// now the worker's to serve).
    pub fn take_requests(&self) -> u64 {
        if self.requested.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.requested.swap(0, Ordering::AcqRel)
    }

    /// The worker served the stops of `pairs` (a mask from [`take_requests`](Self::take_requests)).
    pub fn served(&self, pairs: u64) {
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        *served |= pairs;
        self.cv.notify_all();
    }

    /// Whether a worker serves the rings now; a worker that stops serving answers every request
    /// still open.
    pub fn set_worker_active(&self, active: bool) {
        self.worker_active.store(active, Ordering::Release);
        if !active {
            let open = self.requested.swap(0, Ordering::AcqRel);
            self.served(open | u64::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_request_waits_for_the_worker() {
        let stops = Arc::new(RingStops::default());
        assert!(!stops.request_and_wait(0, Duration::from_secs(1)), "no worker: nothing to wait for");
        stops.set_worker_active(true);
        let worker = {
            let stops = Arc::clone(&stops);
            std::thread::spawn(move || loop {
                let r = stops.take_requests();
                if r != 0 {
                    stops.served(r);
                    return r;
                }
                std::thread::yield_now();
            })
        };
        assert!(stops.request_and_wait(3, Duration::from_secs(30)));
        assert_eq!(worker.join().expect("worker"), 1 << 3);
        assert!(!stops.request_and_wait(MAX_PAIRS, Duration::from_secs(1)), "no such pair");
    }

    #[test]
    fn a_worker_that_goes_away_releases_the_waiter() {
        let stops = Arc::new(RingStops::default());
        stops.set_worker_active(true);
        let waiter = {
            let stops = Arc::clone(&stops);
            std::thread::spawn(move || stops.request_and_wait(1, Duration::from_secs(30)))
        };
        while stops.requested.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        stops.set_worker_active(false);
        assert!(waiter.join().expect("waiter"), "released as served (nothing is held any more)");
    }
}
