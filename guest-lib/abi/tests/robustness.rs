//! Total parsing: no input panics a parser; truncated, over-long and non-canonical frames are
//! rejected; reserved bytes are checked; every valid message round-trips.

mod common;

use common::*;
use slimtcp_abi::{AbiError, Request, RequestHeader, RxMessage, VIRTIO_NET_HDR_LEN};

const RANDOM_BUFFERS: usize = 100_000;

#[test]
fn random_valid_requests_round_trip() {
    let mut rng = Rng::new(0x5eed_0001);
    for _ in 0..20_000 {
        let req = random_request(&mut rng);
        let frame = request_frame(&req);
        assert_eq!(Request::parse(&frame), Ok(req));
        // Payload bytes after the fixed part belong to the caller.
        let mut longer = frame.clone();
        longer.extend_from_slice(&[0xff; 7]);
        assert_eq!(Request::parse(&longer), Ok(req));
        assert_eq!(req.check_chain_len(req.wire_len() + req.payload_len()), Ok(()));
    }
}

#[test]
fn random_valid_rx_messages_round_trip() {
    let mut rng = Rng::new(0x5eed_0002);
    for _ in 0..20_000 {
        let msg = random_rx(&mut rng);
        assert_eq!(RxMessage::parse(&rx_frame(&msg)), Ok(msg));
    }
}

#[test]
fn every_truncation_of_every_request_is_rejected() {
    for (name, req) in example_requests() {
        let frame = request_frame(&req);
        for len in 0..frame.len() {
            assert_eq!(
                Request::parse(&frame[..len]),
                Err(AbiError::Truncated { needed: if len < 32 { 32 } else { frame.len() }, got: len }),
                "{name} cut to {len}"
            );
        }
    }
}

#[test]
fn every_truncation_and_extension_of_every_rx_message_is_rejected() {
    for (name, msg) in example_rx() {
        let frame = rx_frame(&msg);
        for len in 0..frame.len() {
            assert!(RxMessage::parse(&frame[..len]).is_err(), "{name} cut to {len}");
        }
        let mut longer = frame.clone();
        longer.push(0);
        assert_eq!(
            RxMessage::parse(&longer),
            Err(AbiError::LengthMismatch { expected: frame.len(), got: frame.len() + 1 }),
            "{name}"
        );
    }
}

#[test]
fn a_send_chain_must_hold_exactly_the_declared_payload() {
    let send = example_requests().into_iter().find(|(n, _)| *n == "send").expect("send example").1;
    assert_eq!(send.chain_len(), 40 + 1460);
    assert_eq!(send.check_chain_len(40 + 1460), Ok(()));
    assert_eq!(send.check_chain_len(40 + 1459), Err(AbiError::LengthMismatch { expected: 1500, got: 1499 }));
    assert_eq!(send.check_chain_len(40 + 1461), Err(AbiError::LengthMismatch { expected: 1500, got: 1501 }));
}

#[test]
fn emit_reports_a_buffer_too_small() {
    for (_, req) in example_requests() {
        let mut buf = vec![0u8; req.wire_len() - 1];
        assert_eq!(
            req.emit(&mut buf),
            Err(AbiError::BufferTooSmall { needed: req.wire_len(), got: buf.len() })
        );
    }
    for (_, msg) in example_rx() {
        // Room for the header but not the payload is too small as well.
        let mut buf = vec![0u8; msg.total_len() - 1];
        assert_eq!(
            msg.emit(&mut buf),
            Err(AbiError::BufferTooSmall { needed: msg.total_len(), got: buf.len() })
        );
    }
}

/// Every request frame a parser accepts is canonical: emitting the parsed request gives the same
/// bytes (the virtio-net header, which the device ignores, aside). So no reserved byte, undefined
/// flag bit or alternative encoding slips through.
fn assert_canonical_request(frame: &[u8]) {
    if let Ok(req) = Request::parse(frame) {
        let again = request_frame(&req);
        assert_eq!(&again[VIRTIO_NET_HDR_LEN..], &frame[VIRTIO_NET_HDR_LEN..req.wire_len()], "{req:?}");
    }
}

fn assert_canonical_rx(frame: &[u8]) {
    if let Ok(msg) = RxMessage::parse(frame) {
        let mut again = frame.to_vec();
        assert_eq!(msg.emit(&mut again), Ok(msg.wire_len()));
        assert_eq!(again, frame, "{msg:?}");
    }
}

#[test]
fn random_buffers_never_panic_a_parser() {
    let mut rng = Rng::new(0x5eed_0003);
    let mut buf = [0u8; 160];
    for i in 0..RANDOM_BUFFERS {
        let len = rng.below(buf.len() as u64 + 1) as usize;
        rng.fill_bytes(&mut buf[..len]);
        // Half of them get a valid magic (and rx header) so the parsers get past the first check.
        if i % 2 == 0 && len >= 16 {
            buf[12..16].copy_from_slice(b"STCP");
            buf[..12].fill(0);
            buf[10] = 1;
        }
        let frame = &buf[..len];
        let _ = RequestHeader::parse(frame);
        assert_canonical_request(frame);
        assert_canonical_rx(frame);
    }
}

