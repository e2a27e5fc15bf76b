//! Rate-limited logging: a guest (or a peer) that makes the daemon log at request rate must not
//! flood the log or slow the other tenants. [`RateLimited`] wraps the daemon's logger and gives
//! each thread (each tenant's worker and control thread is a thread of its own, named after
//! the tenant) a token bucket for warnings and errors: a burst of [`BURST`] lines, then
//! [`PER_SECOND`] a second. Lines over the budget are counted, and the next line that passes
//! is preceded by one `N similar lines suppressed` line. Info and below are never limited
//! (the daemon logs them per session, not per request).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use log::{Level, Log, Metadata, Record};

/// Lines a thread may log at once before the rate applies.
pub const BURST: u32 = 20;
/// Lines a thread may log per second after its burst.
pub const PER_SECOND: u32 = 5;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
    suppressed: u64,
}

/// A logger that limits each thread's warnings and errors (see the module documentation).
#[derive(Debug)]
pub struct RateLimited<L> {
    inner: L,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl<L: Log> RateLimited<L> {
    /// Limits `inner`.
    pub fn new(inner: L) -> Self {
        RateLimited { inner, buckets: Mutex::new(HashMap::new()) }
    }

    /// Whether this thread may log now; `Some(n)` with the lines suppressed since its last one.
    fn admit(&self, now: Instant) -> Option<u64> {
        let thread = std::thread::current();
        let key = thread.name().map_or_else(|| format!("{:?}", thread.id()), str::to_owned);
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let b = buckets.entry(key).or_insert(Bucket { tokens: f64::from(BURST), last: now, suppressed: 0 });
        let refill = now.saturating_duration_since(b.last).as_secs_f64() * f64::from(PER_SECOND);
        b.tokens = (b.tokens + refill).min(f64::from(BURST));
        b.last = now;
        if b.tokens < 1.0 {
            b.suppressed += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.suppressed))
    }
}

impl<L: Log> Log for RateLimited<L> {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.inner.enabled(record.metadata()) {
            return;
        }
        if record.level() > Level::Warn {
            self.inner.log(record);
            return;
        }
        match self.admit(Instant::now()) {
            None => {}
            Some(0) => self.inner.log(record),
            Some(n) => {
                self.inner.log(
                    &Record::builder()
                        .level(Level::Warn)
                        .target(record.target())
                        .args(format_args!("{n} similar lines suppressed (rate limit: {PER_SECOND}/s)"))
                        .build(),
                );
                self.inner.log(record);
            }
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Installs `env_logger` (filter from `RUST_LOG`, default `default_filter`) behind the rate
/// limit as the process's logger.
pub fn init(default_filter: &str) {
    let inner =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter)).build();
    let max = inner.filter();
    if log::set_boxed_logger(Box::new(RateLimited::new(inner))).is_ok() {
        log::set_max_level(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[derive(Debug, Default)]
    struct Counting {
        lines: Mutex<Vec<String>>,
    }

    /// The test's view of the lines that got through.
    #[derive(Debug, Clone, Default)]
    struct Sink(Arc<Counting>);

    impl std::ops::Deref for Sink {
        type Target = Counting;
        fn deref(&self) -> &Counting {
            &self.0
        }
    }

    impl Log for Sink {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &Record<'_>) {
            self.lines.lock().unwrap_or_else(PoisonError::into_inner).push(record.args().to_string());
        }
        fn flush(&self) {}
    }

    fn error(logger: &impl Log, text: &str) {
        logger.log(&Record::builder().level(Level::Error).args(format_args!("{text}")).build());
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_and_counted_once_the_budget_returns() {
        let sink = Sink::default();
        let limited = RateLimited::new(sink.clone());
        for _ in 0..10_000 {
            error(&limited, "bad avail index");
        }
        assert_eq!(sink.lines.lock().expect("lines").len(), BURST as usize);
        // A second later there is budget again: the suppressed count comes first.
        std::thread::sleep(std::time::Duration::from_millis(1000 / u64::from(PER_SECOND) + 50));
        error(&limited, "bad avail index");
        let lines = sink.lines.lock().expect("lines");
        assert_eq!(lines.len(), BURST as usize + 2);
        assert_eq!(
            lines[BURST as usize],
            format!("{} similar lines suppressed (rate limit: {PER_SECOND}/s)", 10_000 - BURST)
        );
    }

    #[test]
    fn threads_have_budgets_of_their_own_and_info_is_never_limited() {
        let sink = Sink::default();
        let limited = Arc::new(RateLimited::new(sink.clone()));
        for _ in 0..1000 {
            error(&*limited, "flood");
        }
        let other = limited.clone();
        let passed = Arc::new(AtomicUsize::new(0));
        let counted = passed.clone();
        std::thread::Builder::new()
            .name("tenant-b-worker".into())
            .spawn(move || {
                error(&*other, "tenant b's own error");
                counted.fetch_add(1, Ordering::Relaxed);
            })
            .expect("thread")
            .join()
            .expect("join");
        for _ in 0..100 {
            limited.log(&Record::builder().level(Level::Info).args(format_args!("session counters")).build());
        }
        let lines = sink.lines.lock().expect("lines");
        assert!(lines.iter().any(|l| l == "tenant b's own error"), "the other thread was limited too");
        assert_eq!(lines.iter().filter(|l| *l == "session counters").count(), 100);
        assert_eq!(passed.load(Ordering::Relaxed), 1);
    }
}
