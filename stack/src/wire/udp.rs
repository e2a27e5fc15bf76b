//! UDP datagrams (RFC 768).

use super::field::{get_u16, set_u16, sub, sub_mut};
use super::{checksum, ChecksumCapabilities, IpProtocol, Ipv4Addr, WireError};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod offs {
    pub(super) const SRC_PORT: usize = 0;
    pub(super) const DST_PORT: usize = 2;
    pub(super) const LENGTH: usize = 4;
    pub(super) const CHECKSUM: usize = 6;
}

/// A zero-copy view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it; accessors may panic until
    /// [`check_len`](Self::check_len) has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the buffer holds a header (`Truncated`), the length field is at least 8
    /// (`Malformed`) and fits in the buffer (`Truncated`). Bytes beyond it are ignored.
    pub fn check_len(&self) -> Result<(), WireError> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if len > buf_len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::DST_PORT)
    }

    /// Length field: header plus payload, in bytes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::LENGTH)
    }

    /// Checksum field (0 means "not computed").
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// The payload: bytes `8..len`.
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), HEADER_LEN, usize::from(self.len()))
    }

    /// True if the checksum over the pseudo-header and the first `len` bytes is correct (a zero
    /// checksum field, meaning none, also counts as correct).
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let data = sub(self.buffer.as_ref(), 0, usize::from(len));
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Udp, u32::from(len));
        checksum::combine(&[pseudo, checksum::data(data)]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        set_u16(self.buffer.as_mut(), offs::SRC_PORT, port)
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        set_u16(self.buffer.as_mut(), offs::DST_PORT, port)
    }

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), offs::LENGTH, len)
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::CHECKSUM, value)
    }

    /// Mutable payload: bytes `8..len`.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        sub_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }

    /// Computes and writes the checksum over the pseudo-header and the first `len` bytes (a
    /// computed 0 is sent as 0xffff).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = self.len();
        let data = sub(self.buffer.as_ref(), 0, usize::from(len));
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Udp, u32::from(len));
        let value = !checksum::combine(&[pseudo, checksum::data(data)]);
        self.set_checksum(if value == 0 { 0xffff } else { value })
    }
}

