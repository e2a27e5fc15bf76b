//! Shared test helpers and cross-format robustness tests.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::nic::fault::Rng;

/// Decodes whitespace-separated hex (any grouping) into bytes. Panics on bad input (tests only).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).expect("hex digit"))
        .collect()
}

const ROUNDS: usize = 20_000;

/// Random buffers, biased towards plausible headers so deeper code paths are reached. Every
/// parser must return (Ok or Err) without panicking, and accessors after `new_checked` must not
/// panic either.
fn fuzz(seed: u64, mut shape: impl FnMut(&mut Rng, &mut Vec<u8>), mut check: impl FnMut(&[u8])) {
    let mut rng = Rng::new(seed);
    let mut buf = Vec::with_capacity(128);
    for _ in 0..ROUNDS {
        let len = rng.gen_range(0..96) as usize;
        buf.resize(len, 0);
        rng.fill_bytes(&mut buf);
        if rng.gen_range(0..4) != 0 {
            shape(&mut rng, &mut buf);
        }
        check(&buf);
    }
}

#[test]
fn random_bytes_never_panic_ethernet() {
    fuzz(
        1,
        |_, _| {},
        |b| {
            if let Ok(f) = EthernetFrame::new_checked(b) {
                let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload().len());
                assert!(EthernetRepr::parse(&f).is_ok());
            }
            let _ = EthernetRepr::parse(&EthernetFrame::new_unchecked(b));
        },
    );
}

#[test]
fn random_bytes_never_panic_ipv4() {
    let mut ok = 0;
    let caps_rx =
        ChecksumCapabilities { ipv4: ChecksumOffload { rx: true, tx: false }, ..Default::default() };
    fuzz(
        2,
        |rng, b| {
            if b.len() >= 20 {
                b[0] = 0x40 | (b[0] & 0x0f);
                let total = rng.gen_range(0..(b.len() + 8) as u64) as u16;
                b[2..4].copy_from_slice(&total.to_be_bytes());
                if rng.gen_range(0..2) == 0 {
                    b[6] &= 0x40;
                    b[7] = 0;
                }
                if rng.gen_range(0..2) == 0 {
                    let hl = usize::from(b[0] & 0x0f) * 4;
                    if hl <= b.len() {
                        Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
                    }
                }
            }
        },
        |b| {
            if let Ok(p) = Ipv4Packet::new_checked(b) {
                let _ = (p.version(), p.header_len(), p.total_len(), p.ident(), p.dont_frag());
                let _ = (p.more_frags(), p.frag_offset(), p.ttl(), p.protocol(), p.checksum());
                let _ = (p.src_addr(), p.dst_addr(), p.payload().len(), p.verify_checksum());
                if let Ok(r) = Ipv4Repr::parse(&p, &caps_rx) {
                    assert_eq!(r.payload_len, p.payload().len());
                }
            }
            if Ipv4Repr::parse(&Ipv4Packet::new_unchecked(b), &ChecksumCapabilities::none()).is_ok() {
                ok += 1;
            }
        },
    );
    assert!(ok > 500, "only {} valid packets generated", ok);
}

#[test]
fn random_bytes_never_panic_tcp() {
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let caps_rx = ChecksumCapabilities { tcp: ChecksumOffload { rx: true, tx: false }, ..Default::default() };
    fuzz(
        3,
        |rng, b| {
            if b.len() >= 20 {
                let off = 5 + rng.gen_range(0..11) as usize;
                b[12] = (off as u8) << 4;
                // Sprinkle plausible option kinds and lengths.
                for i in 20..b.len().min(off * 4) {
                    if rng.gen_range(0..3) == 0 {
                        b[i] = [0u8, 1, 2, 3, 4, 5, 8][rng.gen_range(0..7) as usize];
                    } else if rng.gen_range(0..2) == 0 {
                        b[i] = rng.gen_range(0..12) as u8;
                    }
                }
                if rng.gen_range(0..2) == 0 && off * 4 <= b.len() {
                    TcpPacket::new_unchecked(&mut b[..]).fill_checksum(src, dst);
                }
            }
        },
        |b| {
            if let Ok(p) = TcpPacket::new_checked(b) {
                let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number(), p.flags());
                let _ = (p.window_len(), p.checksum(), p.urgent(), p.payload().len());
                let _ = p.option_iter().count();
                for caps in [&caps_rx, &ChecksumCapabilities::none()] {
                    if let Ok(r) = TcpRepr::parse(&p, src, dst, caps) {
                        assert!(!r.flags.contains(TcpFlags::ACK));
                        assert!(r.window_scale.unwrap_or(0) <= 14);
                    }
                }
            }
            let _ = TcpRepr::parse(&TcpPacket::new_unchecked(b), src, dst, &ChecksumCapabilities::none());
            let _ = TcpOptionIter::new(b).count();
        },
    );
}

