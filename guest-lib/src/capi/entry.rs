//! The one way into the library from C: [`guarded`] runs an entry point's body, catches any
//! panic (none may unwind into C), records a failure for `slim_last_error` and turns it into
//! the entry point's failure value.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::error::CapiError;
use super::last_error;

/// What an entry point returns, and what it returns on failure.
pub(crate) trait FfiReturn {
    /// The failure value for positive errno `errno`.
    fn failure(errno: c_int) -> Self;
}

/// Control calls: `-errno`.
impl FfiReturn for c_int {
    fn failure(errno: c_int) -> Self {
        -errno
    }
}

/// Data calls (`ssize_t`): `-errno`.
impl FfiReturn for isize {
    fn failure(errno: c_int) -> Self {
        -(errno as isize)
    }
}

/// Sizes: 0.
impl FfiReturn for usize {
    fn failure(_: c_int) -> Self {
        0
    }
}

/// Releases: nothing.
impl FfiReturn for () {
    fn failure(_: c_int) -> Self {}
}

/// Handles: NULL, with `errno` set as C expects of a function returning a pointer.
impl<T> FfiReturn for *mut T {
    fn failure(errno: c_int) -> Self {
        set_errno(errno);
        std::ptr::null_mut()
    }
}

/// Read-only pointers: NULL, with `errno` set.
impl<T> FfiReturn for *const T {
    fn failure(errno: c_int) -> Self {
        set_errno(errno);
        std::ptr::null()
    }
}

fn set_errno(errno: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() = errno };
}

/// Runs the body of entry point `call`. The body owns no state the caller can observe after a
/// panic except through the handles it was given; a panic is reported as `EIO` (a bug).
pub(crate) fn guarded<T: FfiReturn>(call: &'static str, body: impl FnOnce() -> Result<T, CapiError>) -> T {
    let error = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e,
        Err(payload) => CapiError::Panic(panic_message(payload.as_ref())),
    };
    let errno = error.errno();
    last_error::set(call, error);
    T::failure(errno)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_eio_and_a_message() {
        let r: c_int = guarded("slim_test", || panic!("boom"));
        assert_eq!(r, -libc::EIO);
        // SAFETY: the message lives until the next failure on this thread.
        let msg = unsafe { std::ffi::CStr::from_ptr(last_error::message()) };
        assert_eq!(msg.to_str(), Ok("slim_test: internal error (panic): boom"));
    }

    #[test]
    fn pointer_entry_points_fail_with_null_and_errno() {
        let p: *mut u8 = guarded("slim_test", || Err(CapiError::Null("device")));
        assert!(p.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EINVAL));
    }
}
