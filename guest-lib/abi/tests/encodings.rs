//! Known encodings: the hex examples in `docs/protocol.md` are exactly what the code emits and
//! parses, and a few messages are also spelled out here field by field, independent of the code.

mod common;

use common::*;
use slimtcp_abi::{
    layout, AbiError, Errno, Op, Request, RequestBody, RequestHeader, RxKind, RxMessage, SocketId, Version,
    MAGIC, VIRTIO_NET_HDR_LEN,
};

const SPEC: &str = include_str!("../../../docs/protocol.md");

/// Reads the hex dump titled `name` back out of the specification.
fn spec_bytes(name: &str) -> Vec<u8> {
    let title = format!("\n{name} (");
    let start = SPEC.find(&title).unwrap_or_else(|| panic!("docs/protocol.md has no example {name:?}"));
    SPEC[start + 1..]
        .lines()
        .skip(1)
        .take_while(|l| l.len() > 6 && l.as_bytes()[4] == b' ')
        .flat_map(|l| {
            l[6..].split(' ').map(|h| u8::from_str_radix(h, 16).expect("hex byte")).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_request_example_in_the_spec_is_what_the_code_emits_and_parses() {
    for (name, req) in example_requests() {
        let frame = request_frame(&req);
        assert!(
            SPEC.contains(&render(name, &frame)),
            "docs/protocol.md example {name} differs:\n{}",
            render(name, &frame)
        );
        assert_eq!(Request::parse(&spec_bytes(name)), Ok(req), "{name}");
    }
}

#[test]
fn every_rx_example_in_the_spec_is_what_the_code_emits_and_parses() {
    for (name, msg) in example_rx() {
        let frame = rx_frame(&msg);
        assert!(
            SPEC.contains(&render(name, &frame)),
            "docs/protocol.md example {name} differs:\n{}",
            render(name, &frame)
        );
        assert_eq!(RxMessage::parse(&spec_bytes(name)), Ok(msg), "{name}");
    }
}

#[test]
fn the_examples_cover_every_op_and_every_kind() {
    let ops: Vec<Op> = example_requests().iter().map(|(_, r)| r.op()).collect();
    for op in Op::ALL {
        assert!(ops.contains(op), "no example for {op:?}");
    }
    let kinds: Vec<RxKind> = example_rx().iter().map(|(_, m)| m.kind()).collect();
    for kind in RxKind::ALL {
        assert!(kinds.contains(kind), "no example for {kind:?}");
    }
}

/// Run with `--ignored --nocapture` to print the examples for the specification.
#[test]
#[ignore = "prints the examples for docs/protocol.md; not a check"]
fn print_examples() {
    for (name, req) in example_requests() {
        println!("{}", render(name, &request_frame(&req)));
    }
    for (name, msg) in example_rx() {
        println!("{}", render(name, &rx_frame(&msg)));
    }
}

#[test]
fn a_hello_request_spelled_out_byte_by_byte() {
    let mut expected = vec![0u8; 12]; // virtio_net_hdr_mrg_rxbuf, zeros on transmit
    expected.extend_from_slice(b"STCP"); // magic
    expected.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]); // op hello, flags, reserved
    expected.extend_from_slice(&0x0807_0605_0403_0201u64.to_le_bytes()); // cookie
    expected.extend_from_slice(&0u32.to_le_bytes()); // socket: none
    expected.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]); // major 1, minor 0
    expected.extend_from_slice(&[0; 4]); // reserved
    let hello =
        Request::new(COOKIE, SocketId::NONE, RequestBody::Hello { version: Version { major: 1, minor: 0 } });
    assert_eq!(request_frame(&hello), expected);
    assert_eq!(Request::parse(&expected), Ok(hello));
}

#[test]
fn a_data_event_spelled_out_byte_by_byte() {
    let mut expected = vec![0u8; 10];
    expected.extend_from_slice(&[0x01, 0x00]); // num_buffers = 1
    expected.extend_from_slice(b"STCP");
    expected.extend_from_slice(&[0x10, 0x00, 0x00, 0x00]); // kind data, flags, reserved
    expected.extend_from_slice(&[0; 8]); // cookie: events have none
    expected.extend_from_slice(&0x2au32.to_le_bytes()); // socket
    expected.extend_from_slice(&5u32.to_le_bytes()); // len
    expected.extend_from_slice(&[0; 4]); // reserved
    expected.extend_from_slice(b"hello"); // payload at offset 40
    let data = RxMessage::Data { socket: SOCK, len: 5 };
    assert_eq!(rx_frame(&data), expected);
    assert_eq!(RxMessage::parse(&expected), Ok(data));
    assert_eq!(&expected[data.payload_range()], b"hello");
    assert_eq!(data.payload_range().start, 40, "payload 8-byte aligned in an aligned buffer");
    // The header alone, for a writer that places the payload itself: needs no room for it.
    let big = RxMessage::Data { socket: SOCK, len: 64 << 20 };
    let mut header = [0u8; 40];
    assert_eq!(big.emit_header(&mut header), Ok(40));
    assert_eq!(header[..32], expected[..32], "same bytes up to the length field");
    assert_eq!(header[32..], [0, 0, 0, 4, 0, 0, 0, 0], "64 MiB, reserved");
    assert!(big.emit(&mut header).is_err(), "emit insists on room for the payload");
    assert!(big.emit_header(&mut header[..39]).is_err());
}

