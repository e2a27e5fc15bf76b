//! `read`, `write`, `readv`, `writev`, `recv`, `send`, `recvfrom`, `sendto`, `recvmsg`,
//! `sendmsg`, `sendfile`, `sendfile64`.

use libc::{c_int, c_void, iovec, msghdr, off_t, size_t, sockaddr, socklen_t, ssize_t};

use crate::errno::{guard, ret_size};
use crate::socket::SOCKETS;
use crate::{addr, io, real};

/// The caller's buffer as a slice (empty for a zero length).
///
/// # Safety
/// `buf` valid for writes of `n` bytes when `n > 0`.
pub(super) unsafe fn out<'a>(buf: *mut c_void, n: size_t) -> &'a mut [u8] {
    if n == 0 || buf.is_null() {
        return &mut [];
    }
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts_mut(buf.cast(), n) }
}

/// # Safety
/// `buf` valid for reads of `n` bytes when `n > 0`.
unsafe fn data<'a>(buf: *const c_void, n: size_t) -> &'a [u8] {
    if n == 0 || buf.is_null() {
        return &[];
    }
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts(buf.cast(), n) }
}

/// `recvfrom` on a SlimTCP socket (also `read`, `recv` and the fortified forms).
///
/// # Safety
/// As for `recvfrom(2)`.
pub(super) unsafe fn recv_on(
    e: &crate::socket::Entry,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    from: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    ret_size(guard(|| {
        // SAFETY: forwarded contract.
        let (got, src) = io::recv(e, unsafe { out(buf, n) }, flags)?;
        match src {
            // SAFETY: forwarded contract.
            Some(a) => unsafe { addr::write(a, from, len) },
            None if !len.is_null() && !from.is_null() => {
                // SAFETY: non-null, valid (contract). A stream's recvfrom names no source.
                unsafe { *len = 0 }
            }
            None => {}
        }
        Ok(got)
    }))
}

/// # Safety
/// C `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => unsafe { recv_on(&e, buf, n, 0, std::ptr::null_mut(), std::ptr::null_mut()) },
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::read(fd, buf, n) },
    }
}

/// # Safety
/// C `recv(2)`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => unsafe { recv_on(&e, buf, n, flags, std::ptr::null_mut(), std::ptr::null_mut()) },
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::recv(fd, buf, n, flags) },
    }
}

/// # Safety
/// C `recvfrom(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    from: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => unsafe { recv_on(&e, buf, n, flags, from, len) },
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::recvfrom(fd, buf, n, flags, from, len) },
    }
}

/// # Safety
/// C `write(2)`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_size(guard(|| io::send(fd, &e, unsafe { data(buf, n) }, 0, None))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::write(fd, buf, n) },
    }
}

/// # Safety
/// C `send(2)`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_size(guard(|| io::send(fd, &e, unsafe { data(buf, n) }, flags, None))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::send(fd, buf, n, flags) },
    }
}

/// # Safety
/// C `sendto(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    to: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    match SOCKETS.get(fd) {
        Some(e) => ret_size(guard(|| {
            // SAFETY: forwarded contract.
            let dst = if to.is_null() { None } else { Some(unsafe { addr::read(to, len) }?) };
            // SAFETY: forwarded contract.
            io::send(fd, &e, unsafe { data(buf, n) }, flags, dst)
        })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::sendto(fd, buf, n, flags, to, len) },
    }
}

/// # Safety
/// C `readv(2)`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match SOCKETS.get(fd) {
        Some(e) => ret_size(guard(|| {
            let n = usize::try_from(n).map_err(|_| crate::errno::Errno(libc::EINVAL))?;
            // SAFETY: forwarded contract.
            unsafe { io::recv_vectored(&e, iov, n, 0) }.map(|(k, _)| k)
        })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::readv(fd, iov, n) },
    }
}

/// # Safety
/// C `writev(2)`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match SOCKETS.get(fd) {
        Some(e) => ret_size(guard(|| {
            let n = usize::try_from(n).map_err(|_| crate::errno::Errno(libc::EINVAL))?;
            // SAFETY: forwarded contract.
            unsafe { io::send_vectored(fd, &e, iov, n, 0, None) }
        })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::writev(fd, iov, n) },
    }
}

/// # Safety
/// C `recvmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_size(guard(|| unsafe { io::recvmsg(&e, msg, flags) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::recvmsg(fd, msg, flags) },
    }
}

/// # Safety
/// C `sendmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_size(guard(|| unsafe { io::sendmsg(fd, &e, msg, flags) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::sendmsg(fd, msg, flags) },
    }
}

/// # Safety
/// C `sendfile(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, input: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    match SOCKETS.get(out) {
        // SAFETY: forwarded contract.
        Some(e) => ret_size(guard(|| unsafe { io::sendfile(out, &e, input, offset, count) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::sendfile(out, input, offset, count) },
    }
}

/// # Safety
/// C `sendfile64(2)` (the same call on 64-bit Linux).
#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, input: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    match SOCKETS.get(out) {
        // SAFETY: forwarded contract.
        Some(e) => ret_size(guard(|| unsafe { io::sendfile(out, &e, input, offset, count) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::sendfile64(out, input, offset, count) },
    }
}
