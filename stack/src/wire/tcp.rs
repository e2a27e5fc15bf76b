//! TCP segments (RFC 9293) with the MSS and window-scale options (RFC 7323) and SACK (RFC 2018,
//! `tcp_sack.rs`); other options are parsed for well-formedness and ignored.

use super::field::{get_u16, get_u32, set_u16, set_u32, sub, sub_mut};
use super::tcp_option::{kind, KnownOptions};
pub use super::tcp_option::{TcpOption, TcpOptionIter};
pub use super::tcp_sack::TcpSack;
use super::SeqNumber;
use super::{checksum, ChecksumCapabilities, IpProtocol, Ipv4Addr, WireError};

/// Length of a TCP header without options (the minimum).
pub const HEADER_LEN: usize = 20;

/// Largest window-scale shift allowed by RFC 7323; larger received values are clamped.
pub const MAX_WINDOW_SCALE: u8 = 14;

/// Byte offsets of the fixed header's fields.
pub(crate) mod offs {
    pub(crate) const SRC_PORT: usize = 0;
    pub(crate) const DST_PORT: usize = 2;
    pub(crate) const SEQ: usize = 4;
    pub(crate) const ACK: usize = 8;
    pub(crate) const DATA_OFF: usize = 12;
    pub(crate) const FLAGS: usize = 13;
    pub(crate) const WINDOW: usize = 14;
    pub(crate) const CHECKSUM: usize = 16;
    pub(crate) const URGENT: usize = 18;
}

/// The TCP control bits of byte 13 of the header.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// The acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// The urgent pointer is significant (never emitted by SlimTCP).
    pub const URG: TcpFlags = TcpFlags(0x20);

    /// No flags.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// Flags from the raw header byte.
    pub const fn from_bits(bits: u8) -> TcpFlags {
        TcpFlags(bits)
    }

    /// The raw header byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// True if no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True if every flag of `other` is set in `self`.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if any flag of `other` is set in `self`.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets the flags of `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }
}

impl std::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl std::ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl std::fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        if self.0 == 0 {
            return f.write_str("TcpFlags(empty)");
        }
        f.write_str("TcpFlags(")?;
        let mut first = true;
        for (bit, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        f.write_str(")")
    }
}

/// A zero-copy view of a TCP segment (header, options and payload).
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it; accessors may panic until
    /// [`check_len`](Self::check_len) has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the buffer holds a fixed header (`Truncated`), the data offset is at least 5
    /// (`Malformed`) and the whole header with options fits (`Truncated`).
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if header_len > len {
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

    /// Sequence number.
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(get_u32(self.buffer.as_ref(), offs::SEQ))
    }

    /// Acknowledgment number field (meaningful only with the ACK flag).
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(get_u32(self.buffer.as_ref(), offs::ACK))
    }

    /// Header length in bytes (data offset * 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[offs::DATA_OFF] >> 4) * 4
    }

    /// All control bits of byte 13, as sent (ACK included).
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[offs::FLAGS])
    }

    /// The FIN flag.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// The SYN flag.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// The RST flag.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// The PSH flag.
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// The ACK flag.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// Window field (unscaled).
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::WINDOW)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Urgent pointer field.
    pub fn urgent(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::URGENT)
    }

    /// The options area: bytes `20..header_len`.
    pub fn options(&self) -> &[u8] {
        sub(self.buffer.as_ref(), HEADER_LEN, self.header_len())
    }

    /// Iterates over the options area.
    pub fn option_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    /// The payload: bytes `header_len..` (the buffer must end where the segment ends).
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }

    /// True if the checksum over the pseudo-header and the whole buffer is correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let data = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, data.len() as u32);
        checksum::combine(&[pseudo, checksum::data(data)]) == 0xffff
    }

    /// The checksum as a received segment needs it: verified unless `caps.tcp.rx` says the
    /// device did (`BadChecksum` when wrong).
    pub fn check_checksum(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        caps: &ChecksumCapabilities,
    ) -> Result<(), WireError> {
        if !caps.tcp.rx && !self.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        Ok(())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        set_u16(self.buffer.as_mut(), offs::SRC_PORT, port)
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        set_u16(self.buffer.as_mut(), offs::DST_PORT, port)
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: SeqNumber) {
        set_u32(self.buffer.as_mut(), offs::SEQ, seq.0)
    }

    /// Sets the acknowledgment number field.
    pub fn set_ack_number(&mut self, ack: SeqNumber) {
        set_u32(self.buffer.as_mut(), offs::ACK, ack.0)
    }

    /// Sets the header length in bytes (a multiple of 4, 20..=60); clears the reserved bits.
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[offs::DATA_OFF] = (((len / 4) as u8) & 0x0f) << 4;
    }

    /// Sets all control bits of byte 13.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[offs::FLAGS] = flags.0;
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, window: u16) {
        set_u16(self.buffer.as_mut(), offs::WINDOW, window)
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::CHECKSUM, value)
    }

    /// Sets the urgent pointer field.
    pub fn set_urgent(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::URGENT, value)
    }

    /// Mutable options area: bytes `20..header_len`.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        sub_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }

    /// Mutable payload: bytes `header_len..`.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        sub_mut(self.buffer.as_mut(), start, usize::MAX)
    }

    /// Computes and writes the checksum over the pseudo-header and the whole buffer (which must
    /// be exactly the segment).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, data.len() as u32);
        let sum = checksum::combine(&[pseudo, checksum::data(data)]);
        self.set_checksum(!sum)
    }
}

