//! The one idle rule of every busy loop in this bench (both applications' thread and both
//! paths' worker threads): spin while there is work or it was found recently, then yield the
//! core after each empty pass, never sleep. On a shared 2-core machine a loop that only spins
//! holds its core for a whole time slice while the thread it waits for is queued behind it
//! (seen: p99 round trips of 16 ms); the same rule on both paths keeps the comparison about
//! the paths, not about the products' different idle policies.
//!
//! `FAIR_IDLE_TIME=1` also times each loop's empty passes and writes, as the loop ends, the
//! share of its time they took (`idle: thread <name>: <share>% of <seconds> s`, stderr): the
//! thread that is idle least is the one the others wait for. Off by default (a clock read per
//! pass).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Empty passes spun before yielding (the host runtime's `Backoff` spins as many);
/// `FAIR_SPIN` overrides it (a huge value: spin only).
const SPIN: u32 = 256;

fn spin() -> u32 {
    static SPIN_PASSES: OnceLock<u32> = OnceLock::new();
    *SPIN_PASSES.get_or_init(|| std::env::var("FAIR_SPIN").ok().and_then(|v| v.parse().ok()).unwrap_or(SPIN))
}

fn timed() -> bool {
    static TIMED: OnceLock<bool> = OnceLock::new();
    // The plan rejected a malformed value before any loop ran.
    *TIMED.get_or_init(|| super::plan::flag("FAIR_IDLE_TIME", false).unwrap_or(false))
}

/// Where the time of a timed loop went.
#[derive(Debug)]
struct Clock {
    started: Instant,
    last_pass: Instant,
    idle: Duration,
}

/// Counts empty passes of one loop (and, with `FAIR_IDLE_TIME=1`, times them).
#[derive(Debug)]
pub struct Idle {
    empty: u32,
    spin: u32,
    clock: Option<Clock>,
}

impl Default for Idle {
    fn default() -> Self {
        let clock = timed().then(|| {
            let now = Instant::now();
            Clock { started: now, last_pass: now, idle: Duration::ZERO }
        });
        Idle { empty: 0, spin: spin(), clock }
    }
}

impl Idle {
    /// After a pass of the loop: `work` says whether it did anything.
    pub fn pass(&mut self, work: bool) {
        if let Some(c) = &mut self.clock {
            let now = Instant::now();
            if !work {
                c.idle += now - c.last_pass;
            }
            c.last_pass = now;
        }
        if work {
            self.empty = 0;
            return;
        }
        self.empty = self.empty.saturating_add(1);
        if self.empty < self.spin {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        let Some(c) = &self.clock else { return };
        let total = c.last_pass.duration_since(c.started);
        if total.is_zero() {
            return;
        }
        let thread = std::thread::current();
        eprintln!(
            "idle: thread {}: {:.1}% of {:.2} s",
            thread.name().unwrap_or("?"),
            100.0 * c.idle.as_secs_f64() / total.as_secs_f64(),
            total.as_secs_f64()
        );
    }
}
