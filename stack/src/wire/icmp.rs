//! ICMPv4 (RFC 792): echo request and reply only.

use super::field::{get_u16, set_u16, sub, sub_mut};
use super::{checksum, ChecksumCapabilities, WireError};

/// Length of the ICMP header including the echo identifier and sequence number.
pub const HEADER_LEN: usize = 8;

const TYPE_ECHO_REPLY: u8 = 0;
const TYPE_ECHO_REQUEST: u8 = 8;

mod offs {
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const SEQ_NO: usize = 6;
}

/// A zero-copy view of an ICMPv4 message (buffer = the whole IPv4 payload).
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic until
    /// [`check_len`](Self::check_len) has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than the 8-byte header.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type (8 echo request, 0 echo reply).
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[offs::TYPE]
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[offs::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::CHECKSUM)
    }

    /// Echo identifier (bytes 4..6).
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::IDENT)
    }

    /// Echo sequence number (bytes 6..8).
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), offs::SEQ_NO)
    }

    /// Everything after the 8-byte header (the echo data).
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), HEADER_LEN, usize::MAX)
    }

    /// True if the checksum over the whole buffer is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[offs::TYPE] = value;
    }

    /// Sets the message code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[offs::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::CHECKSUM, value)
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::IDENT, value)
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), offs::SEQ_NO, value)
    }

    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        sub_mut(self.buffer.as_mut(), HEADER_LEN, usize::MAX)
    }

    /// Computes and writes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(!sum)
    }
}

/// A parsed ICMP echo message; `data` borrows from the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (type 8, "ping").
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data to echo back.
        data: &'a [u8],
    },
    /// Echo reply (type 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echoed data.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parses an echo request or reply. The checksum is always verified in software
    /// (`BadChecksum`; `caps` is accepted for symmetry and ignored). Other message types are
    /// `Unsupported`; an echo with a non-zero code is `Malformed`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &'a Icmpv4Packet<&'a T>,
        caps: &ChecksumCapabilities,
    ) -> Result<Icmpv4Repr<'a>, WireError> {
        let _ = caps;
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        let (ident, seq_no, data) = (packet.echo_ident(), packet.echo_seq_no(), packet.payload());
        let repr = match packet.msg_type() {
            TYPE_ECHO_REQUEST => Icmpv4Repr::EchoRequest { ident, seq_no, data },
            TYPE_ECHO_REPLY => Icmpv4Repr::EchoReply { ident, seq_no, data },
            _ => return Err(WireError::Unsupported),
        };
        if packet.msg_code() != 0 {
            return Err(WireError::Malformed);
        }
        Ok(repr)
    }

    /// Header plus data length.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
        }
    }

    /// Writes header, data and checksum (over the first `buffer_len()` bytes). Panics if the
    /// buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        let (msg_type, ident, seq_no, data) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } => (TYPE_ECHO_REQUEST, ident, seq_no, data),
            Icmpv4Repr::EchoReply { ident, seq_no, data } => (TYPE_ECHO_REPLY, ident, seq_no, data),
        };
        let len = self.buffer_len();
        let buf = &mut packet.buffer.as_mut()[..len];
        buf[offs::TYPE] = msg_type;
        buf[offs::CODE] = 0;
        set_u16(buf, offs::CHECKSUM, 0);
        set_u16(buf, offs::IDENT, ident);
        set_u16(buf, offs::SEQ_NO, seq_no);
        buf[HEADER_LEN..].copy_from_slice(data);
        let sum = checksum::data(buf);
        set_u16(buf, offs::CHECKSUM, !sum);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::tests::hex;

    const CAPS: ChecksumCapabilities = ChecksumCapabilities::none();

    /// A `ping` echo request: ident 0x1234, seq 1, 16 bytes of data "abcdefghijklmnop".
    fn request() -> Vec<u8> {
        hex("08 00 a27f 1234 0001 6162636465666768696a6b6c6d6e6f70")
    }

    #[test]
    fn parse_known_request() {
        let bytes = request();
        let p = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.msg_type(), p.msg_code(), p.echo_ident(), p.echo_seq_no()), (8, 0, 0x1234, 1));
        assert!(p.verify_checksum());
        let repr = Icmpv4Repr::parse(&p, &CAPS).unwrap();
        assert_eq!(repr, Icmpv4Repr::EchoRequest { ident: 0x1234, seq_no: 1, data: b"abcdefghijklmnop" });
        assert_eq!(repr.buffer_len(), bytes.len());
    }

    #[test]
    fn emit_roundtrip_and_reply() {
        let bytes = request();
        let p = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        let repr = Icmpv4Repr::parse(&p, &CAPS).unwrap();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);

        let Icmpv4Repr::EchoRequest { ident, seq_no, data } = repr else { panic!() };
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
        reply.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
        // Only the type changed: the checksum moves by 0x0800.
        assert_eq!(out[0], 0);
        assert_eq!(
            u16::from_be_bytes([out[2], out[3]]),
            checksum::combine(&[u16::from_be_bytes([bytes[2], bytes[3]]), 0x0800])
        );
        let p = Icmpv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, &CAPS).unwrap(), reply);

        let empty = Icmpv4Repr::EchoReply { ident: 0, seq_no: 0xffff, data: &[] };
        let mut out = [0u8; 8];
        empty.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).unwrap(), &CAPS), Ok(empty));
    }

    #[test]
    fn setters_roundtrip() {
        let mut buf = [0u8; 10];
        let mut p = Icmpv4Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(8);
        p.set_msg_code(0);
        p.set_echo_ident(7);
        p.set_echo_seq_no(9);
        p.payload_mut().copy_from_slice(b"hi");
        p.fill_checksum();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, &CAPS),
            Ok(Icmpv4Repr::EchoRequest { ident: 7, seq_no: 9, data: b"hi" })
        );
    }

    #[test]
    fn malformed_rejected() {
        let good = request();
        for len in 0..HEADER_LEN {
            assert_eq!(Icmpv4Packet::new_checked(&good[..len]).unwrap_err(), WireError::Truncated);
        }
        for len in 0..good.len() {
            let p = Icmpv4Packet::new_unchecked(&good[..len]);
            assert!(Icmpv4Repr::parse(&p, &CAPS).is_err(), "len {}", len);
        }
        let mut b = good.clone();
        b[23] ^= 0x40;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, &CAPS), Err(WireError::BadChecksum));
        // Destination unreachable (type 3) with a valid checksum.
        let mut b = good.clone();
        b[0] = 3;
        b[1] = 1;
        Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, &CAPS), Err(WireError::Unsupported));
        // Echo request with a non-zero code.
        let mut b = good.clone();
        b[1] = 1;
        Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, &CAPS), Err(WireError::Malformed));
    }
}