#[test]
fn single_byte_changes_are_rejected_or_change_the_message() {
    let mut rng = Rng::new(0x5eed_0004);
    for (name, req) in example_requests() {
        let frame = request_frame(&req);
        for at in VIRTIO_NET_HDR_LEN..frame.len() {
            for _ in 0..16 {
                let mut bad = frame.clone();
                bad[at] ^= (rng.below(255) + 1) as u8;
                if let Ok(other) = Request::parse(&bad) {
                    assert_ne!(other, req, "{name}: byte {at} ignored");
                }
                assert_canonical_request(&bad);
            }
        }
    }
    for (name, msg) in example_rx() {
        let frame = rx_frame(&msg);
        for at in 0..msg.wire_len() {
            for _ in 0..16 {
                let mut bad = frame.clone();
                bad[at] ^= (rng.below(255) + 1) as u8;
                if let Ok(other) = RxMessage::parse(&bad) {
                    assert_ne!(other, msg, "{name}: byte {at} ignored");
                }
                assert_canonical_rx(&bad);
            }
        }
    }
}

#[test]
fn mutated_valid_messages_never_panic_a_parser() {
    let mut rng = Rng::new(0x5eed_0005);
    for _ in 0..RANDOM_BUFFERS {
        let mut frame = if rng.below(2) == 0 {
            request_frame(&random_request(&mut rng))
        } else {
            let msg = random_rx(&mut rng);
            let mut f = vec![0u8; msg.total_len().min(200)];
            let _ = msg.emit(&mut f);
            f
        };
        for _ in 0..=rng.below(3) {
            let at = rng.below(frame.len() as u64) as usize;
            frame[at] = rng.next_u64() as u8;
        }
        let cut = frame.len() - rng.below(4).min(frame.len() as u64) as usize;
        let frame = &frame[..cut];
        let _ = RequestHeader::parse(frame);
        assert_canonical_request(frame);
        assert_canonical_rx(frame);
    }
}

#[test]
fn the_virtio_header_is_ignored_on_transmit_and_checked_on_receive() {
    let (_, req) = example_requests().remove(0);
    let mut frame = request_frame(&req);
    frame[..VIRTIO_NET_HDR_LEN].fill(0xa5);
    assert_eq!(Request::parse(&frame), Ok(req));

    let (_, msg) = example_rx().remove(0);
    let good = rx_frame(&msg);
    for at in 0..VIRTIO_NET_HDR_LEN {
        let mut bad = good.clone();
        bad[at] ^= 0x80;
        assert_eq!(RxMessage::parse(&bad), Err(AbiError::BadVirtioHeader), "byte {at}");
    }
}

#[test]
fn reserved_fields_are_checked_and_reported_at_their_offset() {
    let named = |n: &str| example_requests().into_iter().find(|(name, _)| *name == n).expect("example").1;
    let cases: &[(&str, usize)] = &[
        ("listen", 12 + 5),  // undefined header flag bit
        ("listen", 12 + 6),  // header reserved
        ("listen", 12 + 7),  // header reserved
        ("hello", 32 + 4),   // hello reserved
        ("socket", 32 + 7),  // socket reserved
        ("bind", 32 + 6),    // sockaddr reserved
        ("send", 32 + 4),    // send reserved
        ("send_to", 32 + 6), // send_to reserved
        ("send_to", 32 + 12),
        ("shutdown", 32 + 1),
        ("close", 32), // undefined close flag bit (bit 0 is abort: flip another)
        ("close", 32 + 4),
        ("setsockopt", 32 + 4),
        ("getsockopt", 32 + 4),
        ("credit", 32 + 4),
    ];
    for &(name, offset) in cases {
        let mut frame = request_frame(&named(name));
        frame[offset] |= 0x40;
        assert_eq!(Request::parse(&frame), Err(AbiError::ReservedNonZero { offset }), "{name} byte {offset}");
    }
    let rx = |n: &str| example_rx().into_iter().find(|(name, _)| *name == n).expect("example").1;
    let cases: &[(&str, usize)] = &[
        ("data", 12 + 5), // rx header flags
        ("data", 12 + 6), // rx header reserved
        ("data", 12 + 8), // events carry no cookie
        ("data", 32 + 4), // data reserved
        ("complete_socket", 32 + 1),
        ("complete_socket", 32 + 22),
        ("complete_error", 32 + 8),  // value must be zero on error
        ("complete_error", 32 + 16), // address must be zero on error
        ("hello_done", 32 + 8),
        ("hello_done", 32 + 17),
        ("hello_done_refused", 32 + 12), // no info on error
        ("hello_done_refused", 32 + 47),
        ("datagram", 32 + 6), // undefined datagram flag bit (bit 0 is truncated: flip another)
        ("writable", 32 + 4),
        ("acked", 32 + 4),
        ("reset", 32 + 4),
        ("error", 32 + 4),
    ];
    for &(name, offset) in cases {
        let mut frame = rx_frame(&rx(name));
        frame[offset] |= 0x40;
        assert_eq!(
            RxMessage::parse(&frame),
            Err(AbiError::ReservedNonZero { offset }),
            "{name} byte {offset}"
        );
    }
}

