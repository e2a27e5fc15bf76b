//! Goodput over a measured window, and the paper's once-a-second progress lines.

use std::time::{Duration, Instant};

/// How often a progress line is produced.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// One progress interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Seconds since the measurement started, at the end of this interval.
    pub at_s: f64,
    /// Goodput over the interval, bits per second.
    pub bps: f64,
    /// Open connections at the end of the interval.
    pub connections: usize,
}

impl Interval {
    /// The paper's line: `pps=<bps/8/mss>; bps=<bps>; connections=<n>;`.
    pub fn paper_line(&self, mss: u16) -> String {
        let pps = self.bps / 8.0 / f64::from(mss.max(1));
        format!("pps={:.0}; bps={:.0}; connections={};", pps, self.bps, self.connections)
    }
}

/// Counts a byte counter's growth between `start` and `finish`, reporting each [`INTERVAL`].
/// Also notes how long the measuring thread waited for a CPU meanwhile: a busy-polling thread
/// that waited was sharing its core with something else, and its figures are disturbed.
#[derive(Debug)]
pub struct Meter {
    start: Instant,
    start_bytes: u64,
    last: Instant,
    last_bytes: u64,
    start_wait: Option<Duration>,
}

impl Meter {
    /// Starts measuring at `now`, with the counter at `bytes`.
    pub fn start(now: Instant, bytes: u64) -> Meter {
        Meter { start: now, start_bytes: bytes, last: now, last_bytes: bytes, start_wait: run_queue_wait() }
    }

    /// How long the calling thread waited, runnable, for a CPU since the start (`None` where
    /// the kernel does not say).
    pub fn run_queue_wait(&self) -> Option<Duration> {
        Some(run_queue_wait()?.saturating_sub(self.start_wait?))
    }

    /// When the measurement started.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// An interval report when one is due at `now`.
    pub fn tick(&mut self, now: Instant, bytes: u64, connections: usize) -> Option<Interval> {
        let span = now.saturating_duration_since(self.last);
        if span < INTERVAL {
            return None;
        }
        let bps = bytes.saturating_sub(self.last_bytes) as f64 * 8.0 / span.as_secs_f64();
        self.last = now;
        self.last_bytes = bytes;
        Some(Interval { at_s: now.saturating_duration_since(self.start).as_secs_f64(), bps, connections })
    }

    /// Bytes and time since the start.
    pub fn finish(&self, now: Instant, bytes: u64) -> (u64, Duration) {
        (bytes.saturating_sub(self.start_bytes), now.saturating_duration_since(self.start))
    }
}

/// The calling thread's total time spent runnable but waiting for a CPU: the second field of
/// Linux's `/proc/thread-self/schedstat` (nanoseconds on a CPU, waiting, timeslices).
fn run_queue_wait() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let waited_ns = stat.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(waited_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_reports_the_growth_since_the_last_one() {
        let t0 = Instant::now();
        let mut m = Meter::start(t0, 100);
        assert_eq!(m.tick(t0 + Duration::from_millis(500), 1_000, 1), None, "not a second yet");
        let i = m.tick(t0 + Duration::from_secs(1), 125_100, 3).expect("due");
        assert_eq!(i.bps, 1_000_000.0);
        assert_eq!(i.connections, 3);
        assert_eq!(m.finish(t0 + Duration::from_secs(2), 250_100), (250_000, Duration::from_secs(2)));
    }

    #[test]
    fn the_wait_for_a_cpu_is_counted_from_the_start() {
        let m = Meter::start(Instant::now(), 0);
        if run_queue_wait().is_some() {
            assert!(
                m.run_queue_wait().is_some_and(|w| w < Duration::from_secs(60)),
                "{:?}",
                m.run_queue_wait()
            );
        } else {
            assert_eq!(m.run_queue_wait(), None, "no schedstat, no figure");
        }
    }

    #[test]
    fn the_paper_line_has_its_three_fields() {
        let i = Interval { at_s: 1.0, bps: 8_000_000.0, connections: 2 };
        assert_eq!(i.paper_line(1000), "pps=1000; bps=8000000; connections=2;");
    }
}
