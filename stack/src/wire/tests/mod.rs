//! Shared test helpers and cross-format robustness tests.

#![allow(clippy::unwrap_used)]

use super::*;

/// Decodes whitespace-separated hex (any grouping) into bytes. Panics on bad input (tests only).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).expect("hex digit"))
        .collect()
}

/// A tiny deterministic xorshift64* PRNG for tests.
pub(crate) struct XorShift(u64);

impl XorShift {
    /// Seeds the generator (a zero seed is replaced by a constant).
    pub(crate) fn new(seed: u64) -> Self {
        XorShift(if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed })
    }

    /// Next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish value in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fills a buffer with random bytes.
    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

const ROUNDS: usize = 20_000;

/// Random buffers, biased towards plausible headers so deeper code paths are reached. Every
/// parser must return (Ok or Err) without panicking, and accessors after `new_checked` must not
/// panic either.
fn fuzz(
    seed: u64,
    mut shape: impl FnMut(&mut XorShift, &mut Vec<u8>),
    mut check: impl FnMut(&[u8]),
) {
    let mut rng = XorShift::new(seed);
    let mut buf = Vec::with_capacity(128);
    for _ in 0..ROUNDS {
        let len = rng.below(96);
        buf.resize(len, 0);
        rng.fill(&mut buf);
        if rng.below(4) != 0 {
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
    let caps_rx = ChecksumCapabilities {
        ipv4: ChecksumOffload { rx: true, tx: false },
        ..Default::default()
    };
    fuzz(
        2,
        |rng, b| {
            if b.len() >= 20 {
                b[0] = 0x40 | (b[0] & 0x0f);
                let total = rng.below(b.len() + 8) as u16;
                b[2..4].copy_from_slice(&total.to_be_bytes());
                if rng.below(2) == 0 {
                    b[6] &= 0x40;
                    b[7] = 0;
                }
                if rng.below(2) == 0 {
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
            let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(b), &ChecksumCapabilities::none());
        },
    );
}

#[test]
fn random_bytes_never_panic_tcp() {
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let dst = Ipv4Addr::new(10, 0, 0, 2);
    let caps_rx =
        ChecksumCapabilities { tcp: ChecksumOffload { rx: true, tx: false }, ..Default::default() };
    fuzz(
        3,
        |rng, b| {
            if b.len() >= 20 {
                let off = 5 + rng.below(11);
                b[12] = (off as u8) << 4;
                // Sprinkle plausible option kinds and lengths.
                for i in 20..b.len().min(off * 4) {
                    if rng.below(3) == 0 {
                        b[i] = [0u8, 1, 2, 3, 4, 5, 8][rng.below(7)];
                    } else if rng.below(2) == 0 {
                        b[i] = rng.below(12) as u8;
                    }
                }
                if rng.below(2) == 0 && off * 4 <= b.len() {
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
            let _ = TcpRepr::parse(
                &TcpPacket::new_unchecked(b),
                src,
                dst,
                &ChecksumCapabilities::none(),
            );
            let _ = TcpOptionIter::new(b).count();
        },
    );
}
