//! A run of segments in one received burst: frames that repeat the first one's headers go to
//! its connection without the whole receive path (`iface/rx_flow.rs`). A frame that differs in
//! any header byte the receive path checks takes that path and meets its checks; one with a bad
//! checksum is dropped either way. Each case takes three genuine data frames of a connection,
//! changes the second, and hands the three to the receiver in one burst; random changes are
//! also checked against the whole receive path (the changed frame in a burst of its own).

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::iface::{Counters, DropReason};
use slimtcp::nic::fault::Rng;
use slimtcp::nic::memwire::LinkConfig;
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::sim::{default_configs, SimPair, B_IP};
use slimtcp::wire::{Ipv4Packet, TcpPacket};

const ETH_LEN: usize = 14;
/// Bytes of each segment's payload.
const PIECE: usize = 8;

/// A change to the second frame and what the receiver must make of it.
struct Case {
    name: &'static str,
    change: fn(&mut Vec<u8>),
    /// The drop it causes (None: delivered).
    dropped: Option<DropReason>,
}

/// Changes the IPv4 header with `edit` and writes its checksum again.
fn edit_ip(frame: &mut [u8], edit: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) {
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[ETH_LEN..]);
    edit(&mut ip);
    ip.fill_checksum();
}

const CASES: &[Case] = &[
    Case { name: "unchanged", change: |_| {}, dropped: None },
    Case {
        name: "another IPv4 identification",
        change: |f| edit_ip(f, |ip| ip.set_ident(0x1234)),
        dropped: None,
    },
    Case { name: "another TTL", change: |f| edit_ip(f, |ip| ip.set_ttl(3)), dropped: None },
    Case { name: "Ethernet padding", change: |f| f.extend_from_slice(&[0xee; 10]), dropped: None },
    Case {
        name: "a bad IPv4 checksum",
        change: |f| f[ETH_LEN + 10] ^= 0x40,
        dropped: Some(DropReason::BadChecksum),
    },
    Case {
        name: "a bad TCP checksum",
        change: |f| f[ETH_LEN + 20 + 16] ^= 0x40,
        dropped: Some(DropReason::BadChecksum),
    },
    Case {
        name: "another destination address",
        change: |f| edit_ip(f, |ip| ip.set_dst_addr(Ipv4Addr::new(10, 0, 0, 7))),
        dropped: Some(DropReason::NotForUs),
    },
    Case { name: "another destination MAC", change: |f| f[5] ^= 0x01, dropped: Some(DropReason::NotForUs) },
    Case {
        name: "a martian source",
        change: |f| edit_ip(f, |ip| ip.set_src_addr(Ipv4Addr::LOCALHOST)),
        dropped: Some(DropReason::MartianSource),
    },
    Case {
        name: "a total length beyond the frame",
        change: |f| {
            let total = (f.len() - ETH_LEN + 4) as u16;
            edit_ip(f, |ip| ip.set_total_len(total))
        },
        dropped: Some(DropReason::Truncated),
    },
    Case {
        name: "more fragments",
        change: |f| {
            f[ETH_LEN + 6] |= 0x20;
            edit_ip(f, |_| {})
        },
        dropped: Some(DropReason::Fragmented),
    },
];

/// What the receiver made of a burst: the bytes its application read and its counters.
struct Outcome {
    read: Vec<u8>,
    counters: Counters,
}

/// Three data frames of a fresh connection, taken off the link before the receiver saw them,
/// the second changed by `change`, handed to the receiver in one burst (`split`: the first
/// alone, then the other two, so that the second starts a burst and takes the whole receive
/// path).
fn run(change: impl FnOnce(&mut Vec<u8>), split: bool) -> Outcome {
    let (a, b) = default_configs();
    let mut sim = SimPair::new(LinkConfig::default(), a, b).expect("pair");
    let listener = sim.b.tcp_listen(5001, 4).expect("listen");
    let client = sim.a.tcp_connect(sim.now(), SocketAddrV4::new(B_IP, 5001)).expect("connect");
    let mut server = None;
    let ready = sim
        .run_until(10_000, |sim| {
            server = server.or_else(|| sim.b.tcp_accept(listener).ok());
            server.is_some() && sim.a.nic().in_flight() == 0
        })
        .expect("simulation");
    let server = server.filter(|_| ready).expect("connected");

    // Three data segments of the client, held on the link (the server is not polled).
    let now = sim.now();
    for piece in 0..3u8 {
        assert_eq!(sim.a.tcp_send(client, &[piece + 1; PIECE]).expect("send"), PIECE);
        sim.a.poll(now).expect("poll");
    }
    let mut frames: Vec<PacketBuf> = Vec::new();
    assert_eq!(sim.b.nic_mut().receive(now, &mut frames, 16).expect("take"), 3);
    let mut second = frames[1].as_slice().to_vec();
    change(&mut second);
    frames[1] = PacketBuf::from_slice(&second);

    let bursts: Vec<Vec<PacketBuf>> = if split {
        let rest = frames.split_off(1);
        vec![frames, rest]
    } else {
        vec![frames]
    };
    for mut burst in bursts {
        let n = burst.len();
        assert_eq!(sim.a.nic_mut().transmit(now, &mut burst).expect("again"), n);
        sim.b.poll(now).expect("one burst");
    }
    let mut read = vec![0u8; 64];
    let n = sim.b.tcp_recv(server, &mut read).unwrap_or(0);
    read.truncate(n);
    Outcome { read, counters: sim.b.counters().clone() }
}

