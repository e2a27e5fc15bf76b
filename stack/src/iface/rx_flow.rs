//! A flow's run of segments within a received burst. A bulk sender's frames arrive back to
//! back, and each repeats the previous one's headers byte for byte but for the IPv4 total
//! length, identification and checksum and the TCP sequence number (where the previous payload
//! ended) and checksum. Such a frame needs no parse of its Ethernet, IPv4 or TCP header, no
//! address checks (the run's first frame passed them with the same bytes) and no lookup of its
//! 4-tuple: it goes to the connection its predecessor went to, which takes it as header
//! prediction would (`Connection::on_continuation`). Linux's GRO recognises its segments the
//! same way, by comparing headers.
//!
//! The PSH flag may differ: a sender sets it on the last segment of each write, and a run goes
//! on across writes (each continuation carries its own flag to the connection).
//!
//! Only the very next frame may continue a segment: any other frame, and the end of the burst
//! (applications act between polls), ends the run.
//!
//! A continuation's payload is most often taken the short way
//! (`Connection::take_continued_payload`): the bookkeeping every segment of the run would
//! repeat (window update, note of the peer) is owed, noted here, and done once
//! (`Connection::end_continuation_run`) before anything else touches the connection: before
//! any frame that takes another way, and at the burst's end.

use std::net::Ipv4Addr;
use std::ops::Range;

use super::socket_set::SocketHandle;
use crate::wire::tcp::{offs, TcpFlags, TcpRepr, HEADER_LEN};
use crate::wire::SeqNumber;

const ETH_LEN: usize = crate::wire::ethernet::HEADER_LEN;
const IP_LEN: usize = crate::wire::ipv4::HEADER_LEN;
/// The Ethernet and IPv4 headers (without IPv4 options) in front of a run's TCP headers.
pub(super) const LINK_IP_LEN: usize = ETH_LEN + IP_LEN;
/// A run's frame headers: Ethernet, IPv4 and TCP, none with options.
pub(super) const HEADERS_LEN: usize = LINK_IP_LEN + HEADER_LEN;

/// The frame bytes a continuation must repeat (offsets in the frame): the whole Ethernet header
/// and the IPv4 version, header length and TOS; then flags, fragment offset, TTL and protocol;
/// then the addresses and the TCP ports; then the ACK number and data offset; the flags but PSH;
/// the window; then the urgent pointer. Between them lie the IPv4 total length, identification
/// and checksum and the TCP sequence number and checksum.
const LINK_TO_TOS: Range<usize> = 0..ETH_LEN + 2;
const FLAGS_TO_PROTOCOL: Range<usize> = ETH_LEN + 6..ETH_LEN + 10;
const ADDRESSES_AND_PORTS: Range<usize> = ETH_LEN + 12..LINK_IP_LEN + offs::SEQ;
const ACK_AND_DATA_OFF: Range<usize> = LINK_IP_LEN + offs::ACK..LINK_IP_LEN + offs::FLAGS;
const FLAGS: usize = LINK_IP_LEN + offs::FLAGS;
const WINDOW: Range<usize> = LINK_IP_LEN + offs::WINDOW..LINK_IP_LEN + offs::CHECKSUM;
const URGENT: Range<usize> = LINK_IP_LEN + offs::URGENT..HEADERS_LEN;
/// Fields read from a continuation, and the run's source address.
const TOTAL_LEN: Range<usize> = ETH_LEN + 2..ETH_LEN + 4;
const SEQ: Range<usize> = LINK_IP_LEN + offs::SEQ..LINK_IP_LEN + offs::ACK;
const SRC_ADDR: Range<usize> = ETH_LEN + 12..ETH_LEN + 16;

/// The segment the last frame delivered, when the next one may continue it.
#[derive(Debug)]
pub(super) struct RxFlow {
    /// False between bursts and after any frame that was not a continuable data segment.
    live: bool,
    /// The run's first frame's headers.
    headers: [u8; HEADERS_LEN],
    /// Where the delivered segment's payload ended: the continuation's sequence number.
    next_seq: SeqNumber,
    handle: SocketHandle,
    /// Its header's ACK number and window, decoded once for the run.
    ack: SeqNumber,
    window_len: u16,
    /// Where the last segment taken the short way starts, while the run's bookkeeping is owed.
    owed: Option<SeqNumber>,
}

/// The bookkeeping owed for a run's segments taken the short way (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OwedRun {
    pub handle: SocketHandle,
    /// Where the last of them starts.
    pub last_seq: SeqNumber,
    /// The run's window field.
    pub window_len: u16,
}

