//! Hostile input while a transfer runs: random bytes, truncated and corrupted frames, RSTs and
//! SYNs with guessed sequence numbers for the live connection, segments for closed ports. Each is
//! counted and dropped or answered per RFC; nothing panics, the socket table does not grow, and
//! the transfer still arrives byte for byte.

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::api::SocketError;
use slimtcp::iface::DropReason;
use slimtcp::nic::fault::Rng;
use slimtcp::nic::memwire::LinkConfig;
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::sim::{default_configs, SimPair, A_IP, B_IP};
use slimtcp::tcp::SeqNumber;
use slimtcp::wire::{
    ChecksumCapabilities, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet,
    Ipv4Repr, TcpFlags, TcpPacket, TcpRepr,
};
use slimtcp_testkit::data::{pattern, pattern_digest, StreamHasher};

const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0a]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0b]);

fn tcp_frame(
    src: SocketAddrV4,
    dst: SocketAddrV4,
    flags: TcpFlags,
    seq: u32,
    ack: Option<u32>,
    payload: &[u8],
) -> Vec<u8> {
    let caps = ChecksumCapabilities::none();
    let repr = TcpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        seq_number: SeqNumber(seq),
        ack_number: ack.map(SeqNumber),
        flags,
        window_len: 1000,
        max_seg_size: None,
        window_scale: None,
        sack: slimtcp::wire::TcpSack::NONE,
    };
    let tcp_len = repr.header_len() + payload.len();
    let mut f = vec![0u8; 14 + 20 + tcp_len];
    EthernetRepr { src_addr: A_MAC, dst_addr: B_MAC, ethertype: EtherType::Ipv4 }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr {
        src_addr: *src.ip(),
        dst_addr: *dst.ip(),
        protocol: IpProtocol::Tcp,
        payload_len: tcp_len,
        ttl: 64,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]), &caps);
    f[34 + repr.header_len()..].copy_from_slice(payload);
    repr.emit(&mut TcpPacket::new_unchecked(&mut f[34..]), *src.ip(), *dst.ip(), payload.len(), &caps);
    f
}

/// One hostile frame, chosen by the seeded generator.
fn hostile(rng: &mut Rng, client: SocketAddrV4, server: SocketAddrV4) -> Vec<u8> {
    let seq = rng.next_u64() as u32;
    match rng.gen_range(0..8) {
        0 => {
            let mut f = vec![0u8; rng.gen_range(0..200) as usize];
            rng.fill_bytes(&mut f);
            f
        }
        1 => {
            let f = tcp_frame(client, server, TcpFlags::PSH, seq, Some(seq), b"junk");
            let cut = rng.gen_range(0..f.len() as u64) as usize;
            f[..cut].to_vec()
        }
        2 => {
            let mut f = tcp_frame(client, server, TcpFlags::PSH, seq, Some(seq), b"corrupted");
            let bit = rng.gen_range(14 * 8..(f.len() * 8) as u64) as usize;
            f[bit / 8] ^= 1 << (bit % 8);
            f
        }
        3 => tcp_frame(client, server, TcpFlags::RST, seq, None, b""),
        4 => tcp_frame(client, server, TcpFlags::SYN, seq, None, b""),
        5 => tcp_frame(client, server, TcpFlags::empty(), seq, Some(seq), b"blind data"),
        6 => tcp_frame(
            SocketAddrV4::new(A_IP, 40_000),
            SocketAddrV4::new(B_IP, 81),
            TcpFlags::SYN,
            seq,
            None,
            b"",
        ),
        _ => {
            // A well-formed packet from a spoofed address, for a connection that does not exist.
            tcp_frame(
                SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 99), 1234),
                server,
                TcpFlags::empty(),
                seq,
                Some(seq),
                b"x",
            )
        }
    }
}

