//! `socket`, `bind`, `listen`, `accept`, `accept4`, `connect`, `shutdown`, `getsockname`,
//! `getpeername`, `setsockopt`, `getsockopt`.

use libc::{c_int, c_void, sockaddr, socklen_t};

use crate::errno::{guard, ret_int, Errno};
use crate::socket::SOCKETS;
use crate::{net, options, real};

/// # Safety
/// C `socket(2)`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let ours = domain == libc::AF_INET
        && matches!(
            (base, protocol),
            (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) | (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP)
        );
    if ours {
        match guard(|| net::socket(ty)) {
            Ok(Some(fd)) => return fd,
            Ok(None) => {}
            Err(e) => return ret_int(Err(e)),
        }
    }
    // SAFETY: the caller's call, unchanged.
    unsafe { real::socket(domain, ty, protocol) }
}

/// # Safety
/// C `bind(2)`.
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { net::bind(fd, &e, addr, len) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::bind(fd, addr, len) },
    }
}

/// # Safety
/// C `listen(2)`.
#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    match SOCKETS.get(fd) {
        Some(e) => ret_int(guard(|| net::listen(&e, backlog))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::listen(fd, backlog) },
    }
}

/// # Safety
/// C `accept(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { net::accept4(&e, addr, len, 0) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::accept(fd, addr, len) },
    }
}

/// # Safety
/// C `accept4(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { net::accept4(&e, addr, len, flags) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::accept4(fd, addr, len, flags) },
    }
}

/// # Safety
/// C `connect(2)`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { net::connect(fd, &e, addr, len) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::connect(fd, addr, len) },
    }
}

/// # Safety
/// C `shutdown(2)`.
#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    match SOCKETS.get(fd) {
        Some(e) => ret_int(guard(|| net::shutdown(&e, how))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::shutdown(fd, how) },
    }
}

/// # Safety
/// C `getsockname(2)`.
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { net::name(&e, true, addr, len) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::getsockname(fd, addr, len) },
    }
}

/// # Safety
/// C `getpeername(2)`.
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { net::name(&e, false, addr, len) })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::getpeername(fd, addr, len) },
    }
}

/// # Safety
/// C `setsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    match SOCKETS.get(fd) {
        Some(e) => ret_int(guard(|| {
            if val.is_null() && len > 0 {
                return Err(Errno(libc::EFAULT));
            }
            let value: &[u8] = if len == 0 {
                &[]
            } else {
                // SAFETY: non-null, valid for `len` bytes (contract).
                unsafe { std::slice::from_raw_parts(val.cast(), len as usize) }
            };
            options::set(&e, level, name, value).map(|()| 0)
        })),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::setsockopt(fd, level, name, val, len) },
    }
}

/// # Safety
/// C `getsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    match SOCKETS.get(fd) {
        // SAFETY: forwarded contract.
        Some(e) => ret_int(guard(|| unsafe { options::get(&e, level, name, val, len) }.map(|()| 0))),
        // SAFETY: the caller's call, unchanged.
        None => unsafe { real::getsockopt(fd, level, name, val, len) },
    }
}
