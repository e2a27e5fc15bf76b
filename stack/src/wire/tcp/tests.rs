//! Tests of the TCP segment view and its representation (`wire/tcp.rs`).

#![allow(clippy::unwrap_used)]

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
