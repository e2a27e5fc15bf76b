//! The virtio-net header a TAP opened with `IFF_VNET_HDR` exchanges in front of every frame
//! (`struct virtio_net_hdr_v1` of `<linux/virtio_net.h>`: 12 bytes, little-endian, set with
//! `TUNSETVNETHDRSZ` and `TUNSETVNETLE`), and what its checksum fields mean to the stack.
//!
//! Only checksum offload is negotiated (`TUNSETOFFLOAD` with `TUN_F_CSUM`), never TSO/UFO: the
//! kernel segments before the TAP and no super-frame crosses it either way.
//!
//! - Transmit: a frame that leaves its TCP/UDP checksum to the device (its [`TxOffload`]; the
//!   field holds the pseudo-header sum) goes with `NEEDS_CSUM`, `csum_start` = L2 + L3 length and
//!   `csum_offset` = 16 (TCP) or 6 (UDP). The kernel completes the checksum where a real one is
//!   needed (egress on a device without checksum offload, a forwarded frame) and trusts it when
//!   it delivers the frame to a local socket. There is no flag for the IPv4 header checksum: the
//!   device never fills it, so the TAP does not offer it and the stack writes it.
//! - Receive: `DATA_VALID` (the kernel, or a device before it, verified the checksums) and
//!   `NEEDS_CSUM` (a frame the host made with a partial checksum, which it trusts) are both the
//!   device's "good" verdict, after the 20-byte IPv4 header checksum is checked here; a frame with
//!   neither is verified by the stack. A partial frame keeps its checksum request in
//!   [`PacketBuf::offload`], so a capture can complete it
//!   ([`offload::fill_bytes`]) and show a real checksum.

use super::TapStats;
use crate::nic::buf::{L4Proto, PacketBuf, TxOffload};
use crate::nic::offload;
use crate::wire::checksum;

/// Bytes of the header in front of every frame (`virtio_net_hdr_v1`, with `num_buffers`).
pub const VNET_HDR_LEN: usize = 12;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` is partial.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksums were verified.
const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`.
const GSO_NONE: u8 = 0;
/// Ethernet header, untagged and with one VLAN tag.
const ETH_LEN: usize = 14;
const ETH_VLAN_LEN: usize = 18;
/// Offsets of the TCP and UDP checksum fields in their headers.
const TCP_CHECKSUM_AT: u16 = 16;
const UDP_CHECKSUM_AT: u16 = 6;

/// A decoded virtio-net header (`gso_size` and `num_buffers` are never used here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct VnetHdr {
    flags: u8,
    gso_type: u8,
    hdr_len: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHdr {
    /// The header at the start of `bytes`, or `None` when fewer than [`VNET_HDR_LEN`] bytes.
    pub(super) fn parse(bytes: &[u8]) -> Option<VnetHdr> {
        let b = bytes.get(..VNET_HDR_LEN)?;
        let le16 = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le16(2),
            csum_start: le16(6),
            csum_offset: le16(8),
        })
    }

    /// The wire form (`gso_size` and `num_buffers` zero).
    pub(super) fn encode(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The header of a frame to transmit: `NEEDS_CSUM` at the frame's TCP/UDP checksum when
    /// `offload` leaves it to the device, else no flag (the frame is complete).
    pub(super) fn for_tx(offload: &TxOffload) -> VnetHdr {
        let Some(l4) = offload.l4_checksum else { return VnetHdr::default() };
        let csum_start = offload.l2_len + offload.l3_len;
        let csum_offset = match l4 {
            L4Proto::Tcp => TCP_CHECKSUM_AT,
            L4Proto::Udp => UDP_CHECKSUM_AT,
        };
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_NONE,
            // The bytes the kernel must find in the linear part: through the checksum field.
            hdr_len: csum_start + csum_offset + 2,
            csum_start,
            csum_offset,
        }
    }

    /// Whether the kernel is asked to complete a checksum.
    pub(super) fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }
}

/// What a received header says about the `frame_len`-byte frame behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RxKind {
    /// No flag: the checksums are as they came, the stack verifies them.
    Unverified,
    /// `DATA_VALID`: verified before the TAP.
    Verified,
    /// `NEEDS_CSUM`: the 16-bit field at `start + offset` holds the pseudo-header sum; the
    /// checksum over `start..` was never computed (the host trusts its own frame).
    Partial {
        /// First byte the checksum covers.
        start: usize,
        /// Offset of the checksum field from `start`.
        offset: usize,
    },
    /// A GSO super-frame: never negotiated, dropped.
    Gso,
    /// `NEEDS_CSUM` with a checksum field outside the frame: dropped.
    Malformed,
}

