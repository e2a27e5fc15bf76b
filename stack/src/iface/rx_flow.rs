//! A flow's run of segments within a received burst. A bulk sender's segments arrive back to
//! back, and each repeats the previous one's TCP header byte for byte but for the sequence
//! number (where the previous payload ended) and the checksum. Such a segment needs neither a
//! parse of its header nor a lookup of its 4-tuple: it goes to the connection its predecessor
//! went to, which takes it as header prediction would (`Connection::on_continuation`). Linux's
//! GRO recognises its segments the same way, by comparing headers.
//!
//! Only the very next frame may continue a segment: any other frame, and the end of the burst
//! (applications act between polls), ends the run.

use std::net::Ipv4Addr;
use std::ops::Range;

use super::socket_set::SocketHandle;
use crate::wire::tcp::{offs, TcpFlags, TcpRepr, HEADER_LEN};
use crate::wire::SeqNumber;

/// Header bytes a continuation must repeat: the ports, then the ACK number, data offset, flags
/// and window, then the urgent pointer. Between them lie the sequence number and the checksum.
const PORTS: Range<usize> = offs::SRC_PORT..offs::SEQ;
const SEQ: Range<usize> = offs::SEQ..offs::ACK;
const ACK_TO_WINDOW: Range<usize> = offs::ACK..offs::CHECKSUM;
const URGENT: Range<usize> = offs::URGENT..HEADER_LEN;

/// The segment the last frame delivered, when the next one may continue it.
#[derive(Debug)]
pub(super) struct RxFlow {
    /// False between bursts and after any frame that was not a continuable data segment.
    live: bool,
    src: Ipv4Addr,
    header: [u8; HEADER_LEN],
    /// Where the delivered segment's payload ended: the continuation's sequence number.
    next_seq: SeqNumber,
    handle: SocketHandle,
    /// Its header's ACK number, window and PSH flag, decoded once for the run.
    ack: SeqNumber,
    window_len: u16,
    push: bool,
}

/// What a frame that continues the run is: its connection and its segment's fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Continuation {
    pub handle: SocketHandle,
    pub seq: SeqNumber,
    pub ack: SeqNumber,
    pub window_len: u16,
    pub push: bool,
}

impl Default for RxFlow {
    fn default() -> Self {
        RxFlow {
            live: false,
            src: Ipv4Addr::UNSPECIFIED,
            header: [0; HEADER_LEN],
            next_seq: SeqNumber(0),
            handle: SocketHandle::NONE,
            ack: SeqNumber(0),
            window_len: 0,
            push: false,
        }
    }
}

impl RxFlow {
    /// Ends the run; returns whether one was live (the frame being looked at may continue it).
    pub(super) fn take(&mut self) -> bool {
        std::mem::take(&mut self.live)
    }

    /// A run goes on from the segment whose header is `header` (from `src`), parsed into
    /// `repr`, which connection `handle` was just given: when it has an ACK, no options, SYN,
    /// RST or FIN, and a payload (`payload_len` bytes). Anything else starts no run.
    pub(super) fn start(
        &mut self,
        src: Ipv4Addr,
        header: &[u8; HEADER_LEN],
        repr: &TcpRepr,
        payload_len: usize,
        handle: SocketHandle,
    ) {
        let Some(ack) = repr.ack_number else { return };
        let plain = usize::from(header[offs::DATA_OFF] >> 4) * 4 == HEADER_LEN
            && !repr.flags.intersects(TcpFlags::SYN | TcpFlags::RST | TcpFlags::FIN);
        if !plain || payload_len == 0 {
            return;
        }
        *self = RxFlow {
            live: true,
            src,
            header: *header,
            next_seq: repr.seq_number + payload_len,
            handle,
            ack,
            window_len: repr.window_len,
            push: repr.flags.contains(TcpFlags::PSH),
        };
    }

    /// The frame's segment (`segment`: header and payload, from `src`) when it continues the
    /// run that [`take`](Self::take) just ended: a payload, and a header that repeats the run's
    /// but for the sequence number, which is where the run's payload ended, and the checksum
    /// (the caller checks it).
    #[inline]
    pub(super) fn continued_by(&self, src: Ipv4Addr, segment: &[u8]) -> Option<Continuation> {
        let header = segment.get(..HEADER_LEN)?;
        let continues = segment.len() > HEADER_LEN
            && src == self.src
            && header[PORTS] == self.header[PORTS]
            && header[SEQ] == self.next_seq.0.to_be_bytes()
            && header[ACK_TO_WINDOW] == self.header[ACK_TO_WINDOW]
            && header[URGENT] == self.header[URGENT];
        continues.then_some(Continuation {
            handle: self.handle,
            seq: self.next_seq,
            ack: self.ack,
            window_len: self.window_len,
            push: self.push,
        })
    }

