//! ARP (RFC 826) for Ethernet hardware and IPv4 protocol addresses only.

use super::field::{get_ipv4, get_mac, get_u16, set_ipv4, set_mac, set_u16};
use super::{EthernetAddress, Ipv4Addr, WireError};

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

const HTYPE_ETHERNET: u16 = 1;
const PTYPE_IPV4: u16 = 0x0800;

mod offs {
    pub(super) const HTYPE: usize = 0;
    pub(super) const PTYPE: usize = 2;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: usize = 6;
    pub(super) const SHA: usize = 8;
    pub(super) const SPA: usize = 14;
    pub(super) const THA: usize = 18;
    pub(super) const TPA: usize = 24;
}

/// The ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// Request (1).
    Request,
    /// Reply (2).
    Reply,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(value: u16) -> Self {
        match value {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(value: ArpOperation) -> Self {
        match value {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(other) => other,
        }
    }
}

/// A zero-copy view of an ARP packet laid out for Ethernet/IPv4 (28 bytes).
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking it; accessors may panic until
    /// [`check_len`](Self::check_len) has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than [`PACKET_LEN`] (the Ethernet/IPv4 layout,
    /// the only one accessors read). Trailing bytes (Ethernet padding) are ignored.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < PACKET_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 for Ethernet).
    pub fn hardware_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::HTYPE)
    }

    /// Protocol type (0x0800 for IPv4).
    pub fn protocol_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::PTYPE)
    }

    /// Hardware address length (6 for Ethernet).
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[offs::HLEN]
    }

    /// Protocol address length (4 for IPv4).
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[offs::PLEN]
    }

    /// Operation code.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(get_u16(self.buffer.as_ref(), offs::OPER))
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        get_mac(self.buffer.as_ref(), offs::SHA)
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        get_ipv4(self.buffer.as_ref(), offs::SPA)
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        get_mac(self.buffer.as_ref(), offs::THA)
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        get_ipv4(self.buffer.as_ref(), offs::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::HTYPE, value)
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::PTYPE, value)
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[offs::HLEN] = value;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[offs::PLEN] = value;
    }

    /// Sets the operation code.
    pub fn set_operation(&mut self, operation: ArpOperation) {
        set_u16(self.buffer.as_mut(), offs::OPER, operation.into())
    }

    /// Sets the sender hardware address.
    pub fn set_source_hardware_addr(&mut self, addr: EthernetAddress) {
        set_mac(self.buffer.as_mut(), offs::SHA, addr)
    }

    /// Sets the sender protocol address.
    pub fn set_source_protocol_addr(&mut self, addr: Ipv4Addr) {
        set_ipv4(self.buffer.as_mut(), offs::SPA, addr)
    }

    /// Sets the target hardware address.
    pub fn set_target_hardware_addr(&mut self, addr: EthernetAddress) {
        set_mac(self.buffer.as_mut(), offs::THA, addr)
    }

    /// Sets the target protocol address.
    pub fn set_target_protocol_addr(&mut self, addr: Ipv4Addr) {
        set_ipv4(self.buffer.as_mut(), offs::TPA, addr)
    }
}

/// A parsed Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation (request, reply...).
    pub operation: ArpOperation,
    /// Sender hardware address.
    pub source_hardware_addr: EthernetAddress,
    /// Sender protocol address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target hardware address (zero in requests).
    pub target_hardware_addr: EthernetAddress,
    /// Target protocol address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Parses a packet: `Truncated` if shorter than 28 bytes, `Unsupported` unless it is
    /// Ethernet (htype 1, hlen 6) / IPv4 (ptype 0x0800, plen 4). Unknown operations are returned
    /// as [`ArpOperation::Unknown`] for the caller to drop.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &ArpPacket<&T>) -> Result<ArpRepr, WireError> {
        packet.check_len()?;
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != PTYPE_IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(WireError::Unsupported);
        }
        Ok(ArpRepr {
            operation: packet.operation(),
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    /// Length of the packet this emits (28).
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the whole packet. Panics if the buffer is shorter than 28 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(HTYPE_ETHERNET);
        packet.set_protocol_type(PTYPE_IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr);
        packet.set_source_protocol_addr(self.source_protocol_addr);
        packet.set_target_hardware_addr(self.target_hardware_addr);
        packet.set_target_protocol_addr(self.target_protocol_addr);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::tests::hex;

    /// "Who has 10.0.2.2? Tell 10.0.2.15" from 52:54:00:12:34:56, with 18 bytes Ethernet padding
    /// (the ARP payload of a minimum-size frame).
    fn request() -> Vec<u8> {
        hex("0001 0800 06 04 0001 525400123456 0a00020f 000000000000 0a000202
             000000000000000000000000000000000000")
    }

    fn request_repr() -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 2, 15),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 2, 2),
        }
    }

    #[test]
    fn parse_known_request() {
        let bytes = request();
        let p = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.hardware_type(), p.protocol_type()), (1, 0x0800));
        assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
        assert_eq!(ArpRepr::parse(&p).unwrap(), request_repr());
    }

    #[test]
    fn emit_roundtrip() {
        let repr = request_repr();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, &request()[..28]);

        let reply = ArpRepr {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 2, 2),
            target_hardware_addr: repr.source_hardware_addr,
            target_protocol_addr: repr.source_protocol_addr,
        };
        reply.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        assert_eq!(&out[6..8], &[0, 2]);
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap()).unwrap(), reply);
    }

    #[test]
    fn unknown_operation_is_reported() {
        let mut bytes = request();
        bytes[7] = 9;
        let repr = ArpRepr::parse(&ArpPacket::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(repr.operation, ArpOperation::Unknown(9));
        for v in 0..5u16 {
            assert_eq!(u16::from(ArpOperation::from(v)), v);
        }
    }

    #[test]
    fn malformed_rejected() {
        let good = request();
        for len in 0..PACKET_LEN {
            assert_eq!(ArpPacket::new_checked(&good[..len]).unwrap_err(), WireError::Truncated);
            let unchecked = ArpPacket::new_unchecked(&good[..len]);
            assert_eq!(ArpRepr::parse(&unchecked), Err(WireError::Truncated));
        }
        for (at, value) in [(1, 6), (2, 0x86), (4, 8), (5, 16)] {
            let mut b = good.clone();
            b[at] = value;
            let p = ArpPacket::new_checked(&b[..]).unwrap();
            assert_eq!(ArpRepr::parse(&p), Err(WireError::Unsupported), "byte {}", at);
        }
    }
}