impl VnetHdr {
    /// Classifies a received frame of `frame_len` bytes (header stripped).
    fn rx_kind(&self, frame_len: usize) -> RxKind {
        if self.gso_type != GSO_NONE {
            return RxKind::Gso;
        }
        if self.flags & F_NEEDS_CSUM != 0 {
            let (start, offset) = (usize::from(self.csum_start), usize::from(self.csum_offset));
            return if start + offset + 2 <= frame_len {
                RxKind::Partial { start, offset }
            } else {
                RxKind::Malformed
            };
        }
        if self.flags & F_DATA_VALID != 0 {
            RxKind::Verified
        } else {
            RxKind::Unverified
        }
    }
}

/// Strips and applies the virtio-net header of a received frame (header included in `buf`):
/// sets its checksum verdict and, for a partial one, its checksum request; counts it in `stats`.
/// Returns false when the frame is to be dropped (counted).
pub(super) fn accept(buf: &mut PacketBuf, stats: &mut TapStats) -> bool {
    let Some(hdr) = VnetHdr::parse(buf.as_slice()) else {
        stats.rx_bad_header += 1;
        return false;
    };
    buf.advance(VNET_HDR_LEN);
    match hdr.rx_kind(buf.len()) {
        RxKind::Unverified => stats.rx_unverified += 1,
        RxKind::Verified => {
            stats.rx_data_valid += 1;
            buf.rx_checksum_ok = Some(ipv4_header_ok(buf.as_slice()));
        }
        RxKind::Partial { start, offset } => {
            stats.rx_checksum_partial += 1;
            match partial_offload(buf.as_slice(), start, offset) {
                Some(request) => buf.offload = request,
                // Not where a capture could complete it later: complete it now.
                None => {
                    offload::complete_partial(buf.as_mut_slice(), start, offset, false);
                }
            }
            buf.rx_checksum_ok = Some(ipv4_header_ok(buf.as_slice()));
        }
        RxKind::Gso => {
            stats.rx_gso_dropped += 1;
            log::debug!("dropped a GSO frame from a TAP (GSO was never enabled)");
            return false;
        }
        RxKind::Malformed => {
            stats.rx_bad_header += 1;
            return false;
        }
    }
    true
}

/// The checksum request a received partial frame keeps so that a capture can complete it with
/// [`offload::fill_bytes`]: `None` when the checksum is not at
/// a TCP or UDP header's place after an Ethernet header (then it is completed at once).
fn partial_offload(frame: &[u8], start: usize, offset: usize) -> Option<TxOffload> {
    let l4 = match u16::try_from(offset).ok()? {
        TCP_CHECKSUM_AT => L4Proto::Tcp,
        UDP_CHECKSUM_AT => L4Proto::Udp,
        _ => return None,
    };
    let tagged = frame.get(12..14)? == [0x81, 0x00];
    let l2 = if tagged { ETH_VLAN_LEN } else { ETH_LEN };
    let l3 = start.checked_sub(l2)?;
    Some(TxOffload {
        l2_len: u16::try_from(l2).ok()?,
        l3_len: u16::try_from(l3).ok()?,
        ipv4_checksum: false,
        l4_checksum: Some(l4),
    })
}

