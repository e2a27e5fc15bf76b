//! IPv4 packets (RFC 791). Options are accepted and skipped; fragments are rejected.

use super::field::{get_ipv4, get_u16, set_ipv4, set_u16, sub, sub_mut};
use super::{checksum, ChecksumCapabilities, Ipv4Addr, WireError};

/// Length of an IPv4 header without options (the minimum).
pub const HEADER_LEN: usize = 20;

mod offs {
    pub(super) const VER_IHL: usize = 0;
    pub(super) const TOS: usize = 1;
    pub(super) const LENGTH: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const FLG_OFF: usize = 6;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: usize = 10;
    pub(super) const SRC: usize = 12;
    pub(super) const DST: usize = 16;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_MASK: u16 = 0x1fff;

/// The IP protocol number of a packet's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// ICMP (1).
    Icmp,
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// Any other protocol number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(value: u8) -> Self {
        match value {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(value: IpProtocol) -> Self {
        match value {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Unknown(other) => other,
        }
    }
}

/// A zero-copy view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic until
    /// [`check_len`](Self::check_len) has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the buffer holds a fixed header (`Truncated`), the IHL is at least 5 and
    /// `header_len <= total_len` (`Malformed`), and `total_len` fits in the buffer (`Truncated`).
    /// Bytes beyond `total_len` (Ethernet padding) are allowed and ignored.
    #[inline]
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = self.header_len();
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || total_len < header_len {
            return Err(WireError::Malformed);
        }
        if total_len > len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version field (4 for IPv4).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[offs::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[offs::VER_IHL] & 0x0f) * 4
    }

    /// Type of service (DSCP and ECN) byte.
    #[inline]
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[offs::TOS]
    }

    /// Total length field: header plus payload, in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::LENGTH)
    }

    /// Identification field.
    #[inline]
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::IDENT)
    }

    /// The Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        get_u16(self.buffer.as_ref(), offs::FLG_OFF) & FLAG_DF != 0
    }

    /// The More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), offs::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in **bytes** (the field value times 8).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (get_u16(self.buffer.as_ref(), offs::FLG_OFF) & FRAG_MASK) << 3
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[offs::TTL]
    }

    /// Protocol of the payload (same as [`protocol`](Self::protocol)).
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[offs::PROTOCOL])
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        self.next_header()
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        get_ipv4(self.buffer.as_ref(), offs::SRC)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        get_ipv4(self.buffer.as_ref(), offs::DST)
    }

    /// The header including options (`header_len` bytes).
    #[inline]
    pub fn header(&self) -> &[u8] {
        sub(self.buffer.as_ref(), 0, self.header_len())
    }

    /// True if the header checksum is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.header()) == 0xffff
    }

    /// The payload: bytes `header_len..total_len` (options skipped, link padding dropped).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), self.header_len(), usize::from(self.total_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version field.
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[offs::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the header length in bytes (must be a multiple of 4, 20..=60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[offs::VER_IHL];
        *b = (*b & 0xf0) | (((len / 4) as u8) & 0x0f);
    }

    /// Sets the type of service byte.
    #[inline]
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[offs::TOS] = tos;
    }

    /// Sets the total length field.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), offs::LENGTH, len)
    }

    /// Sets the identification field.
    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        set_u16(self.buffer.as_mut(), offs::IDENT, ident)
    }

    fn set_flag(&mut self, flag: u16, on: bool) {
        let old = get_u16(self.buffer.as_ref(), offs::FLG_OFF);
        let new = if on { old | flag } else { old & !flag };
        set_u16(self.buffer.as_mut(), offs::FLG_OFF, new)
    }

    /// Sets the Don't Fragment flag.
    #[inline]
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag(FLAG_DF, on)
    }

    /// Sets the More Fragments flag.
    #[inline]
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag(FLAG_MF, on)
    }

    /// Sets the fragment offset, in bytes (must be a multiple of 8).
    #[inline]
    pub fn set_frag_offset(&mut self, offset: u16) {
        let old = get_u16(self.buffer.as_ref(), offs::FLG_OFF);
        set_u16(self.buffer.as_mut(), offs::FLG_OFF, (old & !FRAG_MASK) | (offset >> 3))
    }

    /// Sets the time to live.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[offs::TTL] = ttl;
    }

    /// Sets the payload protocol (same as [`set_protocol`](Self::set_protocol)).
    #[inline]
    pub fn set_next_header(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[offs::PROTOCOL] = protocol.into();
    }

    /// Sets the payload protocol.
    #[inline]
    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.set_next_header(protocol)
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::CHECKSUM, value)
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        set_ipv4(self.buffer.as_mut(), offs::SRC, addr)
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        set_ipv4(self.buffer.as_mut(), offs::DST, addr)
    }

    /// Computes and writes the header checksum (over `header_len` bytes).
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.header());
        self.set_checksum(!sum)
    }

    /// Mutable payload: bytes `header_len..total_len`.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        sub_mut(self.buffer.as_mut(), start, end)
    }
}

