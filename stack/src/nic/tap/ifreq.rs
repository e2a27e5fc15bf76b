//! Interface ioctls of a TAP: `struct ifreq` and the `AF_INET` control socket that carries the
//! `SIOC[GS]IF*` requests (flags, MTU, address, transmit queue), plus the integer-argument
//! `TUNSET*` requests of the TUN/TAP descriptor itself.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use libc::{c_char, c_int, c_short, c_uchar, c_ulong, c_ushort};

use super::TapError;

/// `struct ifmap` from `<linux/if.h>`: the largest member of the `ifreq` union.
#[repr(C)]
#[derive(Clone, Copy)]
struct IfMap {
    mem_start: c_ulong,
    mem_end: c_ulong,
    base_addr: c_ushort,
    irq: c_uchar,
    dma: c_uchar,
    port: c_uchar,
}

/// The `ifr_ifru` union of `struct ifreq`, restricted to the members used here.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) union IfReqData {
    pub(super) addr: libc::sockaddr_in,
    pub(super) flags: c_short,
    pub(super) mtu: c_int,
    pub(super) qlen: c_int,
    map: IfMap,
}

/// `struct ifreq` from `<linux/if.h>` (layout checked against `libc::ifreq` in the tests).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct IfReq {
    name: [c_char; libc::IFNAMSIZ],
    pub(super) data: IfReqData,
}

impl IfReq {
    /// A zeroed request for interface `name` (at most `IFNAMSIZ - 1` bytes, no NUL).
    pub(super) fn new(name: &str) -> Option<Self> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return None;
        }
        // `map` is the largest member, so this initialises every byte of the union.
        let map = IfMap { mem_start: 0, mem_end: 0, base_addr: 0, irq: 0, dma: 0, port: 0 };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: IfReqData { map } };
        for (dst, src) in req.name.iter_mut().zip(bytes) {
            *dst = *src as c_char;
        }
        Some(req)
    }

    /// The (NUL-terminated) interface name in the request.
    pub(super) fn name(&self) -> String {
        let bytes: Vec<u8> = self.name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub(super) fn flags(&self) -> c_short {
        // SAFETY: every byte of the union is initialised (`new` writes the largest member) and
        // any bit pattern is a valid `c_short`.
        unsafe { self.data.flags }
    }

    pub(super) fn mtu(&self) -> c_int {
        // SAFETY: every byte of the union is initialised (`new` writes the largest member) and
        // any bit pattern is a valid `c_int`.
        unsafe { self.data.mtu }
    }
}

fn sockaddr_in(addr: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(addr.octets()) },
        sin_zero: [0; 8],
    }
}

/// The netmask of a prefix length, or `None` above 32.
pub(super) fn prefix_mask(prefix_len: u8) -> Option<Ipv4Addr> {
    match prefix_len {
        0 => Some(Ipv4Addr::UNSPECIFIED),
        1..=32 => Some(Ipv4Addr::from(u32::MAX << (32 - u32::from(prefix_len)))),
        _ => None,
    }
}

