//! A stall watchdog for the applications' thread: a call that blocks for good (a bug: before
//! 2026-12-01 the guest library's non-blocking send waited for room in a full transmit ring)
//! would hang the bench; the watchdog ends the process with a message instead. The
//! applications' loops call [`beat`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long the applications' thread may go without a beat.
const LIMIT: Duration = Duration::from_secs(60);

static START: OnceLock<Instant> = OnceLock::new();
/// Milliseconds from `START` at the last beat.
static LAST: AtomicU64 = AtomicU64::new(0);

fn ms_at(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(*START.get_or_init(Instant::now)).as_millis())
        .unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    ms_at(Instant::now())
}

/// The applications' thread is making progress at `now` (a time the loop read anyway: a
/// beat costs no clock read).
pub fn beat(now: Instant) {
    LAST.store(ms_at(now), Ordering::Relaxed);
}

/// Starts the watchdog thread (detached; it lives as long as the process).
pub fn start() -> std::io::Result<()> {
    beat(Instant::now());
    std::thread::Builder::new().name("fair-watchdog".into()).spawn(|| loop {
        std::thread::sleep(Duration::from_secs(1));
        let idle = now_ms().saturating_sub(LAST.load(Ordering::Relaxed));
        if idle > LIMIT.as_millis() as u64 {
            eprintln!(
                "guest_path_fair: the applications' thread made no progress for {} s (a socket call \
                 blocked for good): stopping",
                idle / 1000
            );
            std::process::exit(2);
        }
    })?;
    Ok(())
}