/// The parsed UDP header; the payload is read via [`UdpPacket::payload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parses a datagram: lengths (see [`UdpPacket::check_len`]) and the checksum unless it is 0
    /// (none) or `caps.udp.rx` (`BadChecksum`).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        caps: &ChecksumCapabilities,
    ) -> Result<UdpRepr, WireError> {
        packet.check_len()?;
        if !caps.udp.rx && !packet.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        Ok(UdpRepr { src_port: packet.src_port(), dst_port: packet.dst_port() })
    }

    /// Length of the header (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes ports, length and checksum. The caller has already written `payload_len` bytes of
    /// payload at offset 8. The checksum is computed in software (0 sent as 0xffff), or with
    /// `caps.udp.tx` only the non-inverted pseudo-header sum is written for the device.
    ///
    /// Panics if the buffer is shorter than `8 + payload_len`; `payload_len` must be at most
    /// 65527.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_len: usize,
        caps: &ChecksumCapabilities,
    ) {
        let len = self.buffer_len(payload_len);
        debug_assert!(len <= usize::from(u16::MAX));
        let buf = &mut packet.buffer.as_mut()[..len];
        set_u16(buf, offs::SRC_PORT, self.src_port);
        set_u16(buf, offs::DST_PORT, self.dst_port);
        set_u16(buf, offs::LENGTH, len as u16);
        set_u16(buf, offs::CHECKSUM, 0);
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Udp, len as u32);
        let value = if caps.udp.tx {
            pseudo
        } else {
            match !checksum::combine(&[pseudo, checksum::data(buf)]) {
                0 => 0xffff,
                v => v,
            }
        };
        set_u16(buf, offs::CHECKSUM, value);
    }

    /// Writes the 8-byte header of a datagram whose `payload_len` payload bytes lie elsewhere
    /// (sent by reference after these headers) and sum to `payload_sum` ([`checksum::data`]):
    /// the checksum is computed in software from it. Without the payload's sum (`None`, for a
    /// device that fills UDP checksums) only the non-inverted pseudo-header sum is written.
    /// Panics if the buffer is shorter than 8.
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_len: usize,
        payload_sum: Option<u16>,
    ) {
        let len = self.buffer_len(payload_len);
        debug_assert!(len <= usize::from(u16::MAX));
        let buf = &mut packet.buffer.as_mut()[..HEADER_LEN];
        set_u16(buf, offs::SRC_PORT, self.src_port);
        set_u16(buf, offs::DST_PORT, self.dst_port);
        set_u16(buf, offs::LENGTH, len as u16);
        set_u16(buf, offs::CHECKSUM, 0);
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Udp, len as u32);
        let Some(payload_sum) = payload_sum else {
            set_u16(buf, offs::CHECKSUM, pseudo);
            return;
        };
        // The header is 8 bytes (even): the sums of header and payload simply combine.
        let value = match !checksum::combine(&[pseudo, checksum::data(buf), payload_sum]) {
            0 => 0xffff,
            v => v,
        };
        set_u16(buf, offs::CHECKSUM, value);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::tests::hex;

    const CAPS: ChecksumCapabilities = ChecksumCapabilities::none();
    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A DNS-port datagram 10.0.0.1:53000 -> 10.0.0.2:53, payload "slimtcp!\n" (9 bytes, odd),
    /// followed by 3 bytes of padding beyond the length field.
    fn datagram() -> Vec<u8> {
        hex("cf08 0035 0011 512d 736c696d74637021 0a  000000")
    }

    #[test]
    fn parse_known_datagram() {
        let bytes = datagram();
        let p = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (53000, 53, 17));
        assert_eq!(p.payload(), b"slimtcp!\n");
        assert!(p.verify_checksum(SRC, DST));
        let repr = UdpRepr::parse(&p, SRC, DST, &CAPS).unwrap();
        assert_eq!(repr, UdpRepr { src_port: 53000, dst_port: 53 });
        assert_eq!(UdpRepr::parse(&p, DST, Ipv4Addr::new(10, 0, 0, 3), &CAPS), Err(WireError::BadChecksum));
    }

    #[test]
    fn emit_roundtrip() {
        let bytes = datagram();
        let repr = UdpRepr { src_port: 53000, dst_port: 53 };
        let mut out = vec![0u8; bytes.len()];
        out[8..17].copy_from_slice(b"slimtcp!\n");
        repr.emit(&mut UdpPacket::new_unchecked(&mut out[..]), SRC, DST, 9, &CAPS);
        assert_eq!(out, bytes);
        assert_eq!(repr.header_len(), 8);
        assert_eq!(repr.buffer_len(9), 17);
    }

    #[test]
    fn header_for_a_payload_elsewhere_matches_the_whole_datagram() {
        let bytes = datagram();
        let repr = UdpRepr { src_port: 53000, dst_port: 53 };
        let payload = b"slimtcp!\n";
        let mut header = [0u8; 8];
        repr.emit_header(
            &mut UdpPacket::new_unchecked(&mut header[..]),
            SRC,
            DST,
            9,
            Some(checksum::data(payload)),
        );
        assert_eq!(header[..], bytes[..8]);
        // Left to the device: the pseudo-header sum only, as `emit` writes it with offload.
        repr.emit_header(&mut UdpPacket::new_unchecked(&mut header[..]), SRC, DST, 9, None);
        let mut whole = [0u8; 17];
        whole[8..].copy_from_slice(payload);
        let offload = ChecksumCapabilities::all();
        repr.emit(&mut UdpPacket::new_unchecked(&mut whole[..]), SRC, DST, 9, &offload);
        assert_eq!(header[..], whole[..8]);
    }

    #[test]
    fn zero_checksum_means_none_and_computed_zero_is_ffff() {
        let mut bytes = datagram();
        bytes[6] = 0;
        bytes[7] = 0;
        let p = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, SRC, DST, &CAPS).unwrap().dst_port, 53);
        // Choose a payload word so the checksum comes out as 0: the sum must be 0xffff.
        let repr = UdpRepr { src_port: 1, dst_port: 2 };
        let mut buf = [0u8; 10];
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), SRC, DST, 2, &CAPS);
        let sum = checksum::combine(&[
            checksum::pseudo_header(SRC, DST, IpProtocol::Udp, 10),
            checksum::data(&[0, 1, 0, 2, 0, 10]),
        ]);
        buf[8..10].copy_from_slice(&(0xffff - sum).to_be_bytes());
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), SRC, DST, 2, &CAPS);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.checksum(), 0xffff);
        assert!(UdpRepr::parse(&p, SRC, DST, &CAPS).is_ok());
        let mut buf2 = buf;
        UdpPacket::new_unchecked(&mut buf2[..]).fill_checksum(SRC, DST);
        assert_eq!(buf2, buf);
    }

    #[test]
    fn offloads() {
        let bytes = datagram();
        let repr = UdpRepr { src_port: 53000, dst_port: 53 };
        let mut caps = CAPS;
        caps.udp.tx = true;
        let mut out = bytes.clone();
        repr.emit(&mut UdpPacket::new_unchecked(&mut out[..]), SRC, DST, 9, &caps);
        let p = UdpPacket::new_unchecked(&out[..]);
        assert_eq!(p.checksum(), checksum::pseudo_header(SRC, DST, IpProtocol::Udp, 17));
        caps.udp.rx = true;
        let mut bad = bytes.clone();
        bad[9] ^= 1;
        let p = UdpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, SRC, DST, &CAPS), Err(WireError::BadChecksum));
        assert!(UdpRepr::parse(&p, SRC, DST, &caps).is_ok());
    }

    #[test]
    fn setters_roundtrip() {
        let mut buf = [0u8; 12];
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(5);
        p.set_dst_port(6);
        p.set_len(11);
        p.payload_mut().copy_from_slice(b"abc");
        p.fill_checksum(SRC, DST);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload(), b"abc");
        assert_eq!(UdpRepr::parse(&p, SRC, DST, &CAPS), Ok(UdpRepr { src_port: 5, dst_port: 6 }));
    }

    #[test]
    fn malformed_rejected() {
        let good = datagram();
        for len in 0..17 {
            assert_eq!(UdpPacket::new_checked(&good[..len]).unwrap_err(), WireError::Truncated);
            let p = UdpPacket::new_unchecked(&good[..len]);
            assert_eq!(UdpRepr::parse(&p, SRC, DST, &CAPS), Err(WireError::Truncated));
        }
        for bad_len in 0..8u8 {
            let mut b = good.clone();
            b[5] = bad_len;
            assert_eq!(UdpPacket::new_checked(&b[..]).unwrap_err(), WireError::Malformed);
        }
        let mut b = good.clone();
        b[5] = 21;
        assert_eq!(UdpPacket::new_checked(&b[..]).unwrap_err(), WireError::Truncated);
        let mut b = good.clone();
        b[16] ^= 0x80;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, SRC, DST, &CAPS), Err(WireError::BadChecksum));
    }
}
