//! The `_FORTIFY_SOURCE` forms (`__read_chk`, `__recv_chk`, `__recvfrom_chk`, `__poll_chk`,
//! `__ppoll_chk`): Debian builds its packages with them, and glibc's own versions call the
//! system call directly, past the plain symbols. Each checks the buffer size as glibc does
//! (aborting on overflow) and then behaves as the plain call.

use libc::{c_int, c_void, nfds_t, pollfd, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec};

use crate::real;
use crate::socket::SOCKETS;

/// glibc's reaction to a detected overflow.
fn chk_fail() -> ! {
    let msg = b"*** buffer overflow detected ***: terminated\n";
    // SAFETY: writes a static buffer to stderr, then aborts as glibc's __chk_fail does.
    unsafe {
        real::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

/// # Safety
/// glibc's `__read_chk`.
#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t {
    match SOCKETS.get(fd) {
        Some(e) => {
            if n > buflen {
                chk_fail();
            }
            // SAFETY: forwarded contract.
            unsafe { super::io::recv_on(&e, buf, n, 0, std::ptr::null_mut(), std::ptr::null_mut()) }
        }
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::__read_chk(fd, buf, n, buflen) },
    }
}

/// # Safety
/// glibc's `__recv_chk`.
#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    match SOCKETS.get(fd) {
        Some(e) => {
            if n > buflen {
                chk_fail();
            }
            // SAFETY: forwarded contract.
            unsafe { super::io::recv_on(&e, buf, n, flags, std::ptr::null_mut(), std::ptr::null_mut()) }
        }
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::__recv_chk(fd, buf, n, buflen, flags) },
    }
}

/// # Safety
/// glibc's `__recvfrom_chk`.
#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    from: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    match SOCKETS.get(fd) {
        Some(e) => {
            if n > buflen {
                chk_fail();
            }
            // SAFETY: forwarded contract.
            unsafe { super::io::recv_on(&e, buf, n, flags, from, len) }
        }
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::__recvfrom_chk(fd, buf, n, buflen, flags, from, len) },
    }
}

/// # Safety
/// glibc's `__poll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int {
    if (fdslen / std::mem::size_of::<pollfd>()) < n as usize {
        chk_fail();
    }
    // SAFETY: forwarded contract.
    unsafe { super::wait::poll(fds, n, timeout) }
}

/// # Safety
/// glibc's `__ppoll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
    fdslen: size_t,
) -> c_int {
    if (fdslen / std::mem::size_of::<pollfd>()) < n as usize {
        chk_fail();
    }
    // SAFETY: forwarded contract.
    unsafe { super::wait::ppoll(fds, n, ts, mask) }
}
