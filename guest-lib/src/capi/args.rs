//! Checked conversions of C arguments: pointers (NULL is an error, never a crash), strings,
//! buffers, descriptors.

use std::ffi::{c_char, c_int, CStr};

use slimtcp_api::{EpollFd, Fd};

use super::error::CapiError;

/// `*p` as a shared reference.
///
/// # Safety
/// `p` is NULL or points to a valid `T` that nothing mutates for `'a`.
pub(crate) unsafe fn get<'a, T>(p: *const T, arg: &'static str) -> Result<&'a T, CapiError> {
    // SAFETY: the caller guarantees `p` is NULL or valid; `as_ref` handles NULL.
    unsafe { p.as_ref() }.ok_or(CapiError::Null(arg))
}

/// `*p` as an exclusive reference.
///
/// # Safety
/// `p` is NULL or points to a valid `T` that nothing else accesses for `'a`.
pub(crate) unsafe fn get_mut<'a, T>(p: *mut T, arg: &'static str) -> Result<&'a mut T, CapiError> {
    // SAFETY: the caller guarantees `p` is NULL or valid and unaliased; `as_mut` handles NULL.
    unsafe { p.as_mut() }.ok_or(CapiError::Null(arg))
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn string<'a>(p: *const c_char, arg: &'static str) -> Result<&'a str, CapiError> {
    if p.is_null() {
        return Err(CapiError::Null(arg));
    }
    // SAFETY: not NULL, and the caller guarantees NUL termination and lifetime.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| CapiError::NotUtf8(arg))
}

/// `len` bytes at `p`; `p` may be NULL only when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` readable bytes that nothing mutates for `'a`.
pub(crate) unsafe fn bytes<'a>(p: *const u8, len: usize, arg: &'static str) -> Result<&'a [u8], CapiError> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(CapiError::Null(arg));
    }
    // SAFETY: not NULL; the caller guarantees `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `len` writable bytes at `p`; `p` may be NULL only when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` writable bytes that nothing else accesses for `'a`.
pub(crate) unsafe fn bytes_mut<'a>(
    p: *mut u8,
    len: usize,
    arg: &'static str,
) -> Result<&'a mut [u8], CapiError> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(CapiError::Null(arg));
    }
    // SAFETY: not NULL; the caller guarantees `len` writable, unaliased bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// A socket descriptor argument (a negative one is no socket: `EBADF`, as in POSIX).
pub(crate) fn fd(fd: c_int, call: &'static str) -> Result<Fd, CapiError> {
    u32::try_from(fd).map(Fd).map_err(|_| CapiError::socket(call)(slimtcp_api::SocketError::BadHandle))
}

/// An epoll descriptor argument.
pub(crate) fn epoll_fd(ep: c_int, call: &'static str) -> Result<EpollFd, CapiError> {
    u32::try_from(ep).map(EpollFd).map_err(|_| CapiError::socket(call)(slimtcp_api::SocketError::BadHandle))
}

/// A non-negative `int` argument as a count.
pub(crate) fn count(value: c_int, arg: &'static str) -> Result<usize, CapiError> {
    usize::try_from(value).map_err(|_| CapiError::BadArgument {
        arg,
        value: value.into(),
        expected: "not negative",
    })
}

/// A descriptor the library returned, as a C `int`.
pub(crate) fn to_c(n: u32) -> Result<c_int, CapiError> {
    c_int::try_from(n).map_err(|_| CapiError::socket("descriptor")(slimtcp_api::SocketError::TooManySockets))
}
