//! `poll`, `ppoll`, `select`, `pselect`, `epoll_ctl`, `epoll_wait`, `epoll_pwait`,
//! `epoll_pwait2` (`epoll_create`/`epoll_create1` are the kernel's own).

use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};

use crate::epoll::{self, EPOLLS};
use crate::errno::{guard, ret_int};
use crate::socket::SOCKETS;
use crate::{poll as polling, real};

/// # Safety
/// `fds` valid for `n` entries.
unsafe fn fds_mut<'a>(fds: *mut pollfd, n: nfds_t) -> &'a mut [pollfd] {
    if n == 0 || fds.is_null() {
        return &mut [];
    }
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts_mut(fds, n as usize) }
}

/// # Safety
/// C `poll(2)`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let set = unsafe { fds_mut(fds, n) };
    if !polling::has_slim(set) {
        // SAFETY: the caller's call, unchanged.
        return unsafe { real::poll(fds, n, timeout) };
    }
    // SAFETY: no signal mask.
    ret_int(guard(|| unsafe { polling::poll(set, super::millis(timeout), std::ptr::null()) }))
}

/// # Safety
/// C `ppoll(2)`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: forwarded contract.
    let set = unsafe { fds_mut(fds, n) };
    if !polling::has_slim(set) {
        // SAFETY: the caller's call, unchanged.
        return unsafe { real::ppoll(fds, n, ts, mask) };
    }
    // SAFETY: forwarded contract.
    ret_int(guard(|| unsafe { polling::poll(set, super::timespec(ts), mask) }))
}

/// # Safety
/// C `select(2)`.
#[no_mangle]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    tv: *mut timeval,
) -> c_int {
    // SAFETY: forwarded contract.
    if !unsafe { polling::select_has_slim(n, [r, w, e]) } {
        // SAFETY: the caller's call, unchanged.
        return unsafe { real::select(n, r, w, e, tv) };
    }
    let timeout = if tv.is_null() {
        None
    } else {
        // SAFETY: non-null, valid (contract).
        let t = unsafe { *tv };
        Some(
            std::time::Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), 0)
                + std::time::Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0)),
        )
    };
    // SAFETY: forwarded contract.
    ret_int(guard(|| unsafe { polling::select(n, r, w, e, timeout, std::ptr::null()) }))
}

/// # Safety
/// C `pselect(2)`.
#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    ts: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: forwarded contract.
    if !unsafe { polling::select_has_slim(n, [r, w, e]) } {
        // SAFETY: the caller's call, unchanged.
        return unsafe { real::pselect(n, r, w, e, ts, mask) };
    }
    // SAFETY: forwarded contract.
    ret_int(guard(|| unsafe { polling::select(n, r, w, e, super::timespec(ts), mask) }))
}

/// # Safety
/// C `epoll_ctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> c_int {
    if SOCKETS.marked(fd) {
        // SAFETY: forwarded contract.
        return ret_int(guard(|| unsafe { epoll::ctl(epfd, op, fd, event) }));
    }
    // SAFETY: the caller's call, unchanged.
    unsafe { real::epoll_ctl(epfd, op, fd, event) }
}

/// # Safety
/// C `epoll_wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { epoll_pwait(epfd, events, max, timeout, std::ptr::null()) }
}

/// # Safety
/// C `epoll_pwait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    match EPOLLS.get(epfd) {
        Some(side) => {
            // SAFETY: forwarded contract.
            ret_int(guard(|| unsafe { epoll::wait(epfd, &side, events, max, super::millis(timeout), mask) }))
        }
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::epoll_pwait(epfd, events, max, timeout, mask) },
    }
}

/// # Safety
/// C `epoll_pwait2(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    match EPOLLS.get(epfd) {
        Some(side) => {
            // SAFETY: forwarded contract.
            ret_int(guard(|| unsafe {
                epoll::wait(epfd, &side, events, max, super::timespec(timeout), mask)
            }))
        }
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::epoll_pwait2(epfd, events, max, timeout, mask) },
    }
}
