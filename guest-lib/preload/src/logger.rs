//! Log lines on stderr, `slimtcp: LEVEL: message`, at the level `SLIMTCP_LOG` asks for; and
//! messages said once per process (an option that is accepted but has no effect, ...).

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = format!("slimtcp: {}: {}\n", record.level().as_str().to_lowercase(), record.args());
            // One write: lines from threads do not interleave. A failed write has nowhere to go.
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

static LOGGER: Stderr = Stderr;

/// Installs the logger at `level` (the first call wins; an application's own `log` logger,
/// in another copy of the crate, is not affected).
pub fn init(level: log::LevelFilter) {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

/// Logs `msg` at warn level the first time `key` is seen in this process.
pub fn warn_once(key: String, msg: impl FnOnce() -> String) {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(HashSet::new()));
    if crate::device::lock(seen).insert(key) {
        log::warn!("{}", msg());
    }
}
