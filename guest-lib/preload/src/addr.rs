//! `struct sockaddr_in` in and out of intercepted calls, with Linux's pointer and length rules
//! (the conversion itself is [`slimtcp_guest::sockaddr`]'s).

use std::net::SocketAddrV4;

use libc::{c_int, sockaddr, sockaddr_in, socklen_t};

use slimtcp_guest::sockaddr::{from_sockaddr_in, to_sockaddr_in};

use crate::errno::{Errno, Sys};

/// The address family at `addr` (`None` for NULL or too short).
///
/// # Safety
/// `addr` must be NULL or valid for `len` bytes.
pub unsafe fn family(addr: *const sockaddr, len: socklen_t) -> Option<c_int> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family field is readable (checked above).
    Some(c_int::from(unsafe { std::ptr::addr_of!((*addr).sa_family).read_unaligned() }))
}

/// The IPv4 address at `addr`.
///
/// # Safety
/// `addr` must be NULL or valid for `len` bytes.
pub unsafe fn read(addr: *const sockaddr, len: socklen_t) -> Sys<SocketAddrV4> {
    if addr.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: forwarded contract.
    if unsafe { family(addr, len) } != Some(libc::AF_INET) {
        return Err(Errno(libc::EAFNOSUPPORT));
    }
    if (len as usize) < std::mem::size_of::<sockaddr_in>() {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: `len` covers a sockaddr_in (checked); read_unaligned copes with any alignment.
    let sin: sockaddr_in = unsafe { std::ptr::read_unaligned(addr.cast()) };
    from_sockaddr_in(&sin).ok_or(Errno(libc::EAFNOSUPPORT))
}

/// Writes `a` at `addr` as Linux does: at most `*len` bytes, `*len` set to the full size.
/// NULL pointers write nothing.
///
/// # Safety
/// `addr` must be NULL or valid for `*len` bytes; `len` NULL or valid.
pub unsafe fn write(a: SocketAddrV4, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let sin = to_sockaddr_in(a);
    let size = std::mem::size_of::<sockaddr_in>();
    // SAFETY: `len` is valid (caller); we copy at most `*len` bytes into `addr`, which the caller
    // made valid for that many.
    unsafe {
        let room = (*len as usize).min(size);
        std::ptr::copy_nonoverlapping((&sin as *const sockaddr_in).cast::<u8>(), addr.cast::<u8>(), room);
        *len = size as socklen_t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let a: SocketAddrV4 = "10.0.0.2:5201".parse().expect("addr");
        // SAFETY: a zeroed sockaddr_in is valid.
        let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<sockaddr_in>() as socklen_t;
        let p = (&mut sin as *mut sockaddr_in).cast::<sockaddr>();
        // SAFETY: `p` points at a sockaddr_in of `len` bytes.
        unsafe {
            write(a, p, &mut len);
            assert_eq!(read(p, len), Ok(a));
            assert_eq!(read(p, 4), Err(Errno(libc::EINVAL)));
            assert_eq!(read(std::ptr::null(), 16), Err(Errno(libc::EFAULT)));
        }
        let mut small = [0u8; 4];
        let mut len = 4 as socklen_t;
        // SAFETY: 4 bytes of room, and len says 4.
        unsafe { write(a, small.as_mut_ptr().cast(), &mut len) };
        assert_eq!(len as usize, std::mem::size_of::<sockaddr_in>());
        assert_eq!(u16::from_ne_bytes([small[0], small[1]]), libc::AF_INET as u16);
    }
}
