//! The one idle rule of every busy loop in this bench (both applications' thread and both
//! paths' worker threads): spin while there is work or it was found recently, then yield the
//! core after each empty pass, never sleep. On a shared 2-core machine a loop that only spins
//! holds its core for a whole time slice while the thread it waits for is queued behind it
//! (seen: p99 round trips of 16 ms); the same rule on both paths keeps the comparison about
//! the paths, not about the products' different idle policies.

/// Empty passes spun before yielding (the host runtime's `Backoff` spins as many);
/// `FAIR_SPIN` overrides it (a huge value: spin only).
const SPIN: u32 = 256;

fn spin() -> u32 {
    static SPIN_PASSES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *SPIN_PASSES.get_or_init(|| std::env::var("FAIR_SPIN").ok().and_then(|v| v.parse().ok()).unwrap_or(SPIN))
}

/// Counts empty passes of one loop.
#[derive(Debug)]
pub struct Idle {
    empty: u32,
    spin: u32,
}

impl Default for Idle {
    fn default() -> Self {
        Idle { empty: 0, spin: spin() }
    }
}

impl Idle {
    /// After a pass of the loop: `work` says whether it did anything.
    pub fn pass(&mut self, work: bool) {
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
