//! The C calling convention of the intercepted calls: -1 and `errno` on failure. Operations
//! return [`Sys`]; the entry points turn it into the C return value, and never let a panic
//! unwind into the application (a bug here becomes `EIO` and a log line).

use libc::{c_int, ssize_t};
use slimtcp_api::SocketError;

/// An errno value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub c_int);

impl From<SocketError> for Errno {
    fn from(e: SocketError) -> Self {
        Errno(e.errno())
    }
}

impl Errno {
    /// The calling thread's `errno` after a failed C library call.
    pub fn last() -> Errno {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
}

/// An operation's outcome.
pub type Sys<T> = Result<T, Errno>;

fn set_errno(e: Errno) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e.0 };
}

/// Runs `f`, turning a panic into `EIO` (logged).
pub fn guard<T>(f: impl FnOnce() -> Sys<T>) -> Sys<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            log::error!("internal error (a bug in slimtcp-preload): {msg}");
            Err(Errno(libc::EIO))
        }
    }
}

/// The C return value of an `int` call.
pub fn ret_int(r: Sys<c_int>) -> c_int {
    r.unwrap_or_else(|e| {
        set_errno(e);
        -1
    })
}

/// The C return value of a byte-count call.
pub fn ret_size(r: Sys<usize>) -> ssize_t {
    match r {
        Ok(n) => ssize_t::try_from(n).unwrap_or(ssize_t::MAX),
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}
