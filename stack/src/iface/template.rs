//! Per-connection header templates: the 54-byte Ethernet + IPv4 + TCP header of a connection is
//! built once; each data or ACK segment copies it and patches the few fields that change
//! (lengths, sequence numbers, flags, window, checksums from precomputed partial sums).

use std::net::SocketAddrV4;

use crate::nic::{L4Proto, PacketBuf, TxOffload};
use crate::tcp::Payload;
use crate::wire::{checksum, ChecksumCapabilities, EthernetAddress, IpProtocol, TcpFlags, TcpRepr};

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const TCP_LEN: usize = 20;
/// Length of a header without TCP options.
pub const TEMPLATE_LEN: usize = ETH_LEN + IP_LEN + TCP_LEN;
const TTL: u8 = 64;

/// The frame did not fit the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("segment does not fit the transmit buffer")]
pub struct NoRoom;

/// A connection's prebuilt headers (the next hop's MAC is their first six bytes).
#[derive(Debug, Clone)]
pub struct HeaderTemplate {
    header: [u8; TEMPLATE_LEN],
    /// Partial sum of the IPv4 header with total length and checksum zero.
    ip_sum: u16,
    /// Partial sum of the TCP pseudo-header without the length.
    pseudo_sum: u16,
    /// Partial sum of the TCP header with sequence and acknowledgement numbers, flags, window
    /// and checksum zero (the ports and the data offset).
    tcp_sum: u16,
}

impl HeaderTemplate {
    /// Headers for segments from `src` (at `src_mac`) to `dst` (next hop `dst_mac`).
    pub fn new(
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src: SocketAddrV4,
        dst: SocketAddrV4,
    ) -> Self {
        let mut h = [0u8; TEMPLATE_LEN];
        h[0..6].copy_from_slice(&dst_mac.0);
        h[6..12].copy_from_slice(&src_mac.0);
        h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut h[ETH_LEN..ETH_LEN + IP_LEN];
        ip[0] = 0x45;
        ip[6] = 0x40; // DF
        ip[8] = TTL;
        ip[9] = u8::from(IpProtocol::Tcp);
        ip[12..16].copy_from_slice(&src.ip().octets());
        ip[16..20].copy_from_slice(&dst.ip().octets());
        let ip_sum = checksum::data(ip);
        let tcp = &mut h[ETH_LEN + IP_LEN..];
        tcp[0..2].copy_from_slice(&src.port().to_be_bytes());
        tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        tcp[12] = (TCP_LEN as u8 / 4) << 4;
        let tcp_sum = checksum::data(tcp);
        let pseudo_sum = checksum::pseudo_header(*src.ip(), *dst.ip(), IpProtocol::Tcp, 0);
        HeaderTemplate { header: h, ip_sum, pseudo_sum, tcp_sum }
    }