/// The parsed TCP header the state machine works with.
///
/// `flags` holds only SYN, FIN, RST and PSH; the ACK bit is `ack_number.is_some()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: SeqNumber,
    /// Acknowledgment number, present iff the ACK flag is set.
    pub ack_number: Option<SeqNumber>,
    /// SYN, FIN, RST and PSH (never ACK; see `ack_number`).
    pub flags: TcpFlags,
    /// Window field (unscaled).
    pub window_len: u16,
    /// The MSS option, if present.
    pub max_seg_size: Option<u16>,
    /// The window-scale option (clamped to 14 on parse), if present.
    pub window_scale: Option<u8>,
    /// SACK-permitted and SACK blocks.
    pub sack: TcpSack,
}

/// The flags `TcpRepr` carries.
const REPR_FLAGS: TcpFlags = TcpFlags(TcpFlags::SYN.0 | TcpFlags::FIN.0 | TcpFlags::RST.0 | TcpFlags::PSH.0);

impl TcpRepr {
    /// Parses and validates a segment whose buffer is exactly the IPv4 payload: lengths (see
    /// [`TcpPacket::check_len`]), the checksum unless `caps.tcp.rx` (`BadChecksum`), ports
    /// non-zero, no SYN with FIN or RST, and well-formed options (all `Malformed`).
    ///
    /// The payload is `packet.payload()`.
    ///
    /// Inlined: the receive path's one caller then builds the repr where it keeps it.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        caps: &ChecksumCapabilities,
    ) -> Result<TcpRepr, WireError> {
        packet.check_len()?;
        packet.check_checksum(src, dst, caps)?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(WireError::Malformed);
        }
        let raw = packet.flags();
        if raw.contains(TcpFlags::SYN) && raw.intersects(TcpFlags::FIN | TcpFlags::RST) {
            return Err(WireError::Malformed);
        }
        // A header without options (every data segment and ACK this stack sends) skips the walk.
        let options = if packet.header_len() > HEADER_LEN {
            KnownOptions::parse(packet.options())?
        } else {
            KnownOptions::default()
        };
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: raw.contains(TcpFlags::ACK).then(|| packet.ack_number()),
            flags: raw & REPR_FLAGS,
            window_len: packet.window_len(),
            max_seg_size: options.max_seg_size,
            window_scale: options.window_scale,
            sack: options.sack,
        })
    }

    /// Length of the header this emits: 20, plus 4 for MSS, plus 4 for NOP + window scale, plus
    /// the SACK options ([`TcpSack::option_len`]).
    pub const fn header_len(&self) -> usize {
        let mut len = HEADER_LEN + self.sack.option_len();
        if self.max_seg_size.is_some() {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        len
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Sequence space the segment occupies: payload plus one for SYN and one for FIN.
    pub const fn segment_len(&self, payload_len: usize) -> usize {
        payload_len
            + (self.flags.0 & TcpFlags::SYN.0 != 0) as usize
            + (self.flags.0 & TcpFlags::FIN.0 != 0) as usize
    }

    /// Writes header, options and checksum. The caller has already placed `payload_len` bytes of
    /// payload at `header_len()`; the checksum covers `header_len() + payload_len` bytes. With
    /// `caps.tcp.tx` only the (non-inverted) pseudo-header sum is written, for the device to
    /// complete. The ACK bit is set iff `ack_number` is `Some`; urgent pointer is 0.
    ///
    /// Panics if the buffer is shorter than `header_len() + payload_len`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_len: usize,
        caps: &ChecksumCapabilities,
    ) {
        let header_len = self.header_len();
        let seg_len = header_len + payload_len;
        let mut flags = self.flags;
        flags.remove(TcpFlags::ACK);
        if self.ack_number.is_some() {
            flags.insert(TcpFlags::ACK);
        }
        let buf = &mut packet.buffer.as_mut()[..seg_len];
        set_u16(buf, offs::SRC_PORT, self.src_port);
        set_u16(buf, offs::DST_PORT, self.dst_port);
        set_u32(buf, offs::SEQ, self.seq_number.0);
        set_u32(buf, offs::ACK, self.ack_number.map_or(0, |a| a.0));
        buf[offs::DATA_OFF] = ((header_len / 4) as u8) << 4;
        buf[offs::FLAGS] = flags.0;
        set_u16(buf, offs::WINDOW, self.window_len);
        set_u16(buf, offs::CHECKSUM, 0);
        set_u16(buf, offs::URGENT, 0);
        let mut at = HEADER_LEN;
        if let Some(mss) = self.max_seg_size {
            let [hi, lo] = mss.to_be_bytes();
            buf[at..at + 4].copy_from_slice(&[kind::MSS, 4, hi, lo]);
            at += 4;
        }
        if let Some(shift) = self.window_scale {
            buf[at..at + 4].copy_from_slice(&[kind::NOP, kind::WINDOW_SCALE, 3, shift]);
            at += 4;
        }
        self.sack.emit(&mut buf[at..header_len]);
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, seg_len as u32);
        let value = if caps.tcp.tx { pseudo } else { !checksum::combine(&[pseudo, checksum::data(buf)]) };
        set_u16(buf, offs::CHECKSUM, value);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::tests::hex;

    const CAPS: ChecksumCapabilities = ChecksumCapabilities::none();
    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 2);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);

    /// A Linux-style SYN 192.168.1.2:48350 -> 192.168.1.1:80, seq 0x2a1b3c4d, window 64240,
    /// options MSS 1460, SACK-permitted, Timestamps (0x0013a2f1, 0), NOP, window scale 7.
    fn syn() -> Vec<u8> {
        hex("bcde 0050 2a1b3c4d 00000000 a002 faf0 0320 0000
             020405b4 0402 080a 0013a2f1 00000000 01 030307")
    }

    /// A data segment 192.168.1.1:80 -> 192.168.1.2:48350 with ACK|PSH, 5 payload bytes.
    fn data_segment() -> Vec<u8> {
        hex("0050 bcde 00001000 2a1b3c4e 5018 01f5 b314 0000 68656c6c6f")
    }

    #[test]
    fn parse_known_syn() {
        let bytes = syn();
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.options().len(), 20);
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst() && !p.psh());
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(DST, Ipv4Addr::new(192, 168, 1, 3)));
        let options: Vec<_> = p.option_iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            options,
            vec![
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps { tsval: 0x0013a2f1, tsecr: 0 },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        let repr = TcpRepr::parse(&p, SRC, DST, &CAPS).unwrap();
        assert_eq!(
            repr,
            TcpRepr {
                src_port: 48350,
                dst_port: 80,
                seq_number: SeqNumber(0x2a1b3c4d),
                ack_number: None,
                flags: TcpFlags::SYN,
                window_len: 64240,
                max_seg_size: Some(1460),
                window_scale: Some(7),
                sack: TcpSack::PERMITTED,
            }
        );
        assert_eq!(repr.segment_len(0), 1);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn parse_known_data_segment() {
        let bytes = data_segment();
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        let repr = TcpRepr::parse(&p, DST, SRC, &CAPS).unwrap();
        assert_eq!(repr.ack_number, Some(SeqNumber(0x2a1b3c4e)));
        assert_eq!(repr.flags, TcpFlags::PSH);
        assert_eq!(p.flags(), TcpFlags::PSH | TcpFlags::ACK);
        assert_eq!(p.payload(), b"hello");
        assert_eq!(repr.segment_len(5), 5);
        assert_eq!((repr.max_seg_size, repr.window_scale), (None, None));
        // emit reproduces the captured bytes exactly.
        let mut out = vec![0u8; repr.buffer_len(5)];
        out[repr.header_len()..].copy_from_slice(b"hello");
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), DST, SRC, 5, &CAPS);
        assert_eq!(out, bytes);
    }

    #[test]
    fn emit_parse_roundtrip() {
        let reprs = [
            TcpRepr {
                src_port: 1,
                dst_port: 65535,
                seq_number: SeqNumber(u32::MAX),
                ack_number: Some(SeqNumber(7)),
                flags: TcpFlags::SYN,
                window_len: 0xffff,
                max_seg_size: Some(9000),
                window_scale: Some(14),
                sack: TcpSack::NONE,
            },
            TcpRepr {
                src_port: 4000,
                dst_port: 5000,
                seq_number: SeqNumber(1),
                ack_number: None,
                flags: TcpFlags::RST,
                window_len: 0,
                max_seg_size: None,
                window_scale: Some(0),
                sack: TcpSack::NONE,
            },
            TcpRepr {
                src_port: 4000,
                dst_port: 5000,
                seq_number: SeqNumber(1),
                ack_number: Some(SeqNumber(0)),
                flags: TcpFlags::FIN | TcpFlags::PSH,
                window_len: 512,
                max_seg_size: Some(536),
                window_scale: None,
                sack: TcpSack::NONE,
            },
        ];
        for (i, repr) in reprs.iter().enumerate() {
            for payload_len in [0usize, 1, 7, 1460] {
                let mut buf = vec![0u8; repr.buffer_len(payload_len) + 3];
                for (j, b) in buf[repr.header_len()..].iter_mut().enumerate() {
                    *b = (j * 31 + i) as u8;
                }
                repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), SRC, DST, payload_len, &CAPS);
                let seg = &buf[..repr.buffer_len(payload_len)];
                let p = TcpPacket::new_checked(seg).unwrap();
                assert_eq!(p.header_len(), repr.header_len());
                assert_eq!(p.urgent(), 0);
                assert_eq!(TcpRepr::parse(&p, SRC, DST, &CAPS).unwrap(), *repr);
                assert_eq!(p.payload().len(), payload_len);
            }
        }
        assert_eq!(reprs[0].segment_len(10), 11);
        assert_eq!(reprs[2].segment_len(10), 11);
    }

    #[test]
    fn ack_flag_in_repr_flags_is_ignored_on_emit() {
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq_number: SeqNumber(0),
            ack_number: None,
            flags: TcpFlags::ACK | TcpFlags::FIN,
            window_len: 0,
            max_seg_size: None,
            window_scale: None,
            sack: TcpSack::NONE,
        };
        let mut buf = [0u8; 20];
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), SRC, DST, 0, &CAPS);
        assert_eq!(TcpPacket::new_unchecked(&buf[..]).flags(), TcpFlags::FIN);
    }

    #[test]
    fn tx_offload_writes_pseudo_header_sum() {
        let bytes = data_segment();
        let repr = TcpRepr::parse(&TcpPacket::new_checked(&bytes[..]).unwrap(), DST, SRC, &CAPS).unwrap();
        let mut caps = CAPS;
        caps.tcp.tx = true;
        let mut out = bytes.clone();
        let mut p = TcpPacket::new_unchecked(&mut out[..]);
        repr.emit(&mut p, DST, SRC, 5, &caps);
        assert_eq!(p.checksum(), checksum::pseudo_header(DST, SRC, IpProtocol::Tcp, 25));
        // A device completing it (sum over segment with the pseudo sum in place, inverted).
        let full = !checksum::data(&out);
        let mut p = TcpPacket::new_unchecked(&mut out[..]);
        p.set_checksum(full);
        assert_eq!(out, bytes);
        // rx offload skips verification.
        let mut bad = bytes.clone();
        bad[17] ^= 0xff;
        let p = TcpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, DST, SRC, &CAPS), Err(WireError::BadChecksum));
        caps.tcp.rx = true;
        assert_eq!(TcpRepr::parse(&p, DST, SRC, &caps), Ok(repr));
    }

    #[test]
    fn fill_checksum_in_place() {
        let mut bytes = data_segment();
        let mut p = TcpPacket::new_unchecked(&mut bytes[..]);
        p.set_seq_number(SeqNumber(0x1001));
        p.set_window_len(1000);
        assert!(!p.verify_checksum(DST, SRC));
        p.fill_checksum(DST, SRC);
        assert!(p.verify_checksum(DST, SRC));
        assert_eq!(p.seq_number(), SeqNumber(0x1001));
        assert_eq!(p.window_len(), 1000);
    }

    #[test]
    fn setters_roundtrip() {
        let mut buf = [0u8; 28];
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(10);
        p.set_dst_port(20);
        p.set_seq_number(SeqNumber(30));
        p.set_ack_number(SeqNumber(40));
        p.set_header_len(24);
        p.set_flags(TcpFlags::SYN | TcpFlags::ACK);
        p.set_window_len(50);
        p.set_urgent(60);
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        p.payload_mut().copy_from_slice(&[9; 4]);
        p.fill_checksum(SRC, DST);
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.urgent(), p.window_len()), (10, 20, 60, 50));
        assert_eq!((p.seq_number(), p.ack_number()), (SeqNumber(30), SeqNumber(40)));
        assert_eq!(p.payload(), &[9; 4]);
        let repr = TcpRepr::parse(&p, SRC, DST, &CAPS).unwrap();
        assert_eq!(repr.ack_number, Some(SeqNumber(40)));
        assert_eq!(repr.flags, TcpFlags::SYN);
    }

    /// Rebuilds `syn()` with a different options area (padded to a multiple of 4) and a fresh
    /// checksum.
    fn syn_with_options(options: &[u8]) -> Vec<u8> {
        let mut bytes = syn()[..20].to_vec();
        bytes.extend_from_slice(options);
        while bytes.len() % 4 != 0 {
            bytes.push(0);
        }
        let len = bytes.len();
        let mut p = TcpPacket::new_unchecked(&mut bytes[..]);
        p.set_header_len(len);
        p.set_flags(TcpFlags::SYN);
        p.fill_checksum(SRC, DST);
        bytes
    }

    fn parse(bytes: &[u8]) -> Result<TcpRepr, WireError> {
        TcpRepr::parse(&TcpPacket::new_checked(bytes)?, SRC, DST, &CAPS)
    }

    #[test]
    fn options_edge_cases() {
        // Unknown, SACK, odd-length timestamps and EOL with garbage after it are all ignored.
        let r = parse(&syn_with_options(&[
            0x1e, 4, 0xaa, 0xbb, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2, 8, 3, 1, 0, 0xff, 0xff,
        ]))
        .unwrap();
        assert_eq!((r.max_seg_size, r.window_scale), (None, None));
        // Window scale above 14 is clamped.
        let r = parse(&syn_with_options(&[3, 3, 200])).unwrap();
        assert_eq!(r.window_scale, Some(14));
        // A known kind with the wrong length is ignored, not fatal.
        let r = parse(&syn_with_options(&[2, 3, 5, 2, 4, 1, 2])).unwrap();
        assert_eq!(r.max_seg_size, Some(258));
        // Zero, one, and overrunning lengths are malformed.
        for opts in [&[2u8, 0, 1, 1][..], &[0x1e, 1, 1, 1], &[2, 4, 5, 0xb4, 3, 5, 7, 1], &[1, 1, 1, 2]] {
            assert_eq!(parse(&syn_with_options(opts)), Err(WireError::Malformed), "{:?}", opts);
        }
        // A kind byte with no length byte at the end of the area.
        assert_eq!(parse(&syn_with_options(&[1, 1, 1, 8])), Err(WireError::Malformed));
    }

    #[test]
    fn malformed_rejected() {
        let good = syn();
        for len in 0..good.len() {
            let r = TcpPacket::new_checked(&good[..len]);
            assert_eq!(r.unwrap_err(), WireError::Truncated, "len {}", len);
            let unchecked = TcpPacket::new_unchecked(&good[..len]);
            assert!(TcpRepr::parse(&unchecked, SRC, DST, &CAPS).is_err());
        }
        // Data offset below 5.
        for off in 0..5u8 {
            let mut b = good.clone();
            b[12] = off << 4;
            assert_eq!(TcpPacket::new_checked(&b[..]).unwrap_err(), WireError::Malformed);
        }
        // Data offset beyond the buffer.
        let mut b = good.clone();
        b[12] = 0xb0;
        assert_eq!(TcpPacket::new_checked(&b[..]).unwrap_err(), WireError::Truncated);
        // Bad checksum.
        let mut b = good.clone();
        b[39] ^= 1;
        assert_eq!(parse(&b), Err(WireError::BadChecksum));
        // Port zero, SYN+FIN, SYN+RST (with valid checksums).
        let patch = |at: usize, value: u8| {
            let mut b = good.clone();
            b[at] = value;
            TcpPacket::new_unchecked(&mut b[..]).fill_checksum(SRC, DST);
            b
        };
        let mut b = good.clone();
        b[0] = 0;
        b[1] = 0;
        TcpPacket::new_unchecked(&mut b[..]).fill_checksum(SRC, DST);
        assert_eq!(parse(&b), Err(WireError::Malformed));
        let mut b = good.clone();
        b[2] = 0;
        b[3] = 0;
        TcpPacket::new_unchecked(&mut b[..]).fill_checksum(SRC, DST);
        assert_eq!(parse(&b), Err(WireError::Malformed));
        assert_eq!(parse(&patch(13, 0x03)), Err(WireError::Malformed));
        assert_eq!(parse(&patch(13, 0x06)), Err(WireError::Malformed));
        assert_eq!(parse(&patch(13, 0x16)), Err(WireError::Malformed));
        // FIN+RST without SYN is left to the state machine.
        assert!(parse(&patch(13, 0x05)).is_ok());
    }

    #[test]
    fn flags_api_and_debug() {
        let mut f = TcpFlags::empty();
        assert!(f.is_empty());
        f.insert(TcpFlags::SYN | TcpFlags::ACK);
        assert!(f.contains(TcpFlags::SYN) && f.contains(TcpFlags::ACK));
        assert!(!f.contains(TcpFlags::SYN | TcpFlags::FIN));
        f.remove(TcpFlags::ACK);
        assert_eq!(f, TcpFlags::SYN);
        assert_eq!(format!("{:?}", TcpFlags::SYN | TcpFlags::ACK), "TcpFlags(SYN | ACK)");
        assert_eq!(format!("{:?}", TcpFlags::empty()), "TcpFlags(empty)");
        assert_eq!(TcpFlags::from_bits(0x12).bits(), 0x12);
    }
}