/// The parsed, option-less view of an IPv4 header that the stack works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: IpProtocol,
    /// Payload length in bytes (`total_len - header_len`).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
}

impl Ipv4Repr {
    /// Parses and validates a packet: lengths (see [`Ipv4Packet::check_len`]), version 4
    /// (`Malformed`), header checksum unless `caps.ipv4.rx` (`BadChecksum`), and no
    /// fragmentation (`Fragmented`). Options are skipped.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Ipv4Packet<&T>,
        caps: &ChecksumCapabilities,
    ) -> Result<Ipv4Repr, WireError> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(WireError::Malformed);
        }
        if !caps.ipv4.rx && !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(WireError::Fragmented);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
        })
    }

    /// Length of the header this emits (20: no options).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header: no options, DF set, ident 0, TOS 0, and the checksum (or 0 when
    /// `caps.ipv4.tx`, the device fills it). The payload is not touched.
    ///
    /// Panics if the buffer is shorter than 20 bytes. `payload_len` must be at most 65515.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv4Packet<T>,
        caps: &ChecksumCapabilities,
    ) {
        debug_assert!(self.buffer_len() <= usize::from(u16::MAX));
        let buf = packet.buffer.as_mut();
        buf[offs::VER_IHL] = 0x45;
        buf[offs::TOS] = 0;
        set_u16(buf, offs::LENGTH, self.buffer_len() as u16);
        set_u16(buf, offs::IDENT, 0);
        set_u16(buf, offs::FLG_OFF, FLAG_DF);
        buf[offs::TTL] = self.ttl;
        buf[offs::PROTOCOL] = self.protocol.into();
        set_u16(buf, offs::CHECKSUM, 0);
        set_ipv4(buf, offs::SRC, self.src_addr);
        set_ipv4(buf, offs::DST, self.dst_addr);
        if !caps.ipv4.tx {
            let sum = checksum::data(&buf[..HEADER_LEN]);
            set_u16(buf, offs::CHECKSUM, !sum);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::tests::hex;

    const CAPS: ChecksumCapabilities = ChecksumCapabilities::none();

    /// Header from the Wikipedia "IPv4 header checksum" example (checksum 0xb861), followed by
    /// 95 payload bytes so total_len (0x73) fits.
    fn wikipedia() -> Vec<u8> {
        let mut v = hex("4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7");
        v.resize(0x73, 0xaa);
        v
    }

    /// A ping request IPv4 header 10.0.2.15 -> 10.0.2.2, ICMP, ident 0x1c46, DF, ttl 64, with
    /// 8 bytes of dummy payload and 4 bytes of Ethernet padding.
    fn small() -> Vec<u8> {
        hex("4500 001c 1c46 4000 4001 068b 0a00 020f 0a00 0202
             0800 f7ff 0000 0000  00000000")
    }

    #[test]
    fn parse_wikipedia_header() {
        let bytes = wikipedia();
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::Udp);
        assert_eq!(p.checksum(), 0xb861);
        assert!(p.verify_checksum());
        let repr = Ipv4Repr::parse(&p, &CAPS).unwrap();
        assert_eq!(
            repr,
            Ipv4Repr {
                src_addr: Ipv4Addr::new(192, 168, 0, 1),
                dst_addr: Ipv4Addr::new(192, 168, 0, 199),
                protocol: IpProtocol::Udp,
                payload_len: 0x73 - 20,
                ttl: 64,
            }
        );
        // emit reproduces the header byte for byte (ident is 0 there too).
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]), &CAPS);
        assert_eq!(&out[..20], &bytes[..20]);
    }

    #[test]
    fn padding_is_ignored_and_payload_bounded() {
        let bytes = small();
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.ident(), 0x1c46);
        assert_eq!(p.protocol(), IpProtocol::Icmp);
        assert_eq!(p.payload(), &bytes[20..28]);
        let repr = Ipv4Repr::parse(&p, &CAPS).unwrap();
        assert_eq!(repr.payload_len, 8);
        assert_eq!(repr.src_addr, Ipv4Addr::new(10, 0, 2, 15));
    }

    #[test]
    fn options_are_skipped() {
        // IHL 6 with one option word (NOP NOP NOP EOL), 4 bytes payload.
        let mut bytes = hex("4600 001c 0000 4000 4006 0000 0a000001 0a000002 01010100 deadbeef");
        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        p.fill_checksum();
        assert!(p.verify_checksum());
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let repr = Ipv4Repr::parse(&p, &CAPS).unwrap();
        assert_eq!(repr.payload_len, 4);
        assert_eq!(repr.protocol, IpProtocol::Tcp);
    }

    #[test]
    fn emit_parse_roundtrip_and_offload() {
        let repr = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 1, 2, 3),
            dst_addr: Ipv4Addr::new(10, 3, 2, 1),
            protocol: IpProtocol::Unknown(253),
            payload_len: 5,
            ttl: 17,
        };
        let mut buf = vec![0xffu8; repr.buffer_len() + 6];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        repr.emit(&mut p, &CAPS);
        p.payload_mut().copy_from_slice(b"hello");
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.dont_frag() && p.ident() == 0 && p.tos() == 0);
        assert_eq!(p.payload(), b"hello");
        assert_eq!(Ipv4Repr::parse(&p, &CAPS).unwrap(), repr);

        let mut caps = CAPS;
        caps.ipv4.tx = true;
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), &caps);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        assert_eq!(Ipv4Repr::parse(&p, &CAPS), Err(WireError::BadChecksum));
        caps.ipv4.rx = true;
        assert_eq!(Ipv4Repr::parse(&p, &caps).unwrap(), repr);
    }

    #[test]
    fn setters_roundtrip() {
        let mut buf = [0u8; 20];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_total_len(20);
        p.set_ident(0xbeef);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_dont_frag(false);
        p.set_ttl(3);
        p.set_next_header(IpProtocol::Tcp);
        p.set_tos(0xb8);
        p.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            (p.version(), p.header_len(), p.ident(), p.more_frags(), p.frag_offset(), p.dont_frag()),
            (4, 20, 0xbeef, true, 1480, false)
        );
        assert_eq!((p.ttl(), p.protocol(), p.tos()), (3, IpProtocol::Tcp, 0xb8));
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p, &CAPS), Err(WireError::Fragmented));
    }

    #[test]
    fn fragments_rejected() {
        for (flags_off, _) in [(0x2000u16, "MF"), (0x0001, "offset 8"), (0x6000, "DF+MF"), (0x1fff, "max")] {
            let mut bytes = small();
            set_u16(&mut bytes, offs::FLG_OFF, flags_off);
            Ipv4Packet::new_unchecked(&mut bytes[..]).fill_checksum();
            let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
            assert_eq!(Ipv4Repr::parse(&p, &CAPS), Err(WireError::Fragmented));
        }
    }

    #[test]
    fn malformed_rejected() {
        let good = small();
        // Every truncation of the valid packet (28 bytes without padding).
        for len in 0..28 {
            let r = Ipv4Packet::new_checked(&good[..len]);
            assert_eq!(r.unwrap_err(), WireError::Truncated, "len {}", len);
            let unchecked = Ipv4Packet::new_unchecked(&good[..len]);
            assert!(Ipv4Repr::parse(&unchecked, &CAPS).is_err());
        }
        // IHL below 5.
        for ihl in 0..5u8 {
            let mut b = good.clone();
            b[0] = 0x40 | ihl;
            assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), WireError::Malformed);
        }
        // IHL beyond total_len.
        let mut b = good.clone();
        b[0] = 0x48;
        assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), WireError::Malformed);
        // total_len below the header, and beyond the buffer.
        let mut b = good.clone();
        b[3] = 19;
        assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), WireError::Malformed);
        let mut b = good.clone();
        b[3] = 33;
        assert_eq!(Ipv4Packet::new_checked(&b[..]).unwrap_err(), WireError::Truncated);
        // Wrong version (with a correct checksum).
        let mut b = good.clone();
        b[0] = 0x65;
        Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, &CAPS), Err(WireError::Malformed));
        // Every single-bit flip in the header is caught by the checksum (or another check).
        for bit in 0..160 {
            let mut b = good.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                assert!(Ipv4Repr::parse(&p, &CAPS).is_err(), "bit {}", bit);
            }
        }
    }

    #[test]
    fn protocol_conversions() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
    }
}
