//! Descriptor calls on SlimTCP socket numbers: `close`, `close_range`, `dup`, `dup2`, `dup3`, `fcntl`
//! (`O_NONBLOCK`, `F_DUPFD*`), `ioctl` (`FIONBIO`, `FIONREAD`). Everything else (`F_SETFD`,
//! locks, ...) acts on the eventfd that holds the number.

use std::sync::atomic::Ordering;

use libc::{c_int, c_ulong};
use slimtcp_api::Proto;

use crate::epoll::EPOLLS;
use crate::errno::{guard, ret_int, Errno, Sys};
use crate::net::{dev, kernel};
use crate::socket::{self, Entry, SOCKETS};
use crate::{device, real};

/// # Safety
/// C `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if SOCKETS.marked(fd) {
        return ret_int(guard(|| socket::close(fd)));
    }
    if EPOLLS.marked(fd) {
        crate::epoll::close(fd);
    }
    // SAFETY: the caller's call, unchanged.
    unsafe { real::close(fd) }
}

/// # Safety
/// C `close_range(2)`: the SlimTCP sockets and epoll sets in the range are closed as by
/// `close` first (`CLOSE_RANGE_CLOEXEC` only marks descriptors, so it forgets nothing).
#[no_mangle]
pub unsafe extern "C" fn close_range(first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int {
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        let in_range = |fd: c_int| u32::try_from(fd).is_ok_and(|n| n >= first && n <= last);
        for (fd, _) in SOCKETS.all() {
            if in_range(fd) {
                let _ = guard(|| socket::close(fd));
            }
        }
        for (fd, _) in EPOLLS.all() {
            if in_range(fd) {
                crate::epoll::close(fd);
            }
        }
    }
    // SAFETY: the caller's call.
    unsafe { real::close_range(first, last, flags) }
}

/// # Safety
/// C `dup(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: the caller's call.
    let new = unsafe { real::dup(fd) };
    if new >= 0 {
        if let Some(e) = SOCKETS.get(fd) {
            socket::add_name(e, new);
        }
    }
    new
}

/// # Safety
/// C `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, to: c_int) -> c_int {
    if fd != to && SOCKETS.marked(to) {
        socket::drop_name(to);
    }
    // SAFETY: the caller's call.
    let rc = unsafe { real::dup2(fd, to) };
    if rc >= 0 && fd != to {
        if let Some(e) = SOCKETS.get(fd) {
            socket::add_name(e, to);
        }
    }
    rc
}

/// # Safety
/// C `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, to: c_int, flags: c_int) -> c_int {
    if fd != to && SOCKETS.marked(to) {
        socket::drop_name(to);
    }
    // SAFETY: the caller's call.
    let rc = unsafe { real::dup3(fd, to, flags) };
    if rc >= 0 {
        if let Some(e) = SOCKETS.get(fd) {
            socket::add_name(e, to);
        }
    }
    rc
}

fn fcntl_on(fd: c_int, e: std::sync::Arc<Entry>, cmd: c_int, arg: c_ulong) -> Sys<c_int> {
    match cmd {
        libc::F_GETFL => {
            // SAFETY: plain system call on the number's eventfd.
            let flags = kernel(unsafe { real::fcntl(fd, libc::F_GETFL, 0) })?;
            let nb = if e.nonblocking.load(Ordering::Relaxed) { libc::O_NONBLOCK } else { 0 };
            Ok(flags & !libc::O_NONBLOCK | nb)
        }
        libc::F_SETFL => {
            e.nonblocking.store(arg as c_int & libc::O_NONBLOCK != 0, Ordering::Relaxed);
            Ok(0)
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            // SAFETY: plain system call on the number's eventfd.
            let new = kernel(unsafe { real::fcntl(fd, cmd, arg) })?;
            socket::add_name(e, new);
            Ok(new)
        }
        // SAFETY: plain system call on the number's eventfd.
        _ => kernel(unsafe { real::fcntl(fd, cmd, arg) }),
    }
}

/// # Safety
/// C `fcntl(2)` (see the module documentation of `calls` for the variadic argument).
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match SOCKETS.get(fd) {
        Some(e) => ret_int(guard(|| fcntl_on(fd, e, cmd, arg))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::fcntl(fd, cmd, arg) },
    }
}

/// # Safety
/// C `fcntl64` (glibc's large-file name of `fcntl`).
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    match SOCKETS.get(fd) {
        Some(e) => ret_int(guard(|| fcntl_on(fd, e, cmd, arg))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::fcntl64(fd, cmd, arg) },
    }
}

/// `FIONREAD`: bytes a read returns now.
fn readable(e: &Entry) -> Sys<c_int> {
    let peeked = device::lock(&e.peeked).len();
    let s = match e.slim() {
        Ok(s) => s,
        Err(_) if e.proto == Proto::Udp || e.pending() => return Ok(0),
        Err(err) => return Err(err),
    };
    let n = dev()?.with_pair(s.pair, |api| {
        let _ = api.progress();
        api.readable_bytes(s.fd)
    })??;
    Ok(c_int::try_from(n + peeked).unwrap_or(c_int::MAX))
}

/// # Safety
/// C `ioctl(2)` (see the module documentation of `calls` for the variadic argument).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: c_ulong) -> c_int {
    let Some(e) = SOCKETS.get(fd) else {
        // SAFETY: the caller's call, unchanged.
        return unsafe { real::ioctl(fd, request, arg) };
    };
    let p = arg as *mut c_int;
    ret_int(guard(|| match request {
        _ if p.is_null() && matches!(request, libc::FIONBIO | libc::FIONREAD) => Err(Errno(libc::EFAULT)),
        libc::FIONBIO => {
            // SAFETY: non-null int pointer, as FIONBIO's contract says.
            e.nonblocking.store(unsafe { *p } != 0, Ordering::Relaxed);
            Ok(0)
        }
        libc::FIONREAD => {
            let n = readable(&e)?;
            // SAFETY: non-null int pointer, as FIONREAD's contract says.
            unsafe { *p = n };
            Ok(0)
        }
        // SAFETY: the caller's call on the number's eventfd.
        _ => kernel(unsafe { real::ioctl(fd, request, arg) }),
    }))
}