    /// The next hop's MAC (the Ethernet destination of every frame).
    pub fn dst_mac(&self) -> EthernetAddress {
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&self.header[0..6]);
        EthernetAddress(mac)
    }

    /// Writes a segment without TCP options into `buf` (empty, with headroom). With the TCP
    /// checksum in software the payload is summed as it is copied ([`checksum::copy_summed`]).
    /// Inline in the emitter: the call's register saves and argument moves cost ~28
    /// instructions per segment.
    #[inline(always)]
    pub fn write(
        &self,
        buf: &mut PacketBuf,
        repr: &TcpRepr,
        payload: &mut Payload<'_>,
        caps: &ChecksumCapabilities,
    ) -> Result<(), NoRoom> {
        let plen = payload.len();
        let frame = buf.append(TEMPLATE_LEN + plen).ok_or(NoRoom)?;
        frame[..TEMPLATE_LEN].copy_from_slice(&self.header);
        if caps.tcp.tx {
            payload.copy_to(&mut frame[TEMPLATE_LEN..]);
            self.patch(frame, repr, plen, 0, caps);
        } else {
            // The checksum in software: the payload's sum is taken as it is copied, not by
            // reading the frame back.
            let (_, sum) = payload.copy_to_summed(&mut frame[TEMPLATE_LEN..]);
            self.patch(frame, repr, plen, sum, caps);
        }
        buf.offload = TxOffload::ipv4(L4Proto::Tcp, caps);
        Ok(())
    }

    /// Writes only the headers of a segment whose payload the NIC appends from where it lies
    /// (external payload). With the payload's sum, the checksums are computed in software over
    /// headers and payload (the payload was read for its sum, not copied) and no offload is
    /// requested; without it (`None`, only when `caps` offload the TCP checksum), the NIC fills
    /// them and the payload is never read by the stack.
    pub fn write_headers(
        &self,
        buf: &mut PacketBuf,
        repr: &TcpRepr,
        payload_len: usize,
        payload_sum: Option<u16>,
        caps: &ChecksumCapabilities,
    ) -> Result<(), NoRoom> {
        let frame = buf.append(TEMPLATE_LEN).ok_or(NoRoom)?;
        frame.copy_from_slice(&self.header);
        match payload_sum {
            // The checksums in software, over the headers and the payload's sum.
            Some(sum) => {
                self.patch(frame, repr, payload_len, sum, &ChecksumCapabilities::none());
                buf.offload = TxOffload::default();
            }
            // No sum: the NIC fills the checksums (`caps`), as for a frame built whole.
            None => {
                self.patch(frame, repr, payload_len, 0, caps);
                buf.offload = TxOffload::ipv4(L4Proto::Tcp, caps);
            }
        }
        Ok(())
    }

    /// Fills the per-segment fields of `frame` (template headers, then the payload). Software
    /// checksums are summed from what is written, never read back from the frame (a frame
    /// buffer taken cold holds its bytes only once its lines arrive): the TCP header's sum from
    /// the template's and the fields set here, the payload's from `payload_sum` (ignored when
    /// `caps` leave the TCP checksum to the device).
    #[inline(always)]
    fn patch(
        &self,
        frame: &mut [u8],
        repr: &TcpRepr,
        plen: usize,
        payload_sum: u16,
        caps: &ChecksumCapabilities,
    ) {
        let ip_total = (IP_LEN + TCP_LEN + plen) as u16;
        frame[ETH_LEN + 2..ETH_LEN + 4].copy_from_slice(&ip_total.to_be_bytes());
        let ip_csum = if caps.ipv4.tx { 0 } else { !checksum::combine(&[self.ip_sum, ip_total]) };
        frame[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&ip_csum.to_be_bytes());

        let tcp = &mut frame[ETH_LEN + IP_LEN..];
        let seq = repr.seq_number.0;
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = repr.flags;
        let ack = repr.ack_number.map_or(0, |ack| ack.0);
        if repr.ack_number.is_some() {
            tcp[8..12].copy_from_slice(&ack.to_be_bytes());
            flags.insert(TcpFlags::ACK);
        }
        tcp[13] = flags.bits();
        tcp[14..16].copy_from_slice(&repr.window_len.to_be_bytes());
        let pseudo = checksum::combine(&[self.pseudo_sum, (TCP_LEN + plen) as u16]);
        let csum = if caps.tcp.tx {
            pseudo
        } else {
            // The header's words that changed: sequence and acknowledgement numbers (two words
            // each), flags (the low byte of the data offset's word) and window. The TCP header
            // is 20 bytes (even), so its sum and the payload's simply combine.
            let header = checksum::combine(&[
                self.tcp_sum,
                (seq >> 16) as u16,
                seq as u16,
                (ack >> 16) as u16,
                ack as u16,
                u16::from(flags.bits()),
                repr.window_len,
            ]);
            !checksum::combine(&[pseudo, header, payload_sum])
        };
        tcp[16..18].copy_from_slice(&csum.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::SeqNumber;
    use crate::wire::{EthernetFrame, Ipv4Packet, Ipv4Repr, TcpPacket};

    #[test]
    fn template_output_parses_with_valid_checksums() {
        let src: SocketAddrV4 = "10.1.0.1:4321".parse().expect("addr");
        let dst: SocketAddrV4 = "10.1.0.2:80".parse().expect("addr");
        let t = HeaderTemplate::new(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            src,
            dst,
        );
        let repr = TcpRepr {
            src_port: 4321,
            dst_port: 80,
            seq_number: SeqNumber(0xdead_beef),
            ack_number: Some(SeqNumber(77)),
            flags: TcpFlags::PSH,
            window_len: 1234,
            max_seg_size: None,
            window_scale: None,
            sack: crate::wire::TcpSack::NONE,
        };
        let mut tx = crate::tcp::send_buffer::SendBuffer::new(100);
        tx.push_copy(b"hello, template");
        let mut payload = Payload::for_test(&mut tx, 0, 15);
        let mut buf = PacketBuf::new_tx();
        let caps = ChecksumCapabilities::none();
        t.write(&mut buf, &repr, &mut payload, &caps).expect("fits");
        let eth = EthernetFrame::new_checked(buf.as_slice()).expect("eth");
        let ip = Ipv4Packet::new_checked(eth.payload()).expect("ip");
        let ip_repr = Ipv4Repr::parse(&ip, &caps).expect("ip checksum valid");
        assert_eq!(ip_repr.payload_len, 35);
        let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
        let parsed = TcpRepr::parse(&tcp, *src.ip(), *dst.ip(), &caps).expect("tcp checksum valid");
        assert_eq!(parsed, repr);
        assert_eq!(tcp.payload(), b"hello, template");
        assert_eq!(t.dst_mac(), EthernetAddress([2, 0, 0, 0, 0, 2]));
    }
}
