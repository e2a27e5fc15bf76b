//! The copy data path: `slim_send`, `slim_recv`, `slim_sendto`, `slim_recvfrom`. Each returns
//! the bytes moved (`ssize_t`, >= 0) or a negative errno.

use std::ffi::{c_int, c_void};

use slimtcp_api::SocketApi;

use super::device::{api, SlimCtx};
use super::entry::guarded;
use super::error::CapiError;
use super::{addr, args};

/// The `ssize_t` of a byte count (at most a slice's length, so at most `isize::MAX`).
fn ssize(n: usize) -> libc::ssize_t {
    isize::try_from(n).unwrap_or(isize::MAX)
}

/// Copies up to `len` bytes from `buf` into the stream of `fd` (a UDP socket: one datagram to
/// its connected peer); returns how many were taken. A blocking socket waits for room.
///
/// # Safety
/// `buf` is NULL (only with `len` 0) or `len` readable bytes; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_send(
    ctx: *mut SlimCtx,
    fd: c_int,
    buf: *const c_void,
    len: usize,
) -> libc::ssize_t {
    guarded("slim_send", || {
        // SAFETY: forwarded from the caller.
        let (api, data) = unsafe { (api(ctx)?, args::bytes(buf.cast(), len, "buf")?) };
        api.send(args::fd(fd, "send")?, data).map(ssize).map_err(CapiError::socket("send"))
    })
}

/// Copies received bytes of `fd` into `buf` (at most `len`); returns how many, 0 only at end
/// of stream (`-EAGAIN` when a non-blocking socket has nothing).
///
/// # Safety
/// `buf` is NULL (only with `len` 0) or `len` writable bytes; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_recv(
    ctx: *mut SlimCtx,
    fd: c_int,
    buf: *mut c_void,
    len: usize,
) -> libc::ssize_t {
    guarded("slim_recv", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::bytes_mut(buf.cast(), len, "buf")?) };
        api.recv(args::fd(fd, "recv")?, out).map(ssize).map_err(CapiError::socket("recv"))
    })
}

/// Sends `len` bytes from `buf` as one datagram to `dst` (UDP); returns `len`.
///
/// # Safety
/// `buf` as for `slim_send`; `dst` is NULL or a valid `struct sockaddr_in`.
#[no_mangle]
pub unsafe extern "C" fn slim_sendto(
    ctx: *mut SlimCtx,
    fd: c_int,
    buf: *const c_void,
    len: usize,
    dst: *const libc::sockaddr_in,
) -> libc::ssize_t {
    guarded("slim_sendto", || {
        // SAFETY: forwarded from the caller.
        let (api, data, dst) =
            unsafe { (api(ctx)?, args::bytes(buf.cast(), len, "buf")?, args::get(dst, "dst")?) };
        let dst = addr::from_c(dst)?;
        api.send_to(args::fd(fd, "sendto")?, data, dst).map(ssize).map_err(CapiError::socket("sendto"))
    })
}

/// Receives one datagram into `buf` (truncated to `len`) and, when `src` is not NULL, stores
/// its source there; returns the bytes stored.
///
/// # Safety
/// `buf` as for `slim_recv`; `src` is NULL or writable for a `struct sockaddr_in`.
#[no_mangle]
pub unsafe extern "C" fn slim_recvfrom(
    ctx: *mut SlimCtx,
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    src: *mut libc::sockaddr_in,
) -> libc::ssize_t {
    guarded("slim_recvfrom", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::bytes_mut(buf.cast(), len, "buf")?) };
        let (n, from) =
            api.recv_from(args::fd(fd, "recvfrom")?, out).map_err(CapiError::socket("recvfrom"))?;
        // SAFETY: the caller guarantees `src` is NULL or writable.
        if let Some(src) = unsafe { src.as_mut() } {
            *src = addr::to_c(from);
        }
        Ok(ssize(n))
    })
}