#[test]
fn header_sizes_and_offsets_are_the_specified_ones() {
    assert_eq!(VIRTIO_NET_HDR_LEN, 12);
    assert_eq!(layout::request_header::SIZE, 20);
    assert_eq!(layout::rx_header::SIZE, 20);
    assert_eq!(layout::request_header::COOKIE, 8..16);
    assert_eq!(layout::hello_done::SIZE, 48);
    assert_eq!(&MAGIC, b"STCP");
    // Every body is a multiple of 8 bytes, so payloads start 8-byte aligned (32 + body).
    for op in Op::ALL {
        assert_eq!(op.body_len() % 8, 0, "{op:?}");
    }
    for kind in RxKind::ALL {
        assert_eq!(kind.body_len() % 8, 0, "{kind:?}");
    }
}

#[test]
fn errno_values_and_names_are_linux_ones() {
    let linux = [
        ("EPERM", 1),
        ("EBADF", 9),
        ("EAGAIN", 11),
        ("EFAULT", 14),
        ("EINVAL", 22),
        ("EMFILE", 24),
        ("EPIPE", 32),
        ("EPROTO", 71),
        ("EMSGSIZE", 90),
        ("ENOPROTOOPT", 92),
        ("EPROTONOSUPPORT", 93),
        ("EOPNOTSUPP", 95),
        ("EAFNOSUPPORT", 97),
        ("EADDRINUSE", 98),
        ("EADDRNOTAVAIL", 99),
        ("ENETUNREACH", 101),
        ("ECONNABORTED", 103),
        ("ECONNRESET", 104),
        ("ENOBUFS", 105),
        ("EISCONN", 106),
        ("ENOTCONN", 107),
        ("ETIMEDOUT", 110),
        ("ECONNREFUSED", 111),
        ("EHOSTUNREACH", 113),
        ("EALREADY", 114),
    ];
    assert_eq!(Errno::ALL.len(), linux.len());
    for (e, (name, value)) in Errno::ALL.iter().zip(linux) {
        assert_eq!((e.name(), e.errno()), (name, value));
        assert_eq!(Errno::from_errno(value), Some(*e));
        assert!(SPEC.contains(&format!("| {value} | {name} |")), "the spec's errno table lacks {name}");
    }
    assert_eq!(Errno::from_errno(0), None);
    assert_eq!(Errno::ECONNREFUSED.to_string(), "ECONNREFUSED (111)");
}

#[test]
fn parse_errors_map_to_the_errno_of_the_error_completion() {
    let mut frame = request_frame(&example_requests()[3].1);
    frame[VIRTIO_NET_HDR_LEN + 4] = 0x7f; // unknown op
    let err = Request::parse(&frame).expect_err("unknown op");
    assert_eq!(err, AbiError::UnknownOp(0x7f));
    assert_eq!(err.errno(), Errno::EOPNOTSUPP);
    // The header is still readable, so the host can answer with the cookie.
    let hdr = RequestHeader::parse(&frame).expect("header");
    assert_eq!((hdr.op, hdr.cookie, hdr.socket), (0x7f, COOKIE, SOCK));
    assert_eq!(AbiError::UnknownOption(99).errno(), Errno::ENOPROTOOPT);
    assert_eq!(AbiError::ReservedNonZero { offset: 18 }.errno(), Errno::EINVAL);
}

#[test]
fn version_negotiation_takes_the_smaller_minor_of_the_same_major() {
    let host = Version { major: 1, minor: 3 };
    assert_eq!(host.negotiate(Version { major: 1, minor: 0 }), Some(Version { major: 1, minor: 0 }));
    assert_eq!(host.negotiate(Version { major: 1, minor: 9 }), Some(Version { major: 1, minor: 3 }));
    assert_eq!(host.negotiate(Version { major: 2, minor: 0 }), None);
    assert_eq!(
        Version::CURRENT,
        Version { major: 1, minor: 2 },
        "1.1: the keepalive and user-timeout options; 1.2: COPY sends and the acked event"
    );
}