#[test]
fn random_bytes_never_panic_arp() {
    fuzz(
        4,
        |_, b| {
            if b.len() >= 8 {
                b[..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
            }
        },
        |b| {
            if let Ok(p) = ArpPacket::new_checked(b) {
                let _ = (p.operation(), p.source_hardware_addr(), p.source_protocol_addr());
                let _ = (p.target_hardware_addr(), p.target_protocol_addr());
                let _ = ArpRepr::parse(&p);
            }
            let _ = ArpRepr::parse(&ArpPacket::new_unchecked(b));
        },
    );
}

#[test]
fn random_bytes_never_panic_icmp() {
    let caps = ChecksumCapabilities::none();
    fuzz(
        5,
        |rng, b| {
            if b.len() >= 8 {
                b[0] = [0u8, 8, 3, 11][rng.gen_range(0..4) as usize];
                b[1] = if rng.gen_range(0..4) == 0 { 1 } else { 0 };
                Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
            }
        },
        |b| {
            if let Ok(p) = Icmpv4Packet::new_checked(b) {
                let _ = (p.msg_type(), p.msg_code(), p.echo_ident(), p.echo_seq_no());
                if let Ok(r) = Icmpv4Repr::parse(&p, &caps) {
                    assert_eq!(r.buffer_len(), b.len());
                }
            }
            let p = Icmpv4Packet::new_unchecked(b);
            let _ = Icmpv4Repr::parse(&p, &caps);
        },
    );
}

#[test]
fn random_bytes_never_panic_udp() {
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let caps = ChecksumCapabilities::none();
    fuzz(
        6,
        |rng, b| {
            if b.len() >= 8 {
                let len = rng.gen_range(0..(b.len() + 4) as u64) as u16;
                b[4..6].copy_from_slice(&len.to_be_bytes());
                if rng.gen_range(0..2) == 0 {
                    UdpPacket::new_unchecked(&mut b[..]).fill_checksum(src, dst);
                }
            }
        },
        |b| {
            if let Ok(p) = UdpPacket::new_checked(b) {
                let _ = (p.src_port(), p.dst_port(), p.len(), p.checksum(), p.payload().len());
                let _ = UdpRepr::parse(&p, src, dst, &caps);
            }
            let _ = UdpRepr::parse(&UdpPacket::new_unchecked(b), src, dst, &caps);
        },
    );
}

/// A full Ethernet/IPv4/TCP frame built layer by layer with the `Repr`s and parsed back.
#[test]
fn layered_frame_roundtrip() {
    let caps = ChecksumCapabilities::none();
    let payload = b"GET / HTTP/1.1\r\n\r\n";
    let tcp = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq_number: crate::wire::SeqNumber(1000),
        ack_number: Some(crate::wire::SeqNumber(2000)),
        flags: TcpFlags::PSH,
        window_len: 1024,
        max_seg_size: None,
        window_scale: None,
        sack: crate::wire::TcpSack::NONE,
    };
    let ip = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 1),
        dst_addr: Ipv4Addr::new(10, 0, 0, 2),
        protocol: IpProtocol::Tcp,
        payload_len: tcp.buffer_len(payload.len()),
        ttl: 64,
    };
    let eth = EthernetRepr {
        src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
        ethertype: EtherType::Ipv4,
    };
    let mut frame = vec![0u8; eth.buffer_len() + ip.buffer_len()];
    let mut f = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.emit(&mut f);
    let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
    ip.emit(&mut p, &caps);
    let seg = p.payload_mut();
    seg[tcp.header_len()..].copy_from_slice(payload);
    tcp.emit(&mut TcpPacket::new_unchecked(seg), ip.src_addr, ip.dst_addr, payload.len(), &caps);

    let f = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!(EthernetRepr::parse(&f).unwrap(), eth);
    let p = Ipv4Packet::new_checked(f.payload()).unwrap();
    let ip2 = Ipv4Repr::parse(&p, &caps).unwrap();
    assert_eq!(ip2, ip);
    let t = TcpPacket::new_checked(p.payload()).unwrap();
    assert_eq!(TcpRepr::parse(&t, ip2.src_addr, ip2.dst_addr, &caps).unwrap(), tcp);
    assert_eq!(t.payload(), payload);
}

