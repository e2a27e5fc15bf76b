//! The exported C symbols that take the application's calls in front of the C library's.
//! Each asks the descriptor table first ([`SOCKETS`](crate::socket::SOCKETS): one atomic load
//! for an ordinary descriptor) and passes anything that is not a SlimTCP socket to the C
//! library unchanged.
//!
//! Variadic C functions (`fcntl`, `ioctl`) are declared with one `unsigned long` third
//! argument: on the System V x86-64 and AAPCS64 Linux ABIs an integer or pointer variadic
//! argument travels in the same register as a fixed one, so the callee reads it the same way.

mod fd;
mod fortify;
mod io;
mod net;
mod process;
mod wait;

use std::time::Duration;

/// A C timeout in milliseconds as an optional duration (negative: for ever).
fn millis(ms: libc::c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// A `timespec` pointer as an optional duration (NULL: for ever).
///
/// # Safety
/// `ts` NULL or valid.
unsafe fn timespec(ts: *const libc::timespec) -> Option<Duration> {
    if ts.is_null() {
        return None;
    }
    // SAFETY: non-null, valid (contract).
    let t = unsafe { *ts };
    Some(Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0)))
}
