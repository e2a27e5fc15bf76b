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
    #[inline]
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    #[inline]
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
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the buffer holds a fixed header (`Truncated`), the data offset is at least 5
    /// (`Malformed`) and the whole header with options fits (`Truncated`).
    #[inline]
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
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::DST_PORT)
    }

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(get_u32(self.buffer.as_ref(), offs::SEQ))
    }

    /// Acknowledgment number field (meaningful only with the ACK flag).
    #[inline]
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(get_u32(self.buffer.as_ref(), offs::ACK))
    }

    /// Header length in bytes (data offset * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[offs::DATA_OFF] >> 4) * 4
    }

    /// All control bits of byte 13, as sent (ACK included).
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[offs::FLAGS])
    }

    /// The FIN flag.
    #[inline]
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// The SYN flag.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// The RST flag.
    #[inline]
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// The PSH flag.
    #[inline]
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// The ACK flag.
    #[inline]
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// Window field (unscaled).
    #[inline]
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::WINDOW)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Urgent pointer field.
    #[inline]
    pub fn urgent(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::URGENT)
    }

    /// The options area: bytes `20..header_len`.
    #[inline]
    pub fn options(&self) -> &[u8] {
        sub(self.buffer.as_ref(), HEADER_LEN, self.header_len())
    }

    /// Iterates over the options area.
    #[inline]
    pub fn option_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    /// The payload: bytes `header_len..` (the buffer must end where the segment ends).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), self.header_len(), usize::MAX)
    }

    /// True if the checksum over the pseudo-header and the whole buffer is correct.
    #[inline]
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let data = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, data.len() as u32);
        checksum::combine(&[pseudo, checksum::data(data)]) == 0xffff
    }

    /// The checksum as a received segment needs it: verified unless `caps.tcp.rx` says the
    /// device did (`BadChecksum` when wrong).
    #[inline]
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
    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        set_u16(self.buffer.as_mut(), offs::SRC_PORT, port)
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        set_u16(self.buffer.as_mut(), offs::DST_PORT, port)
    }

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, seq: SeqNumber) {
        set_u32(self.buffer.as_mut(), offs::SEQ, seq.0)
    }

    /// Sets the acknowledgment number field.
    #[inline]
    pub fn set_ack_number(&mut self, ack: SeqNumber) {
        set_u32(self.buffer.as_mut(), offs::ACK, ack.0)
    }

    /// Sets the header length in bytes (a multiple of 4, 20..=60); clears the reserved bits.
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[offs::DATA_OFF] = (((len / 4) as u8) & 0x0f) << 4;
    }

    /// Sets all control bits of byte 13.
    #[inline]
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[offs::FLAGS] = flags.0;
    }

    /// Sets the window field.
    #[inline]
    pub fn set_window_len(&mut self, window: u16) {
        set_u16(self.buffer.as_mut(), offs::WINDOW, window)
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::CHECKSUM, value)
    }

    /// Sets the urgent pointer field.
    #[inline]
    pub fn set_urgent(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::URGENT, value)
    }

    /// Mutable options area: bytes `20..header_len`.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        sub_mut(self.buffer.as_mut(), HEADER_LEN, end)
    }

    /// Mutable payload: bytes `header_len..`.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        sub_mut(self.buffer.as_mut(), start, usize::MAX)
    }

    /// Computes and writes the checksum over the pseudo-header and the whole buffer (which must
    /// be exactly the segment).
    #[inline]
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
    #[inline]
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
mod tests;