/// Random valid `TcpRepr`s and `UdpRepr`s survive emit -> parse unchanged.
#[test]
fn random_reprs_roundtrip() {
    let caps = ChecksumCapabilities::none();
    let mut rng = Rng::new(99);
    let mut buf = vec![0u8; 128];
    for _ in 0..2000 {
        let src = Ipv4Addr::from(rng.next_u64() as u32);
        let dst = Ipv4Addr::from(rng.next_u64() as u32);
        let flags =
            [TcpFlags::SYN, TcpFlags::FIN, TcpFlags::RST, TcpFlags::empty()][rng.gen_range(0..4) as usize];
        let repr = TcpRepr {
            src_port: 1 + rng.gen_range(0..65535) as u16,
            dst_port: 1 + rng.gen_range(0..65535) as u16,
            seq_number: crate::wire::SeqNumber(rng.next_u64() as u32),
            ack_number: (rng.gen_range(0..2) == 0).then(|| crate::wire::SeqNumber(rng.next_u64() as u32)),
            flags: if rng.gen_range(0..2) == 0 { flags | TcpFlags::PSH } else { flags },
            window_len: rng.next_u64() as u16,
            max_seg_size: (rng.gen_range(0..2) == 0).then(|| rng.next_u64() as u16),
            window_scale: (rng.gen_range(0..2) == 0).then(|| rng.gen_range(0..15) as u8),
            sack: crate::wire::TcpSack::NONE,
        };
        let payload_len = rng.gen_range(0..64) as usize;
        rng.fill_bytes(&mut buf);
        let len = repr.buffer_len(payload_len);
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), src, dst, payload_len, &caps);
        let p = TcpPacket::new_checked(&buf[..len]).unwrap();
        assert_eq!(TcpRepr::parse(&p, src, dst, &caps), Ok(repr));

        let udp = UdpRepr { src_port: repr.src_port, dst_port: repr.dst_port };
        udp.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), src, dst, payload_len, &caps);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, src, dst, &caps), Ok(udp));
        assert_eq!(p.payload().len(), payload_len);
    }
}

#[test]
fn an_interface_mac_must_be_unicast() {
    let mac = EthernetAddress::parse_unicast("02:00:00:00:00:01").expect("unicast");
    assert_eq!(mac, EthernetAddress([2, 0, 0, 0, 0, 1]));
    assert_eq!(EthernetAddress::parse_unicast("02-00-00-00-00-0a"), Ok(EthernetAddress([2, 0, 0, 0, 0, 10])));
    for group in ["01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00"] {
        let e = EthernetAddress::parse_unicast(group).expect_err(group);
        assert_eq!(e.to_string(), format!("{group} is not a unicast MAC address"));
    }
    let e = EthernetAddress::parse_unicast("02:00:00:00:01").expect_err("five octets");
    assert_eq!(e, UnicastMacError::Parse(ParseMacError("02:00:00:00:01".to_owned())));
    assert_eq!(
        e.to_string(),
        ParseMacError("02:00:00:00:01".to_owned()).to_string(),
        "the parse error as is"
    );
}
