//! Ethernet II frames (no VLAN tags, no FCS).

use super::field::{get_mac, get_u16, set_mac, set_u16, sub, sub_mut};
use super::{EthernetAddress, WireError};

/// Length of the Ethernet II header (destination, source, EtherType).
pub const HEADER_LEN: usize = 14;

mod offs {
    pub(super) const DST: usize = 0;
    pub(super) const SRC: usize = 6;
    pub(super) const ETHERTYPE: usize = 12;
}

/// The EtherType of a frame's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// IPv4 (0x0800).
    Ipv4,
    /// ARP (0x0806).
    Arp,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Unknown(other) => other,
        }
    }
}

/// A zero-copy view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length; accessors may panic until
    /// [`check_len`](Self::check_len) has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after checking it holds a whole header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// `Err(Truncated)` if the buffer is shorter than [`HEADER_LEN`].
    #[inline]
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Returns the underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        get_mac(self.buffer.as_ref(), offs::DST)
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        get_mac(self.buffer.as_ref(), offs::SRC)
    }

    /// EtherType of the payload.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(get_u16(self.buffer.as_ref(), offs::ETHERTYPE))
    }

    /// Everything after the header (including any padding to the 60-byte minimum).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), HEADER_LEN, usize::MAX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        set_mac(self.buffer.as_mut(), offs::DST, addr)
    }

    /// Sets the source MAC address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        set_mac(self.buffer.as_mut(), offs::SRC, addr)
    }

    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        set_u16(self.buffer.as_mut(), offs::ETHERTYPE, ethertype.into())
    }

    /// Mutable access to everything after the header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        sub_mut(self.buffer.as_mut(), HEADER_LEN, usize::MAX)
    }
}

/// The parsed Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src_addr: EthernetAddress,
    /// Destination MAC address.
    pub dst_addr: EthernetAddress,
    /// EtherType of the payload.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Parses the header of a frame (checking its length first).
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &EthernetFrame<&T>) -> Result<Self, WireError> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the header this emits (always [`HEADER_LEN`]).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header. Panics if the buffer is shorter than [`HEADER_LEN`].
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::tests::hex;

    /// Broadcast ARP request frame header (as captured: ff.. <- 52:54:00:12:34:56, 0x0806).
    fn arp_frame() -> Vec<u8> {
        hex("ffffffffffff 525400123456 0806
             0001 0800 0604 0001 525400123456 0a000201 000000000000 0a000202
             000000000000000000000000000000000000")
    }

    #[test]
    fn parse_known_frame() {
        let bytes = arp_frame();
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr(), EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56]));
        assert_eq!(frame.ethertype(), EtherType::Arp);
        assert_eq!(frame.payload().len(), 46);
        assert_eq!(&frame.payload()[..2], &[0x00, 0x01]);
        let repr = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(
            repr,
            EthernetRepr {
                src_addr: EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
                dst_addr: EthernetAddress::BROADCAST,
                ethertype: EtherType::Arp,
            }
        );
    }

    #[test]
    fn emit_roundtrip() {
        let bytes = arp_frame();
        let repr = EthernetRepr::parse(&EthernetFrame::new_checked(&bytes[..]).unwrap()).unwrap();
        let mut out = vec![0u8; bytes.len()];
        let mut frame = EthernetFrame::new_unchecked(&mut out[..]);
        repr.emit(&mut frame);
        frame.payload_mut().copy_from_slice(&bytes[HEADER_LEN..]);
        assert_eq!(repr.buffer_len(), HEADER_LEN);
        assert_eq!(out, bytes);
    }

    #[test]
    fn ethertype_conversions() {
        for v in [0x0800u16, 0x0806, 0x86dd, 0, 0xffff] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x0800), EtherType::Ipv4);
        assert_eq!(EtherType::from(0x86dd), EtherType::Unknown(0x86dd));
    }

    #[test]
    fn truncations_rejected() {
        let bytes = arp_frame();
        for len in 0..HEADER_LEN {
            assert_eq!(EthernetFrame::new_checked(&bytes[..len]).unwrap_err(), WireError::Truncated);
            let unchecked = EthernetFrame::new_unchecked(&bytes[..len]);
            assert_eq!(EthernetRepr::parse(&unchecked), Err(WireError::Truncated));
        }
        let frame = EthernetFrame::new_checked(&bytes[..HEADER_LEN]).unwrap();
        assert!(frame.payload().is_empty());
    }
}
