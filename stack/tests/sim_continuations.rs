//! A run of segments in one received burst: frames that repeat the first one's headers go to
//! its connection without the whole receive path (`iface/rx_flow.rs`). A frame that differs in
//! any header byte the receive path checks takes that path and meets its checks; one with a bad
//! checksum is dropped either way. Each case takes three genuine data frames of a connection,
//! changes the second, and hands the three to the receiver in one burst.

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::iface::DropReason;
use slimtcp::nic::memwire::LinkConfig;
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::sim::{default_configs, SimPair, B_IP};
use slimtcp::wire::Ipv4Packet;

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

/// Runs `case`: returns the bytes the receiver's application read and its drop counter's rise.
fn run(case: &Case) -> (Vec<u8>, u64) {
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
    assert_eq!(sim.b.nic_mut().receive(now, &mut frames, 16).expect("take"), 3, "{}", case.name);
    let mut second = frames[1].as_slice().to_vec();
    (case.change)(&mut second);
    frames[1] = PacketBuf::from_slice(&second);
    assert_eq!(sim.a.nic_mut().transmit(now, &mut frames).expect("again"), 3);

    let reason = case.dropped.unwrap_or(DropReason::BadChecksum);
    let before = sim.b.counters().dropped(reason);
    sim.b.poll(now).expect("one burst");
    let mut read = vec![0u8; 64];
    let n = sim.b.tcp_recv(server, &mut read).unwrap_or(0);
    read.truncate(n);
    (read, sim.b.counters().dropped(reason) - before)
}

#[test]
fn a_frame_that_breaks_a_run_meets_every_check_of_the_receive_path() {
    for case in CASES {
        let (read, drops) = run(case);
        let mut expected: Vec<u8> = [1u8; PIECE].to_vec();
        match case.dropped {
            // All three, byte for byte (padding left out).
            None => {
                expected.extend([2u8; PIECE]);
                expected.extend([3u8; PIECE]);
                assert_eq!(drops, 0, "{}: no drop", case.name);
            }
            // The first only: the third, after a gap, waits for the second again.
            Some(reason) => assert_eq!(drops, 1, "{}: one {reason:?} drop", case.name),
        }
        assert_eq!(read, expected, "{}", case.name);
    }
}