impl OwedRun {
    /// Does the bookkeeping on the run's connection.
    pub(super) fn settle(self, conn: &mut crate::tcp::Connection, now: crate::time::Instant) {
        conn.end_continuation_run(now, self.last_seq, self.window_len);
    }
}

/// What a frame that continues the run is: its connection and its segment's fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Continuation {
    pub handle: SocketHandle,
    /// The sender's address (the run's).
    pub src: Ipv4Addr,
    /// Where the frame's TCP segment ends (Ethernet padding lies beyond).
    pub segment_end: usize,
    pub seq: SeqNumber,
    pub ack: SeqNumber,
    pub window_len: u16,
    /// The continuation's own PSH flag.
    pub push: bool,
}

impl Default for RxFlow {
    fn default() -> Self {
        RxFlow {
            live: false,
            headers: [0; HEADERS_LEN],
            next_seq: SeqNumber(0),
            handle: SocketHandle::NONE,
            ack: SeqNumber(0),
            window_len: 0,
            owed: None,
        }
    }
}

impl RxFlow {
    /// Ends the run; returns whether one was live (the frame being looked at may continue it).
    pub(super) fn take(&mut self) -> bool {
        std::mem::take(&mut self.live)
    }

    /// A run goes on from the frame whose headers are `headers` (the first [`HEADERS_LEN`]
    /// bytes of a frame that passed every check of the receive path behind an IPv4 header
    /// without options), its segment parsed into `repr`, which connection `handle` was just
    /// given: when the segment has an ACK, no options, SYN, RST or FIN, and a payload
    /// (`payload_len` bytes). Anything else starts no run.
    pub(super) fn start(
        &mut self,
        headers: &[u8; HEADERS_LEN],
        repr: &TcpRepr,
        payload_len: usize,
        handle: SocketHandle,
    ) {
        let Some(ack) = repr.ack_number else { return };
        let plain = usize::from(headers[LINK_IP_LEN + offs::DATA_OFF] >> 4) * 4 == HEADER_LEN
            && !repr.flags.intersects(TcpFlags::SYN | TcpFlags::RST | TcpFlags::FIN);
        if !plain || payload_len == 0 {
            return;
        }
        debug_assert!(self.owed.is_none(), "a run's owed bookkeeping is done before another starts");
        *self = RxFlow {
            live: true,
            headers: *headers,
            next_seq: repr.seq_number + payload_len,
            handle,
            ack,
            window_len: repr.window_len,
            owed: None,
        };
    }

    /// What the received `frame` is when it continues the run that [`take`](Self::take) just
    /// ended: its Ethernet and IPv4 headers repeat the run's but for the IPv4 total length
    /// (which must hold a TCP header and a payload, within the frame), identification and
    /// checksum; its TCP header repeats the run's but for the sequence number, which is where
    /// the run's payload ended, the PSH flag and the checksum. The caller checks both checksums.
    #[inline(always)]
    pub(super) fn continued_by(&self, frame: &[u8]) -> Option<Continuation> {
        let headers: &[u8; HEADERS_LEN] = frame.first_chunk()?;
        let total_len =
            usize::from(u16::from_be_bytes([headers[TOTAL_LEN.start], headers[TOTAL_LEN.start + 1]]));
        let segment_end = ETH_LEN + total_len;
        let run = &self.headers;
        let continues = segment_end > HEADERS_LEN
            && segment_end <= frame.len()
            && same::<{ LINK_TO_TOS.start }, { LINK_TO_TOS.end }>(headers, run)
            && same::<{ FLAGS_TO_PROTOCOL.start }, { FLAGS_TO_PROTOCOL.end }>(headers, run)
            && same::<{ ADDRESSES_AND_PORTS.start }, { ADDRESSES_AND_PORTS.end }>(headers, run)
            && headers[SEQ] == self.next_seq.0.to_be_bytes()
            && same::<{ ACK_AND_DATA_OFF.start }, { ACK_AND_DATA_OFF.end }>(headers, run)
            && (headers[FLAGS] ^ run[FLAGS]) & !TcpFlags::PSH.bits() == 0
            && same::<{ WINDOW.start }, { WINDOW.end }>(headers, run)
            && same::<{ URGENT.start }, { URGENT.end }>(headers, run);
        let src = &self.headers[SRC_ADDR];
        continues.then_some(Continuation {
            handle: self.handle,
            src: Ipv4Addr::new(src[0], src[1], src[2], src[3]),
            segment_end,
            seq: self.next_seq,
            ack: self.ack,
            window_len: self.window_len,
            push: headers[FLAGS] & TcpFlags::PSH.bits() != 0,
        })
    }

