//! `struct sockaddr_in` to and from [`SocketAddrV4`] with the C API's errors
//! ([`crate::sockaddr`] converts).

use std::net::SocketAddrV4;

use super::error::CapiError;

/// The address in `sa`; `AF_INET` only.
pub(crate) fn from_c(sa: &libc::sockaddr_in) -> Result<SocketAddrV4, CapiError> {
    crate::sockaddr::from_sockaddr_in(sa).ok_or(CapiError::AddressFamily(sa.sin_family.into()))
}

/// `addr` as a `sockaddr_in` (padding zeroed).
pub(crate) fn to_c(addr: SocketAddrV4) -> libc::sockaddr_in {
    crate::sockaddr::to_sockaddr_in(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

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
