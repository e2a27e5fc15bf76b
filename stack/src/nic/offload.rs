//! Checksum offload done in software by a device that offers it (memwire), or for a copy that
//! must show real checksums (a capture of a TAP or DPDK port with offload): the checksums a
//! stack left to the device ([`TxOffload`]) filled in, and a received frame's checksums
//! verified, as a NIC's hardware would. A device calls these only where it must (a capture, a
//! receiver without receive offload, a link that may corrupt frames); otherwise the frame goes
//! through with its checksums left undone and is reported verified, as on a virtio-net link.

use super::buf::{L4Proto, PacketBuf, TxOffload};
use crate::wire::{checksum, ChecksumCapabilities, EtherType, EthernetFrame, IpProtocol, WireError};
use crate::wire::{Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr, UdpPacket, UdpRepr};

/// Bytes of the Ethernet header.
const ETH_LEN: usize = 14;
/// Offset of the IPv4 header checksum.
const IPV4_CHECKSUM_AT: usize = 10;
/// Offset of the TCP checksum.
const TCP_CHECKSUM_AT: usize = 16;
/// Offset of the UDP checksum.
const UDP_CHECKSUM_AT: usize = 6;

/// Whether `offload` leaves any checksum to the device.
pub fn pending(offload: &TxOffload) -> bool {
    offload.ipv4_checksum || offload.l4_checksum.is_some()
}

/// Fills the checksums `frame.offload` left to the device and clears them from it. The L4
/// checksum field holds the pseudo-header sum (what a device expects); the IPv4 checksum field
/// is recomputed. A frame too short for the lengths it claims is left as it is.
pub fn fill(frame: &mut PacketBuf) {
    let o = frame.offload;
    fill_bytes(frame.as_mut_slice(), &o);
    frame.offload = TxOffload::default();
}

/// [`fill`] on the bytes of a frame (a copy, e.g. for a capture) whose request is `offload`.
/// On a received frame the request is the one its device left undone (a virtio-net
/// `NEEDS_CSUM` frame from the TAP, a memwire frame with offload).
pub fn fill_bytes(bytes: &mut [u8], offload: &TxOffload) {
    let (l2, l3) = (usize::from(offload.l2_len), usize::from(offload.l3_len));
    if bytes.len() < l2 + l3 {
        return;
    }
    if offload.ipv4_checksum {
        let header = &mut bytes[l2..l2 + l3];
        if header.len() >= IPV4_CHECKSUM_AT + 2 {
            header[IPV4_CHECKSUM_AT..IPV4_CHECKSUM_AT + 2].fill(0);
            let sum = !checksum::data(header);
            header[IPV4_CHECKSUM_AT..IPV4_CHECKSUM_AT + 2].copy_from_slice(&sum.to_be_bytes());
        }
    }
    if let Some(l4) = offload.l4_checksum {
        let at = match l4 {
            L4Proto::Tcp => TCP_CHECKSUM_AT,
            L4Proto::Udp => UDP_CHECKSUM_AT,
        };
        complete_partial(bytes, l2 + l3, at, l4 == L4Proto::Udp);
    }
}

/// Completes a partial checksum as a virtio-net device does for `NEEDS_CSUM`: the 16-bit field
/// at `start + offset` holds the pseudo-header sum, and receives the checksum over
/// `bytes[start..]`. For UDP a result of 0 is sent as 0xffff (0 means "no checksum"). Returns
/// false (nothing written) when the field lies outside `bytes`.
pub fn complete_partial(bytes: &mut [u8], start: usize, offset: usize, udp: bool) -> bool {
    let Some(segment) = bytes.get_mut(start..) else { return false };
    if segment.len() < offset.saturating_add(2) {
        return false;
    }
    // The field holds the pseudo-header's sum: the sum over the segment is the total.
    let mut sum = !checksum::data(segment);
    if udp && sum == 0 {
        sum = 0xffff;
    }
    segment[offset..offset + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

/// Whether a received Ethernet frame's IPv4, TCP and UDP checksums are right (frames of other
/// kinds, or too short to say, count as right: the stack's own checks handle them).
pub fn verify(frame: &[u8]) -> bool {
    let software = ChecksumCapabilities::none();
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return true };
    if eth.ethertype() != EtherType::Ipv4 {
        return true;
    }
    let Ok(ip) = Ipv4Packet::new_checked(&frame[ETH_LEN..]) else { return true };
    let repr = match Ipv4Repr::parse(&ip, &software) {
        Ok(r) => r,
        Err(e) => return e != WireError::BadChecksum,
    };
    let start = ETH_LEN + ip.header_len();
    let Some(l4) = frame.get(start..start + repr.payload_len) else { return true };
    let (src, dst) = (repr.src_addr, repr.dst_addr);
    let verdict = match repr.protocol {
        IpProtocol::Tcp => {
            TcpPacket::new_checked(l4).and_then(|p| TcpRepr::parse(&p, src, dst, &software).map(drop))
        }
        IpProtocol::Udp => {
            UdpPacket::new_checked(l4).and_then(|p| UdpRepr::parse(&p, src, dst, &software).map(drop))
        }
        _ => Ok(()),
    };
    verdict != Err(WireError::BadChecksum)
}
