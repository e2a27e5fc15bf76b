//! `_exit` and `_Exit`: a process that ends without `exit` (no `atexit` handlers) still lets its
//! connections finish, as the kernel would close its sockets ([`device::linger`]). A `vfork`
//! child (same memory, other pid) and a `fork` child do nothing of the sort.

use libc::c_int;

use crate::{device, real};

/// # Safety
/// C `_exit(2)`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    device::linger();
    // SAFETY: the caller's call.
    unsafe { real::_exit(status) }
}

/// # Safety
/// C `_Exit` (the same as `_exit`).
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    device::linger();
    // SAFETY: the caller's call.
    unsafe { real::_Exit(status) }
}