#[test]
fn a_frame_that_breaks_a_run_meets_every_check_of_the_receive_path() {
    for case in CASES {
        let Outcome { read, counters } = run(case.change, false);
        let mut expected: Vec<u8> = [1u8; PIECE].to_vec();
        match case.dropped {
            // All three, byte for byte (padding left out).
            None => {
                expected.extend([2u8; PIECE]);
                expected.extend([3u8; PIECE]);
                assert_eq!(counters.dropped_total(), 0, "{}: no drop", case.name);
            }
            // The first only: the third, after a gap, waits for the second again.
            Some(reason) => {
                assert_eq!(counters.dropped(reason), 1, "{}: one {reason:?} drop", case.name);
                assert_eq!(counters.dropped_total(), 1, "{}: nothing else dropped", case.name);
            }
        }
        assert_eq!(read, expected, "{}", case.name);
    }
}

/// Random changes to the second frame's headers: within the burst (where it may continue the
/// run) the receiver makes of it what the whole receive path makes of it in a burst of its own.
/// The two runs are two connections (each interface draws its own initial sequence numbers and
/// ports), so every change means the same to both: bits flipped outside the sequence and
/// acknowledgement numbers, which move by a chosen amount; each checksum written again, right
/// or deliberately wrong.
#[test]
fn a_changed_frame_in_a_run_fares_as_on_the_whole_receive_path() {
    const SEQ: usize = ETH_LEN + 20 + 4;
    const ACK: usize = ETH_LEN + 20 + 8;
    const MOVES: [u32; 8] = [0, 1, 7, 8, 1 << 16, 1 << 31, 0u32.wrapping_sub(1), 0u32.wrapping_sub(8)];
    let seed = std::env::var("SLIMTCP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(5u64);
    let mut rng = Rng::new(seed);
    for case in 0..400 {
        let flips: Vec<(usize, u8)> = (0..rng.gen_range(0..4))
            .map(|_| (rng.gen_range(0..(ETH_LEN + 40) as u64) as usize, 1u8 << rng.gen_range(0..8)))
            .filter(|&(at, _)| !(SEQ..ACK + 4).contains(&at))
            .collect();
        // Mostly unmoved, so that most changed frames still look like the run's next one.
        let mut moved = || match rng.gen_range(0..8) {
            0 => MOVES[rng.gen_range(0..MOVES.len() as u64) as usize],
            _ => 0,
        };
        let (seq_move, ack_move) = (moved(), moved());
        let (ip_sum_ok, tcp_sum_ok) = (rng.gen_range(0..4) > 0, rng.gen_range(0..4) > 0);
        let padding = [0, 0, 6][rng.gen_range(0..3) as usize];
        let change = |f: &mut Vec<u8>| {
            f.resize(f.len() + padding, 0);
            for &(at, bit) in &flips {
                f[at] ^= bit;
            }
            for (at, by) in [(SEQ, seq_move), (ACK, ack_move)] {
                let field = u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]]);
                f[at..at + 4].copy_from_slice(&field.wrapping_add(by).to_be_bytes());
            }
            let mut ip = Ipv4Packet::new_unchecked(&mut f[ETH_LEN..]);
            ip.fill_checksum();
            let (src, dst, total) = (ip.src_addr(), ip.dst_addr(), usize::from(ip.total_len()));
            if let Some(tcp) = f.get_mut(ETH_LEN + 20..ETH_LEN + total).filter(|t| t.len() >= 20) {
                TcpPacket::new_unchecked(&mut *tcp).fill_checksum(src, dst);
                tcp[16] ^= u8::from(!tcp_sum_ok);
            }
            f[ETH_LEN + 10] ^= u8::from(!ip_sum_ok);
        };
        let (in_run, alone) = (run(change, false), run(change, true));
        let what = format!(
            "seed {seed} case {case}: flips {flips:?}, seq + {seq_move}, ack + {ack_move}, sums right \
             {ip_sum_ok}/{tcp_sum_ok}, padding {padding}"
        );
        assert_eq!(in_run.read, alone.read, "{what}: bytes read");
        let drops = |o: &Outcome| o.counters.drops().collect::<Vec<_>>();
        assert_eq!(drops(&in_run), drops(&alone), "{what}: drops");
    }
}
