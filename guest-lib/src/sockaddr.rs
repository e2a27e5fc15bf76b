//! `struct sockaddr_in` (network byte order, as the kernel takes and gives it) to and from
//! [`SocketAddrV4`]: the one conversion the C API (`capi`) and the preload library share.

use std::net::{Ipv4Addr, SocketAddrV4};

/// The address in `sa`; `None` when its family is not `AF_INET`.
pub fn from_sockaddr_in(sa: &libc::sockaddr_in) -> Option<SocketAddrV4> {
    (libc::c_int::from(sa.sin_family) == libc::AF_INET).then(|| {
        SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)), u16::from_be(sa.sin_port))
    })
}

/// `addr` as a `sockaddr_in` (padding zeroed).
pub fn to_sockaddr_in(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_in_network_byte_order() {
        let a = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5201);
        let sa = to_sockaddr_in(a);
        assert_eq!(sa.sin_port.to_ne_bytes(), 5201u16.to_be_bytes());
        assert_eq!(sa.sin_addr.s_addr.to_ne_bytes(), [10, 0, 0, 2]);
        assert_eq!(from_sockaddr_in(&sa), Some(a));
        let mut v6 = sa;
        v6.sin_family = libc::AF_INET6 as libc::sa_family_t;
        assert_eq!(from_sockaddr_in(&v6), None);
    }
}
