//! The last failure of a `slim_*` call on this thread, as a human-readable message.
//!
//! Failures store the error itself (cheap: a non-blocking loop's `EAGAIN` allocates nothing);
//! the message is formatted when `slim_last_error` asks for it.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

use super::error::CapiError;

#[derive(Default)]
struct LastError {
    /// The failing entry point and why.
    error: Option<(&'static str, CapiError)>,
    /// Its message, formatted on demand.
    message: Option<CString>,
}

thread_local! {
    static LAST: RefCell<LastError> = RefCell::new(LastError::default());
}

/// Records that `call` failed with `error`.
pub(crate) fn set(call: &'static str, error: CapiError) {
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        l.error = Some((call, error));
        l.message = None;
    });
}

/// `call: error: cause: cause...`, without the NUL bytes a C string cannot hold.
fn format(call: &str, error: &CapiError) -> CString {
    let mut text = format!("{call}: {}", slimtcp_api::report::error_chain(error));
    text.retain(|ch| ch != '\0');
    CString::new(text).unwrap_or_default()
}

/// The message of the last failure on this thread ("" when none), valid until the next failing
/// `slim_*` call on this thread.
pub(crate) fn message() -> *const c_char {
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        let l = &mut *l;
        let msg = l.message.get_or_insert_with(|| match &l.error {
            Some((call, error)) => format(call, error),
            None => CString::default(),
        });
        msg.as_ptr()
    })
}

/// Returns a description of the last failed `slim_*` call on the calling thread (never NULL;
/// an empty string when nothing failed yet). Like `errno`, a successful call leaves it alone.
/// The string stays valid until the next failing `slim_*` call on this thread.
#[no_mangle]
pub extern "C" fn slim_last_error() -> *const c_char {
    std::panic::catch_unwind(message).unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read() -> String {
        // SAFETY: `message` returns a NUL-terminated string that lives in this thread's slot
        // until the next failure, and nothing fails in between.
        unsafe { std::ffi::CStr::from_ptr(message()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn the_message_names_the_call_and_every_cause() {
        std::thread::spawn(|| {
            assert_eq!(read(), "");
            let source = crate::GuestError::Config("queue_size must be a power of two in 4..=1024");
            set("slim_open", CapiError::Config(source));
            assert_eq!(
                read(),
                "slim_open: bad slim_config: invalid configuration: queue_size must be a power of two in 4..=1024"
            );
        })
        .join()
        .expect("thread");
    }
}