/// Issues an interface ioctl taking a `struct ifreq`.
pub(super) fn ioctl_ifreq(fd: RawFd, request: libc::Ioctl, req: &mut IfReq) -> io::Result<()> {
    // SAFETY: `req` is an exclusively borrowed, fully initialised `struct ifreq` with the kernel's
    // layout, alive for the whole call; the requests used here (TUNSETIFF, SIOC[GS]IF*) read and
    // write only within that struct.
    let rc = unsafe { libc::ioctl(fd, request, req as *mut IfReq) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// An `AF_INET` socket for interface ioctls, in the calling thread's network namespace.
pub(super) fn control_socket() -> Result<OwnedFd, TapError> {
    // SAFETY: plain socket(2) call with constant arguments; no pointers involved.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(TapError::ControlSocket(io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a freshly created socket descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Frames the kernel may queue for us on the device (its transmit queue, kernel -> SlimTCP).
/// Linux's default of 1000 overflows while a busy worker is away for a moment, and SlimTCP,
/// which keeps no reorder buffer, pays each dropped frame with a go-back-N retransmission.
const TAP_TX_QUEUE: c_int = 10_000;

pub(super) fn set_up_via(fd: RawFd, name: &str) -> Result<(), TapError> {
    let mut req = IfReq::new(name).ok_or_else(|| TapError::InvalidName { name: name.to_string() })?;
    ioctl_ifreq(fd, libc::SIOCGIFFLAGS as libc::Ioctl, &mut req)
        .map_err(|source| TapError::GetFlags { name: name.to_string(), source })?;
    req.data.flags = req.flags() | libc::IFF_UP as c_short;
    ioctl_ifreq(fd, libc::SIOCSIFFLAGS as libc::Ioctl, &mut req)
        .map_err(|source| TapError::SetFlags { name: name.to_string(), source })?;
    let mut qlen = IfReq::new(name).ok_or_else(|| TapError::InvalidName { name: name.to_string() })?;
    qlen.data.qlen = TAP_TX_QUEUE;
    if let Err(e) = ioctl_ifreq(fd, libc::SIOCSIFTXQLEN as libc::Ioctl, &mut qlen) {
        // Not fatal: the device works with the kernel's default queue, only drops sooner.
        log::warn!("{name}: cannot set the transmit queue to {TAP_TX_QUEUE} frames: {e}");
    }
    Ok(())
}

pub(super) fn set_address_via(fd: RawFd, name: &str, addr: Ipv4Addr, prefix_len: u8) -> Result<(), TapError> {
    let mask = prefix_mask(prefix_len).ok_or(TapError::InvalidPrefix { prefix_len })?;
    let request = || IfReq::new(name).ok_or_else(|| TapError::InvalidName { name: name.to_string() });
    let mut req = request()?;
    req.data.addr = sockaddr_in(addr);
    ioctl_ifreq(fd, libc::SIOCSIFADDR as libc::Ioctl, &mut req)
        .map_err(|source| TapError::SetAddress { name: name.to_string(), source })?;
    let mut req = request()?;
    req.data.addr = sockaddr_in(mask);
    ioctl_ifreq(fd, libc::SIOCSIFNETMASK as libc::Ioctl, &mut req)
        .map_err(|source| TapError::SetNetmask { name: name.to_string(), source })
}

/// Brings interface `name` of the calling thread's network namespace up and gives it
/// `addr/prefix_len`: the kernel side of a TAP link someone else created (e.g. DPDK's `net_tap`).
pub fn configure_host_side(name: &str, addr: Ipv4Addr, prefix_len: u8) -> Result<(), TapError> {
    let ctl = control_socket()?;
    set_up_via(ctl.as_raw_fd(), name)?;
    set_address_via(ctl.as_raw_fd(), name, addr, prefix_len)
}

/// Issues a `TUNSET*` request whose argument is a pointer to an `int` (`TUNSETVNETHDRSZ`,
/// `TUNSETVNETLE`).
pub(super) fn ioctl_int_ptr(fd: RawFd, request: libc::Ioctl, value: c_int) -> io::Result<()> {
    let mut value = value;
    // SAFETY: `value` is an exclusively borrowed `int` alive for the whole call; these requests
    // read exactly one `int` through the pointer.
    let rc = unsafe { libc::ioctl(fd, request, &mut value as *mut c_int) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Issues a `TUNSET*` request whose argument is passed by value (`TUNSETOFFLOAD`).
pub(super) fn ioctl_value(fd: RawFd, request: libc::Ioctl, value: c_ulong) -> io::Result<()> {
    // SAFETY: no pointer is passed; the kernel reads the argument as a plain integer.
    let rc = unsafe { libc::ioctl(fd, request, value) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_layout_matches_libc() {
        assert_eq!(std::mem::size_of::<IfReq>(), std::mem::size_of::<libc::ifreq>());
        assert_eq!(std::mem::align_of::<IfReq>(), std::mem::align_of::<libc::ifreq>());
        assert_eq!(std::mem::offset_of!(IfReq, data), libc::IFNAMSIZ);
    }

    #[test]
    fn names_are_validated() {
        assert!(IfReq::new("").is_none());
        assert!(IfReq::new("sixteen-chars-xx").is_none());
        assert!(IfReq::new("a\0b").is_none());
        let req = IfReq::new("fifteen-chars-x").expect("15 bytes fit");
        assert_eq!(req.name(), "fifteen-chars-x");
    }

    #[test]
    fn prefix_masks() {
        assert_eq!(prefix_mask(0), Some(Ipv4Addr::new(0, 0, 0, 0)));
        assert_eq!(prefix_mask(24), Some(Ipv4Addr::new(255, 255, 255, 0)));
        assert_eq!(prefix_mask(31), Some(Ipv4Addr::new(255, 255, 255, 254)));
        assert_eq!(prefix_mask(32), Some(Ipv4Addr::new(255, 255, 255, 255)));
        assert_eq!(prefix_mask(33), None);
    }
}