    /// The run goes on past a continuation of `payload_len` bytes.
    pub(super) fn extend(&mut self, payload_len: usize) {
        self.next_seq += payload_len;
        self.live = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ChecksumCapabilities, TcpPacket, TcpSack};

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn repr(seq: u32, flags: TcpFlags) -> TcpRepr {
        TcpRepr {
            src_port: 4000,
            dst_port: 80,
            seq_number: SeqNumber(seq),
            ack_number: Some(SeqNumber(77)),
            flags,
            window_len: 512,
            max_seg_size: None,
            window_scale: None,
            sack: TcpSack::NONE,
        }
    }

    fn segment(repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0u8; repr.header_len() + payload.len()];
        bytes[repr.header_len()..].copy_from_slice(payload);
        repr.emit(
            &mut TcpPacket::new_unchecked(&mut bytes[..]),
            A,
            B,
            payload.len(),
            &ChecksumCapabilities::none(),
        );
        bytes
    }

    fn run_after(first: &[u8], payload_len: usize) -> RxFlow {
        let packet = TcpPacket::new_checked(first).expect("whole header");
        let repr = TcpRepr::parse(&packet, A, B, &ChecksumCapabilities::none()).expect("valid");
        let header: [u8; HEADER_LEN] = first[..HEADER_LEN].try_into().expect("20 bytes");
        let mut flow = RxFlow::default();
        flow.start(A, &header, &repr, payload_len, SocketHandle::for_test(3));
        flow
    }

    #[test]
    fn the_next_segment_continues_with_the_first_ones_fields() {
        let flow = run_after(&segment(&repr(1000, TcpFlags::PSH), &[7; 64]), 64);
        let next = segment(&repr(1064, TcpFlags::PSH), &[9; 100]);
        let c = flow.continued_by(A, &next).expect("continues");
        assert_eq!(
            (c.handle, c.seq, c.ack, c.window_len, c.push),
            (SocketHandle::for_test(3), SeqNumber(1064), SeqNumber(77), 512, true)
        );
    }

    #[test]
    fn any_other_header_byte_source_or_sequence_number_ends_the_run() {
        let flow = run_after(&segment(&repr(1000, TcpFlags::empty()), &[7; 64]), 64);
        let next = segment(&repr(1064, TcpFlags::empty()), &[9; 10]);
        assert!(flow.continued_by(A, &next).is_some());
        for byte in (0..HEADER_LEN).filter(|b| !(offs::CHECKSUM..offs::URGENT).contains(b)) {
            let mut changed = next.clone();
            changed[byte] ^= 0x10;
            assert!(flow.continued_by(A, &changed).is_none(), "byte {byte} changed");
        }
        assert!(flow.continued_by(Ipv4Addr::new(10, 0, 0, 3), &next).is_none(), "another source");
        assert!(flow.continued_by(A, &next[..HEADER_LEN]).is_none(), "no payload");
        let mut checksum = next.clone();
        checksum[offs::CHECKSUM] ^= 1;
        assert!(flow.continued_by(A, &checksum).is_some(), "the caller checks the checksum");
    }

    #[test]
    fn only_plain_data_segments_start_a_run() {
        for flags in [TcpFlags::SYN, TcpFlags::FIN, TcpFlags::RST] {
            let bytes = segment(&repr(1000, flags), &[1; 8]);
            assert!(!run_after(&bytes, 8).live, "{flags:?}");
        }
        let mut no_ack = repr(1000, TcpFlags::empty());
        no_ack.ack_number = None;
        assert!(!run_after(&segment(&no_ack, &[1; 8]), 8).live, "no ACK");
        let mut with_mss = repr(1000, TcpFlags::empty());
        with_mss.max_seg_size = Some(1460);
        assert!(!run_after(&segment(&with_mss, &[1; 8]), 8).live, "options");
        assert!(!run_after(&segment(&repr(1000, TcpFlags::empty()), &[]), 0).live, "no payload");
        let mut flow = run_after(&segment(&repr(1000, TcpFlags::empty()), &[1; 8]), 8);
        assert!(flow.take() && !flow.take(), "taken once");
    }
}