#[test]
fn hostile_frames_during_a_transfer_change_nothing_else() {
    let seed = std::env::var("SLIMTCP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(11u64);
    let (a, b) = default_configs();
    let pcap = std::env::var("HOSTILE_PCAP").ok().map(Into::into);
    let mut sim = SimPair::new(LinkConfig { seed, pcap, ..LinkConfig::default() }, a, b).expect("pair");
    let server_addr = SocketAddrV4::new(B_IP, 5001);
    let listener = sim.b.tcp_listen(5001, 8).expect("listen");
    let conn = sim.a.tcp_connect(sim.now(), server_addr).expect("connect");
    let client_addr = sim.a.tcp_info(conn).expect("info").local;
    let total: u64 = 8 * 1024 * 1024;
    let stream = 77;
    let mut rng = Rng::new(seed);
    let (mut sent, mut server, mut hasher, mut done) = (0u64, None, StreamHasher::new(), false);
    let mut chunk = vec![0u8; 32 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let mut injected = 0u64;
    let mut max_sockets = 0;
    let finished = sim
        .run_until(20_000_000, |sim| {
            if sent < total {
                let n = ((total - sent) as usize).min(chunk.len());
                pattern(stream, sent, &mut chunk[..n]);
                match sim.a.tcp_send(conn, &chunk[..n]) {
                    Ok(k) => sent += k as u64,
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => panic!("seed {seed}: send: {e}"),
                }
                if sent == total {
                    sim.a.tcp_close(conn).expect("close");
                }
            }
            if injected < 5_000 {
                let now = sim.now();
                let mut burst: Vec<PacketBuf> = (0..4)
                    .map(|_| PacketBuf::from_slice(&hostile(&mut rng, client_addr, server_addr)))
                    .collect();
                injected += burst.len() as u64;
                let _ = sim.a.nic_mut().transmit(now, &mut burst);
            }
            if server.is_none() {
                server = sim.b.tcp_accept(listener).ok();
            }
            if let Some(s) = server.filter(|_| !done) {
                loop {
                    match sim.b.tcp_recv(s, &mut buf) {
                        Ok(0) => {
                            done = true;
                            sim.b.tcp_close(s).expect("close");
                            break;
                        }
                        Ok(n) => hasher.update(&buf[..n]),
                        Err(SocketError::WouldBlock) => break,
                        Err(e) => {
                            panic!("seed {seed}: the hostile frames broke the connection: {e} ({})", e.name())
                        }
                    }
                }
            }
            max_sockets = max_sockets.max(sim.b.socket_count());
            done && injected >= 5_000 && sim.a.socket_count() == 0
        })
        .expect("simulation");
    if !finished {
        for _ in 0..3 {
            let (a0, b0) = (sim.a.counters(), sim.b.counters());
            sim.step().expect("step");
            let (a1, b1) = (sim.a.counters(), sim.b.counters());
            eprintln!(
                "a out {} in {} drops {:?} | b out {} in {} drops {:?} rst {}",
                a1.tcp_segs_out - a0.tcp_segs_out,
                a1.tcp_segs_in - a0.tcp_segs_in,
                a1.drops().collect::<Vec<_>>(),
                b1.tcp_segs_out - b0.tcp_segs_out,
                b1.tcp_segs_in - b0.tcp_segs_in,
                b1.drops().collect::<Vec<_>>(),
                b1.tcp_resets_sent
            );
        }
    }
    assert!(
        finished,
        "seed {seed}: transfer did not finish (sent {sent}, received {}, eof {done}, injected {injected}, sockets a={} b={}, t={}, client {:?}, server {:?})",
        hasher.bytes(),
        sim.a.socket_count(),
        sim.b.socket_count(),
        sim.now(),
        sim.a.tcp_info(conn).map(|i| (i.state, i.error)),
        server.map(|s| sim.b.tcp_info(s).map(|i| (i.state, i.error, i.recv_queued)))
    );
    assert_eq!(hasher.bytes(), total);
    assert!(hasher.finish() == pattern_digest(stream, total), "seed {seed}: stream corrupted");
    let c = sim.b.counters();
    for reason in [DropReason::Truncated, DropReason::BadChecksum, DropReason::NoSocket] {
        assert!(c.dropped(reason) > 0, "seed {seed}: expected {reason:?} drops, counters {c:?}");
    }
    assert!(c.tcp_resets_sent > 0, "segments for closed ports are answered with RST");
    assert!(max_sockets <= 3, "seed {seed}: hostile SYNs grew the socket table to {max_sockets}");
    eprintln!("seed {seed}: {injected} hostile frames; b counters: {c:?}");
}
