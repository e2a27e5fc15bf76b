//! Zero-copy packet views and their parsed representations (`Repr`).
//!
//! Every view is `Packet<T: AsRef<[u8]>>`; after `new_checked` succeeds its accessors never panic.
//! `Repr::parse` validates (lengths, checksums per [`ChecksumCapabilities`]) and `Repr::emit`
//! writes headers into a buffer the caller sized with `buffer_len`/`header_len`.

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod seq;
pub mod tcp;
mod tcp_option;
pub mod tcp_sack;
pub mod udp;

pub use std::net::Ipv4Addr;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr};
pub use icmp::{Icmpv4Packet, Icmpv4Repr};
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
pub use seq::SeqNumber;
pub use tcp::{TcpFlags, TcpOption, TcpOptionIter, TcpPacket, TcpRepr};
pub use tcp_sack::TcpSack;
pub use udp::{UdpPacket, UdpRepr};

/// Big-endian field access shared by every packet view.
///
/// Callers guarantee the offsets are in bounds (every view checks its length first in
/// `check_len`); the slices here are indexed at fixed offsets below that checked length.
pub(crate) mod field {
    use std::net::Ipv4Addr;

    /// Reads a big-endian `u16` at `at`.
    #[inline]
    pub(crate) fn get_u16(buf: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([buf[at], buf[at + 1]])
    }

    /// Writes a big-endian `u16` at `at`.
    #[inline]
    pub(crate) fn set_u16(buf: &mut [u8], at: usize, value: u16) {
        buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }

    /// Reads a big-endian `u32` at `at`.
    #[inline]
    pub(crate) fn get_u32(buf: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
    }

    /// Writes a big-endian `u32` at `at`.
    #[inline]
    pub(crate) fn set_u32(buf: &mut [u8], at: usize, value: u32) {
        buf[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    /// Reads an IPv4 address at `at`.
    #[inline]
    pub(crate) fn get_ipv4(buf: &[u8], at: usize) -> Ipv4Addr {
        Ipv4Addr::new(buf[at], buf[at + 1], buf[at + 2], buf[at + 3])
    }

    /// Writes an IPv4 address at `at`.
    #[inline]
    pub(crate) fn set_ipv4(buf: &mut [u8], at: usize, addr: Ipv4Addr) {
        buf[at..at + 4].copy_from_slice(&addr.octets());
    }

    /// Reads a MAC address at `at`.
    #[inline]
    pub(crate) fn get_mac(buf: &[u8], at: usize) -> super::EthernetAddress {
        let mut out = [0u8; 6];
        out.copy_from_slice(&buf[at..at + 6]);
        super::EthernetAddress(out)
    }

    /// Writes a MAC address at `at`.
    #[inline]
    pub(crate) fn set_mac(buf: &mut [u8], at: usize, addr: super::EthernetAddress) {
        buf[at..at + 6].copy_from_slice(&addr.0);
    }

    /// `buf[start..end]` clamped to the buffer, so it never panics even on an unchecked view.
    #[inline]
    pub(crate) fn sub(buf: &[u8], start: usize, end: usize) -> &[u8] {
        let end = end.min(buf.len());
        buf.get(start.min(end)..end).unwrap_or(&[])
    }

    /// Mutable variant of [`sub`].
    #[inline]
    pub(crate) fn sub_mut(buf: &mut [u8], start: usize, end: usize) -> &mut [u8] {
        let end = end.min(buf.len());
        let start = start.min(end);
        &mut buf[start..end]
    }
}

#[cfg(test)]
mod tests;

/// Why a packet was rejected. Each variant is also a drop-counter reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum WireError {
    /// The buffer is shorter than the header or the length fields claim.
    #[error("packet truncated")]
    Truncated,
    /// A field holds a value the format forbids (bad version, header length, option length...).
    #[error("malformed header")]
    Malformed,
    /// The checksum does not match.
    #[error("bad checksum")]
    BadChecksum,
    /// An IPv4 fragment (SlimTCP does not reassemble).
    #[error("IPv4 fragment")]
    Fragmented,
    /// A valid packet of a kind this stack does not handle.
    #[error("unsupported packet type")]
    Unsupported,
}

/// A 48-bit Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// True for the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True for group (multicast or broadcast) addresses.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True for individual addresses other than all-zero.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && self.0 != [0; 6]
    }
}

impl std::fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

/// Error parsing a MAC address from text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?} (expected six hex octets like 02:00:00:00:00:01)")]
pub struct ParseMacError(pub String);

impl std::str::FromStr for EthernetAddress {
    type Err = ParseMacError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let part = parts.next().ok_or_else(|| ParseMacError(s.to_string()))?;
            if part.is_empty() || part.len() > 2 {
                return Err(ParseMacError(s.to_string()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| ParseMacError(s.to_string()))?;
        }
        if parts.next().is_some() {
            return Err(ParseMacError(s.to_string()));
        }
        Ok(EthernetAddress(out))
    }
}

/// Error parsing a unicast MAC address from text ([`EthernetAddress::parse_unicast`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnicastMacError {
    /// The text is not a MAC address.
    #[error(transparent)]
    Parse(#[from] ParseMacError),
    /// A group (multicast or broadcast) or all-zero address.
    #[error("{0} is not a unicast MAC address")]
    NotUnicast(EthernetAddress),
}

impl EthernetAddress {
    /// Parses a unicast MAC address, as an interface's own address is given (configuration,
    /// command lines).
    pub fn parse_unicast(s: &str) -> Result<EthernetAddress, UnicastMacError> {
        let mac: EthernetAddress = s.parse()?;
        if !mac.is_unicast() {
            return Err(UnicastMacError::NotUnicast(mac));
        }
        Ok(mac)
    }
}

/// Which checksum work a device does in hardware, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChecksumOffload {
    /// The device verified the checksum of received packets (the stack skips verification).
    pub rx: bool,
    /// The device fills the checksum of transmitted packets (the stack leaves it to the device).
    pub tx: bool,
}

/// Checksum offloads of a device, per protocol. The default offloads nothing: the stack verifies
/// and computes every checksum in software.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChecksumCapabilities {
    /// IPv4 header checksum.
    pub ipv4: ChecksumOffload,
    /// TCP checksum.
    pub tcp: ChecksumOffload,
    /// UDP checksum.
    pub udp: ChecksumOffload,
}

impl ChecksumCapabilities {
    /// Nothing offloaded: software checksums both ways.
    pub const fn none() -> Self {
        let off = ChecksumOffload { rx: false, tx: false };
        ChecksumCapabilities { ipv4: off, tcp: off, udp: off }
    }

    /// Everything offloaded both ways (a device that fills and verifies every checksum).
    pub const fn all() -> Self {
        let on = ChecksumOffload { rx: true, tx: true };
        ChecksumCapabilities { ipv4: on, tcp: on, udp: on }
    }

    /// For a frame the device verified good: nothing left to verify on receive.
    pub const fn verified() -> Self {
        let rx = ChecksumOffload { rx: true, tx: false };
        ChecksumCapabilities { ipv4: rx, tcp: rx, udp: rx }
    }
}
