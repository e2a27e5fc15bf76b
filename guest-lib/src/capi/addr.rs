//! `struct sockaddr_in` (network byte order, as the kernel takes and gives it) to and from
//! [`SocketAddrV4`].

use std::net::{Ipv4Addr, SocketAddrV4};

use super::error::CapiError;

/// The address in `sa`; `AF_INET` only.
pub(crate) fn from_c(sa: &libc::sockaddr_in) -> Result<SocketAddrV4, CapiError> {
    if libc::c_int::from(sa.sin_family) != libc::AF_INET {
        return Err(CapiError::AddressFamily(sa.sin_family.into()));
    }
    Ok(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)), u16::from_be(sa.sin_port)))
}

/// `addr` as a `sockaddr_in` (padding zeroed).
pub(crate) fn to_c(addr: SocketAddrV4) -> libc::sockaddr_in {
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
        let sa = to_c(a);
        assert_eq!(sa.sin_port.to_ne_bytes(), 5201u16.to_be_bytes());
        assert_eq!(sa.sin_addr.s_addr.to_ne_bytes(), [10, 0, 0, 2]);
        assert_eq!(from_c(&sa).ok(), Some(a));
    }

    #[test]
    fn other_families_are_refused() {
        let mut sa = to_c(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1));
        sa.sin_family = libc::AF_INET6 as libc::sa_family_t;
        assert_eq!(from_c(&sa).map_err(|e| e.errno()).err(), Some(libc::EAFNOSUPPORT));
    }
}