/// Whether the IPv4 header of an untagged Ethernet frame has a good checksum (`true` for other
/// frames, and for ones too short to say: the stack's own checks reject those). A device's
/// "checksums good" covers TCP/UDP; the header is checked here, 20 bytes, before the stack is
/// told the whole frame is good.
fn ipv4_header_ok(frame: &[u8]) -> bool {
    if frame.get(12..14) != Some(&[0x08, 0x00]) {
        return true;
    }
    let Some(&version_ihl) = frame.get(ETH_LEN) else { return true };
    let header_len = usize::from(version_ihl & 0x0f) * 4;
    match frame.get(ETH_LEN..ETH_LEN + header_len) {
        Some(header) if header_len >= 20 => checksum::data(header) == 0xffff,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ChecksumCapabilities;

    #[test]
    fn a_transmit_header_points_at_the_l4_checksum() {
        let caps = ChecksumCapabilities {
            tcp: crate::wire::ChecksumOffload { rx: false, tx: true },
            udp: crate::wire::ChecksumOffload { rx: false, tx: true },
            ..ChecksumCapabilities::none()
        };
        let tcp = VnetHdr::for_tx(&TxOffload::ipv4(L4Proto::Tcp, &caps)).encode();
        assert_eq!(
            tcp,
            [1, 0, 52, 0, 0, 0, 34, 0, 16, 0, 0, 0],
            "NEEDS_CSUM, hdr_len 52, start 34, offset 16"
        );
        let udp = VnetHdr::for_tx(&TxOffload::ipv4(L4Proto::Udp, &caps)).encode();
        assert_eq!(udp, [1, 0, 42, 0, 0, 0, 34, 0, 6, 0, 0, 0]);
        let plain = VnetHdr::for_tx(&TxOffload::ipv4(L4Proto::Tcp, &ChecksumCapabilities::none()));
        assert_eq!(plain.encode(), [0; VNET_HDR_LEN], "a complete frame needs nothing");
        assert!(!plain.needs_csum());
    }

    #[test]
    fn received_headers_are_classified() {
        let hdr = |flags: u8, gso: u8, start: u16, offset: u16| {
            let mut b = [0u8; VNET_HDR_LEN];
            b[0] = flags;
            b[1] = gso;
            b[6..8].copy_from_slice(&start.to_le_bytes());
            b[8..10].copy_from_slice(&offset.to_le_bytes());
            VnetHdr::parse(&b).expect("12 bytes")
        };
        assert_eq!(hdr(0, 0, 0, 0).rx_kind(60), RxKind::Unverified);
        assert_eq!(hdr(F_DATA_VALID, 0, 0, 0).rx_kind(60), RxKind::Verified);
        assert_eq!(hdr(F_NEEDS_CSUM, 0, 34, 16).rx_kind(60), RxKind::Partial { start: 34, offset: 16 });
        assert_eq!(hdr(F_NEEDS_CSUM, 0, 34, 16).rx_kind(52), RxKind::Partial { start: 34, offset: 16 });
        assert_eq!(hdr(F_NEEDS_CSUM, 0, 34, 16).rx_kind(51), RxKind::Malformed, "field past the end");
        assert_eq!(hdr(F_NEEDS_CSUM, 0, u16::MAX, u16::MAX).rx_kind(60), RxKind::Malformed);
        for gso in [1, 3, 4, 5, 0x81] {
            assert_eq!(hdr(F_NEEDS_CSUM, gso, 34, 16).rx_kind(60), RxKind::Gso, "gso type {gso}");
        }
        assert!(VnetHdr::parse(&[0u8; VNET_HDR_LEN - 1]).is_none());
    }

    #[test]
    fn partial_frames_keep_a_request_fill_understands() {
        let mut frame = [0u8; 60];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let o = partial_offload(&frame, 34, 16).expect("TCP");
        assert_eq!((o.l2_len, o.l3_len, o.ipv4_checksum, o.l4_checksum), (14, 20, false, Some(L4Proto::Tcp)));
        assert_eq!(
            partial_offload(&frame, 38, 6).map(|o| (o.l3_len, o.l4_checksum)),
            Some((24, Some(L4Proto::Udp)))
        );
        assert_eq!(partial_offload(&frame, 34, 2), None, "not a TCP/UDP checksum");
        assert_eq!(partial_offload(&frame, 10, 16), None, "starts inside the Ethernet header");
        frame[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(partial_offload(&frame, 38, 16).map(|o| o.l2_len), Some(18), "VLAN tag");
    }

    /// An Ethernet + IPv4 + TCP frame of `payload` bytes from 10.0.0.1 to 10.0.0.2 whose TCP
    /// checksum field holds the pseudo-header sum (as a host leaves it for `NEEDS_CSUM`).
    fn partial_tcp_frame(payload: usize) -> Vec<u8> {
        use crate::wire::{IpProtocol, Ipv4Addr};
        let mut frame = vec![0u8; 54 + payload];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        frame[22] = 64;
        frame[23] = 6;
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        frame[26..30].copy_from_slice(&src.octets());
        frame[30..34].copy_from_slice(&dst.octets());
        let sum = !checksum::data(&frame[14..34]);
        frame[24..26].copy_from_slice(&sum.to_be_bytes());
        frame[34..36].copy_from_slice(&5001u16.to_be_bytes());
        frame[36..38].copy_from_slice(&80u16.to_be_bytes());
        frame[46] = 0x50;
        frame[47] = 0x10;
        for (i, b) in frame[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, (20 + payload) as u32);
        frame[50..52].copy_from_slice(&pseudo.to_be_bytes());
        frame
    }

    /// `frame` behind a received header with `flags`, `gso_type` and checksum position.
    fn received(frame: &[u8], flags: u8, gso: u8, start: u16, offset: u16) -> PacketBuf {
        let hdr = VnetHdr { flags, gso_type: gso, hdr_len: 0, csum_start: start, csum_offset: offset };
        let mut bytes = hdr.encode().to_vec();
        bytes.extend_from_slice(frame);
        PacketBuf::from_slice(&bytes)
    }

    #[test]
    fn received_frames_get_the_kernels_verdict() {
        let mut stats = TapStats::default();
        let partial = partial_tcp_frame(101);

        // NEEDS_CSUM: good, header stripped, the request kept for a capture, which completes it.
        let mut buf = received(&partial, F_NEEDS_CSUM, GSO_NONE, 34, 16);
        assert!(accept(&mut buf, &mut stats));
        assert_eq!((buf.as_slice(), buf.rx_checksum_ok), (&partial[..], Some(true)));
        assert_eq!(buf.offload.l4_checksum, Some(L4Proto::Tcp));
        assert!(!offload::verify(buf.as_slice()), "the checksum is partial as received");
        let mut copy = buf.as_slice().to_vec();
        offload::fill_bytes(&mut copy, &buf.offload);
        assert!(offload::verify(&copy), "a capture's copy shows a real checksum");

        // DATA_VALID: good; with a broken IPv4 header checksum: bad.
        let mut complete = copy.clone();
        let mut buf = received(&complete, F_DATA_VALID, GSO_NONE, 0, 0);
        assert!(accept(&mut buf, &mut stats));
        assert_eq!((buf.rx_checksum_ok, buf.offload), (Some(true), TxOffload::default()));
        complete[24] ^= 0x01;
        let mut buf = received(&complete, F_DATA_VALID, GSO_NONE, 0, 0);
        assert!(accept(&mut buf, &mut stats));
        assert_eq!(buf.rx_checksum_ok, Some(false), "the IPv4 header checksum is checked here");

        // No flag: no verdict, the stack verifies.
        let mut buf = received(&partial, 0, GSO_NONE, 0, 0);
        assert!(accept(&mut buf, &mut stats));
        assert_eq!(buf.rx_checksum_ok, None);

        // Partial at a place no capture knows: completed at once.
        let mut odd = partial.clone();
        odd[34..].fill(0);
        let mut buf = received(&odd, F_NEEDS_CSUM, GSO_NONE, 34, 2);
        assert!(accept(&mut buf, &mut stats));
        assert_eq!((buf.offload, buf.rx_checksum_ok), (TxOffload::default(), Some(true)));
        assert_eq!(&buf.as_slice()[36..38], &(!checksum::data(&odd[34..])).to_be_bytes());

        // Dropped: a GSO frame, a checksum field past the end, a short read.
        assert!(!accept(&mut received(&partial, F_NEEDS_CSUM, 1, 34, 16), &mut stats));
        assert!(!accept(&mut received(&partial[..40], F_NEEDS_CSUM, GSO_NONE, 34, 16), &mut stats));
        assert!(!accept(&mut PacketBuf::from_slice(&[0; VNET_HDR_LEN - 1]), &mut stats));
        let expect = TapStats {
            rx_data_valid: 2,
            rx_checksum_partial: 2,
            rx_unverified: 1,
            rx_gso_dropped: 1,
            rx_bad_header: 2,
            ..TapStats::default()
        };
        assert_eq!(stats, expect);
    }

    #[test]
    fn the_ipv4_header_checksum_is_checked() {
        let mut frame = [0u8; 34];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[22] = 64;
        frame[23] = 6;
        let sum = !checksum::data(&frame[14..34]);
        frame[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(ipv4_header_ok(&frame));
        frame[30] ^= 1;
        assert!(!ipv4_header_ok(&frame));
        frame[12] = 0x86;
        assert!(ipv4_header_ok(&frame), "not IPv4: not this check's business");
        assert!(ipv4_header_ok(&frame[..20]));
    }
}