#[test]
fn bad_enum_values_and_forbidden_combinations_are_rejected() {
    use slimtcp_abi::{Op, RequestFlags, SocketId};
    let named = |n: &str| example_requests().into_iter().find(|(name, _)| *name == n).expect("example").1;
    let set = |n: &str, at: usize, v: u8| {
        let mut f = request_frame(&named(n));
        f[at] = v;
        Request::parse(&f)
    };
    assert_eq!(set("socket", 32, 3), Err(AbiError::BadValue { field: "kind", value: 3 }));
    assert_eq!(set("socket", 32, 0), Err(AbiError::BadValue { field: "kind", value: 0 }));
    assert_eq!(set("shutdown", 32, 3), Err(AbiError::BadValue { field: "how", value: 3 }));
    assert_eq!(set("setsockopt", 32, 0), Err(AbiError::UnknownOption(0)));
    assert_eq!(set("getsockopt", 32, 12), Err(AbiError::UnknownOption(12)), "1.1 defines 1..=11");
    assert_eq!(
        set("hello", 17, RequestFlags::QUIET.bits()),
        Err(AbiError::BadValue { field: "flags", value: 1 })
    );
    let copy = RequestFlags::COPY.bits();
    assert_eq!(set("credit", 17, copy), Err(AbiError::BadValue { field: "flags", value: 2 }), "send only");
    assert_eq!(set("send_to", 17, copy), Err(AbiError::BadValue { field: "flags", value: 2 }), "stream only");
    assert!(set("send", 17, copy | RequestFlags::QUIET.bits()).is_ok_and(|r| r.flags.is_copy()));
    assert_eq!(set("send", 17, 0x04), Err(AbiError::ReservedNonZero { offset: 17 }), "bits 2..7 reserved");
    assert_eq!(set("hello", 28, 9), Err(AbiError::BadValue { field: "socket", value: 9 }));
    assert_eq!(set("listen", 28, 0), Err(AbiError::BadValue { field: "socket", value: 0 }));
    assert_eq!(set("listen", 12, b'X'), Err(AbiError::BadMagic(*b"XTCP")));
    assert_eq!(set("listen", 16, 0), Err(AbiError::UnknownOp(0)));
    // Zero-length send, credit of 0, connect or send_to to port 0.
    let zero = |n: &str, at: std::ops::Range<usize>| {
        let mut f = request_frame(&named(n));
        f[at].fill(0);
        Request::parse(&f)
    };
    assert_eq!(zero("send", 32..36), Err(AbiError::BadValue { field: "len", value: 0 }));
    assert_eq!(zero("credit", 32..36), Err(AbiError::BadValue { field: "bytes", value: 0 }));
    assert_eq!(zero("connect", 36..38), Err(AbiError::BadValue { field: "port", value: 0 }));
    assert_eq!(zero("send_to", 36..38), Err(AbiError::BadValue { field: "port", value: 0 }));
    assert!(Op::from_code(0x0d).is_none());

    let rx = |n: &str| rx_frame(&example_rx().into_iter().find(|(name, _)| *name == n).expect("example").1);
    let mut f = rx("reset");
    f[32..36].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(RxMessage::parse(&f), Err(AbiError::BadValue { field: "errno", value: 0 }));
    f[32..36].copy_from_slice(&12345u32.to_le_bytes());
    assert_eq!(RxMessage::parse(&f), Err(AbiError::BadValue { field: "errno", value: 12345 }));
    let mut f = rx("data");
    f[16] = 0x03;
    assert_eq!(RxMessage::parse(&f), Err(AbiError::UnknownKind(3)));
    let mut f = rx("data");
    f[28..32].fill(0);
    assert_eq!(RxMessage::parse(&f), Err(AbiError::BadValue { field: "socket", value: 0 }));
    let mut f = rx("hello_done");
    f[32 + 16] = 33;
    assert_eq!(RxMessage::parse(&f), Err(AbiError::BadValue { field: "prefix_len", value: 33 }));
    let mut f = rx("accepted");
    f[32..36].fill(0);
    assert_eq!(RxMessage::parse(&f), Err(AbiError::BadValue { field: "new_socket", value: 0 }));
    // A truncated flag must agree with the lengths.
    let mut f = rx("datagram");
    f[32 + 6] = 1;
    assert_eq!(RxMessage::parse(&f), Err(AbiError::BadValue { field: "orig_len", value: 4 }));
    let _ = SocketId::NONE;
}