    /// The run goes on past a continuation of `payload_len` bytes.
    pub(super) fn extend(&mut self, payload_len: usize) {
        self.next_seq += payload_len;
        self.live = true;
    }

    /// The continuation at `seq` was taken the short way: the run's bookkeeping is owed.
    pub(super) fn owe(&mut self, seq: SeqNumber) {
        self.owed = Some(seq);
    }

    /// The bookkeeping owed, if any, now to be done (nothing is owed after this).
    pub(super) fn take_owed(&mut self) -> Option<OwedRun> {
        let last_seq = self.owed.take()?;
        Some(OwedRun { handle: self.handle, last_seq, window_len: self.window_len })
    }
}

/// Whether `a` and `b` hold the same bytes at `START..END`: bounds known when compiled, so the
/// comparison is a few loads, not a call to `memcmp`, whether or not its caller is inlined
/// (a comparison over a range passed at run time was one, where the caller was not).
#[inline(always)]
fn same<const START: usize, const END: usize>(a: &[u8; HEADERS_LEN], b: &[u8; HEADERS_LEN]) -> bool {
    a[START..END] == b[START..END]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        ChecksumCapabilities, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol,
        Ipv4Packet, Ipv4Repr, TcpPacket, TcpSack,
    };

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

    /// An Ethernet frame from A to B carrying `repr` and `payload`.
    fn frame(repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
        let caps = ChecksumCapabilities::none();
        let tcp_len = repr.header_len() + payload.len();
        let mut bytes = vec![0u8; LINK_IP_LEN + tcp_len];
        EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut bytes[..]));
        Ipv4Repr { src_addr: A, dst_addr: B, protocol: IpProtocol::Tcp, payload_len: tcp_len, ttl: 64 }
            .emit(&mut Ipv4Packet::new_unchecked(&mut bytes[ETH_LEN..]), &caps);
        bytes[LINK_IP_LEN + repr.header_len()..].copy_from_slice(payload);
        repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[LINK_IP_LEN..]), A, B, payload.len(), &caps);
        bytes
    }

    fn run_after(first: &[u8], payload_len: usize) -> RxFlow {
        let packet = TcpPacket::new_checked(&first[LINK_IP_LEN..]).expect("whole header");
        let repr = TcpRepr::parse(&packet, A, B, &ChecksumCapabilities::none()).expect("valid");
        let headers: &[u8; HEADERS_LEN] = first.first_chunk().expect("54 bytes");
        let mut flow = RxFlow::default();
        flow.start(headers, &repr, payload_len, SocketHandle::for_test(3));
        flow
    }

    #[test]
    fn the_next_segment_continues_with_the_first_ones_fields() {
        let flow = run_after(&frame(&repr(1000, TcpFlags::PSH), &[7; 64]), 64);
        let next = frame(&repr(1064, TcpFlags::PSH), &[9; 100]);
        let c = flow.continued_by(&next).expect("continues");
        assert_eq!(
            (c.handle, c.src, c.segment_end, c.seq, c.ack, c.window_len, c.push),
            (SocketHandle::for_test(3), A, next.len(), SeqNumber(1064), SeqNumber(77), 512, true)
        );
    }

    #[test]
    fn a_run_goes_on_across_writes_each_continuation_with_its_own_psh() {
        // A write's last segment carries PSH; the next write's first does not.
        let flow = run_after(&frame(&repr(1000, TcpFlags::empty()), &[7; 64]), 64);
        let end_of_write = frame(&repr(1064, TcpFlags::PSH), &[9; 100]);
        assert_eq!(flow.continued_by(&end_of_write).map(|c| c.push), Some(true));
        let flow = run_after(&end_of_write, 100);
        let next_write = frame(&repr(1164, TcpFlags::empty()), &[9; 100]);
        assert_eq!(flow.continued_by(&next_write).map(|c| c.push), Some(false));
    }

    #[test]
    fn any_other_header_byte_or_sequence_number_ends_the_run() {
        let flow = run_after(&frame(&repr(1000, TcpFlags::empty()), &[7; 64]), 64);
        let next = frame(&repr(1064, TcpFlags::empty()), &[9; 10]);
        assert!(flow.continued_by(&next).is_some());
        // What a continuation may change: the IPv4 total length (checked apart below),
        // identification and checksum, the TCP sequence number (the run's next one) and checksum.
        let free = [TOTAL_LEN, ETH_LEN + 4..ETH_LEN + 6, ETH_LEN + 10..ETH_LEN + 12];
        let tcp_checksum = LINK_IP_LEN + offs::CHECKSUM..LINK_IP_LEN + offs::URGENT;
        for byte in (0..LINK_IP_LEN + HEADER_LEN).filter(|b| !free.iter().any(|r| r.contains(b))) {
            // The flags byte: every bit but PSH (which the test above covers).
            let bits: &[u8] =
                if byte == FLAGS { &[0x01, 0x02, 0x04, 0x10, 0x20, 0x40, 0x80] } else { &[0x10] };
            for &bit in bits {
                let mut changed = next.clone();
                changed[byte] ^= bit;
                let continues = flow.continued_by(&changed).is_some();
                assert_eq!(continues, tcp_checksum.contains(&byte), "byte {byte} bit {bit:#x} changed");
            }
        }
        for byte in [ETH_LEN + 4, ETH_LEN + 5, ETH_LEN + 10, ETH_LEN + 11] {
            let mut changed = next.clone();
            changed[byte] ^= 0x10;
            assert!(flow.continued_by(&changed).is_some(), "the caller checks the IPv4 checksum");
        }
        assert!(flow.continued_by(&next[..LINK_IP_LEN + HEADER_LEN]).is_none(), "no payload");
    }

    #[test]
    fn the_total_length_bounds_the_segment_within_the_frame() {
        let flow = run_after(&frame(&repr(1000, TcpFlags::empty()), &[7; 64]), 64);
        let next = frame(&repr(1064, TcpFlags::empty()), &[9; 10]);
        let with_total = |total: u16, pad: usize| {
            let mut f = next.clone();
            f[TOTAL_LEN].copy_from_slice(&total.to_be_bytes());
            f.resize(f.len() + pad, 0);
            flow.continued_by(&f).map(|c| c.segment_end)
        };
        let total = (next.len() - ETH_LEN) as u16;
        assert_eq!(with_total(total, 0), Some(next.len()));
        assert_eq!(with_total(total, 16), Some(next.len()), "Ethernet padding left out");
        assert_eq!(with_total(total - 4, 0), Some(next.len() - 4), "a shorter segment");
        assert_eq!(with_total(total + 1, 0), None, "beyond the frame");
        assert_eq!(with_total((IP_LEN + HEADER_LEN) as u16, 0), None, "no payload");
        assert_eq!(with_total(8, 0), None, "shorter than the headers");
    }

    #[test]
    fn the_bookkeeping_owed_is_the_last_short_segments_and_is_taken_once() {
        let mut flow = run_after(&frame(&repr(1000, TcpFlags::empty()), &[7; 64]), 64);
        assert_eq!(flow.take_owed(), None, "nothing taken the short way yet");
        flow.owe(SeqNumber(1064));
        flow.extend(64);
        flow.owe(SeqNumber(1128));
        flow.extend(64);
        assert!(flow.take(), "owing does not end the run");
        let owed = OwedRun { handle: SocketHandle::for_test(3), last_seq: SeqNumber(1128), window_len: 512 };
        assert_eq!(flow.take_owed(), Some(owed));
        assert_eq!(flow.take_owed(), None, "taken once");
    }

    #[test]
    fn only_plain_data_segments_start_a_run() {
        for flags in [TcpFlags::SYN, TcpFlags::FIN, TcpFlags::RST] {
            let bytes = frame(&repr(1000, flags), &[1; 8]);
            assert!(!run_after(&bytes, 8).live, "{flags:?}");
        }
        let mut no_ack = repr(1000, TcpFlags::empty());
        no_ack.ack_number = None;
        assert!(!run_after(&frame(&no_ack, &[1; 8]), 8).live, "no ACK");
        let mut with_mss = repr(1000, TcpFlags::empty());
        with_mss.max_seg_size = Some(1460);
        assert!(!run_after(&frame(&with_mss, &[1; 8]), 8).live, "options");
        assert!(!run_after(&frame(&repr(1000, TcpFlags::empty()), &[]), 0).live, "no payload");
        let mut flow = run_after(&frame(&repr(1000, TcpFlags::empty()), &[1; 8]), 8);
        assert!(flow.take() && !flow.take(), "taken once");
    }
}
