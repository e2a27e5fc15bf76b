//! Hostile peers at a listener, on a virtual clock over `memwire`: a SYN flood from spoofed
//! sources (the backlog fills with half-open connections, then every SYN is answered with a
//! stateless SYN cookie and a real client still connects), forged cookie ACKs, martian source
//! addresses (never answered), and MSS options below the minimum (clamped); inside a burst of a
//! connection's segments (which the stack reads as one run), a damaged segment and one from a
//! spoofed source that look like the run's next; and a handshake completed after its listener
//! closed (reset, nothing kept).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use slimtcp::api::SocketError;
use slimtcp::iface::{DropReason, Interface, InterfaceConfig, Martian, SocketHandle};
use slimtcp::nic::fault::Rng;
use slimtcp::nic::memwire::{self, LinkConfig, MemwireNic};
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::tcp::{SeqNumber, State};
use slimtcp::time::Instant;
use slimtcp::wire::{
    ChecksumCapabilities, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet, Icmpv4Repr,
    IpProtocol, Ipv4Packet, Ipv4Repr, TcpFlags, TcpPacket, TcpRepr, UdpPacket, UdpRepr,
};

const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0a]);
const STACK_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0b]);
const STACK_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PORT: u16 = 80;
const BACKLOG: usize = 4;

/// The stack with a listener, and the raw other end of its link.
struct Bed {
    iface: Interface<MemwireNic>,
    peer: MemwireNic,
    listener: SocketHandle,
    now: Instant,
}

/// What the stack sent back: TCP segments (with their IPv4 header) and anything else.
#[derive(Default)]
struct Replies {
    tcp: Vec<(Ipv4Repr, TcpRepr, Vec<u8>)>,
    other: usize,
}

impl Bed {
    fn new() -> Bed {
        let (peer, nic) = memwire::link(LinkConfig::default()).expect("link");
        let mut iface = Interface::new(nic, InterfaceConfig::new(STACK_MAC, STACK_IP, 24));
        let listener = iface.tcp_listen(PORT, BACKLOG).expect("listen");
        Bed { iface, peer, listener, now: Instant::from_millis(1) }
    }

    /// A stack whose listener's backlog is full of half-open connections from spoofed sources
    /// (`seed` picks them): its next SYN gets a cookie.
    fn with_full_backlog(seed: u64) -> Bed {
        let mut bed = Bed::new();
        let mut rng = Rng::new(seed);
        bed.exchange((0..BACKLOG).map(|_| syn(spoofed(&mut rng), 1, None, None)).collect());
        bed
    }

    /// Sends `frames` to the stack (none: just polls), lets it work, and collects what it
    /// answered.
    fn exchange(&mut self, frames: Vec<Vec<u8>>) -> Replies {
        let mut replies = Replies::default();
        let empty = [Vec::new()];
        let chunks: Vec<&[Vec<u8>]> =
            if frames.is_empty() { vec![&empty[..0]] } else { frames.chunks(32).collect() };
        for chunk in chunks {
            let mut burst: Vec<PacketBuf> = chunk.iter().map(|f| PacketBuf::from_slice(f)).collect();
            self.peer.transmit(self.now, &mut burst).expect("transmit");
            assert!(burst.is_empty(), "the link took every frame");
            while self.iface.poll(self.now).expect("poll") {}
            self.collect(&mut replies);
        }
        replies
    }

    /// Lets time pass (timers run), collecting what the stack sends meanwhile.
    fn advance(&mut self, by: Duration) -> Replies {
        let mut replies = Replies::default();
        let end = self.now + by;
        while self.now < end {
            self.now = (self.now + Duration::from_millis(100)).min(end);
            while self.iface.poll(self.now).expect("poll") {}
            self.collect(&mut replies);
        }
        replies
    }

    fn collect(&mut self, replies: &mut Replies) {
        let mut rx = Vec::new();
        while self.peer.receive(self.now, &mut rx, 64).expect("receive") > 0 {
            for f in rx.drain(..) {
                match parse_tcp(f.as_slice()) {
                    Some(seg) => replies.tcp.push(seg),
                    None => replies.other += 1,
                }
            }
        }
    }
}

fn parse_tcp(frame: &[u8]) -> Option<(Ipv4Repr, TcpRepr, Vec<u8>)> {
    let caps = ChecksumCapabilities::none();
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(&frame[14..]).ok()?;
    let ip_repr = Ipv4Repr::parse(&ip, &caps).ok()?;
    if ip_repr.protocol != IpProtocol::Tcp {
        return None;
    }
    let l4 = &frame[14 + ip.header_len()..][..ip_repr.payload_len];
    let tcp = TcpPacket::new_checked(l4).ok()?;
    let repr = TcpRepr::parse(&tcp, ip_repr.src_addr, ip_repr.dst_addr, &caps).ok()?;
    Some((ip_repr, repr, l4[tcp.header_len()..].to_vec()))
}

/// An IPv4 frame from the peer's MAC to the stack.
fn ipv4_frame(
    src: Ipv4Addr,
    protocol: IpProtocol,
    l4_len: usize,
    emit_l4: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + l4_len];
    EthernetRepr { src_addr: PEER_MAC, dst_addr: STACK_MAC, ethertype: EtherType::Ipv4 }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr { src_addr: src, dst_addr: STACK_IP, protocol, payload_len: l4_len, ttl: 64 }
        .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]), &ChecksumCapabilities::none());
    emit_l4(&mut f[34..]);
    f
}

fn tcp_frame(src: SocketAddrV4, repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    let len = repr.header_len() + payload.len();
    ipv4_frame(*src.ip(), IpProtocol::Tcp, len, |l4| {
        l4[repr.header_len()..].copy_from_slice(payload);
        let caps = ChecksumCapabilities::none();
        repr.emit(&mut TcpPacket::new_unchecked(l4), *src.ip(), STACK_IP, payload.len(), &caps);
    })
}

fn syn(src: SocketAddrV4, seq: u32, mss: Option<u16>, wscale: Option<u8>) -> Vec<u8> {
    tcp_frame(src, &syn_repr(src, seq, mss, wscale), b"")
}

fn syn_repr(src: SocketAddrV4, seq: u32, mss: Option<u16>, wscale: Option<u8>) -> TcpRepr {
    TcpRepr {
        src_port: src.port(),
        dst_port: PORT,
        seq_number: SeqNumber(seq),
        ack_number: None,
        flags: TcpFlags::SYN,
        window_len: 64_240,
        max_seg_size: mss,
        window_scale: wscale,
        sack: slimtcp::wire::TcpSack::NONE,
    }
}

#[test]
fn a_damaged_or_spoofed_segment_inside_a_run_changes_nothing_else() {
    let mut bed = Bed::new();
    let client = SocketAddrV4::new(CLIENT_IP, 40_000);
    let syn_ack = *the_syn_ack(&bed.exchange(vec![syn(client, 1_000, Some(1460), None)]), client);
    let ours = syn_ack.seq_number + 1;
    bed.exchange(vec![ack(client, 1_001, ours, 1000, b"")]);
    let h = bed.iface.tcp_accept(bed.listener).expect("accepted");
    // Segment `i` of the stream: 100 bytes of value `i` at offset 100 * i; every header alike
    // but for its sequence number, as a bulk sender's.
    let segment = |from: SocketAddrV4, i: u8| ack(from, 1_001 + 100 * u32::from(i), ours, 1000, &[i; 100]);
    let mut damaged = segment(client, 2);
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let spoofed = segment(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 40_000), 3);
    let before = bed.iface.counters();
    // One burst: 0 and 1 in order, 2 damaged (its header continues the run, its checksum is
    // wrong), 3 in order after the hole, the spoofed copy of 3, then 4.
    let r = bed.exchange(vec![
        segment(client, 0),
        segment(client, 1),
        damaged,
        segment(client, 3),
        spoofed,
        segment(client, 4),
    ]);
    let after = bed.iface.counters();
    assert_eq!(after.dropped(DropReason::BadChecksum) - before.dropped(DropReason::BadChecksum), 1);
    assert_eq!(
        after.dropped(DropReason::NoSocket) - before.dropped(DropReason::NoSocket),
        1,
        "the spoofed one"
    );
    assert!(r
        .tcp
        .iter()
        .any(|(ip, t, _)| ip.dst_addr == Ipv4Addr::new(10, 0, 0, 3) && t.flags == TcpFlags::RST));
    let to_client: Vec<_> = r.tcp.iter().filter(|(ip, _, _)| ip.dst_addr == CLIENT_IP).collect();
    assert!(!to_client.is_empty(), "acknowledged");
    assert!(
        to_client.iter().all(|(_, t, _)| t.ack_number == Some(SeqNumber(1_201))),
        "up to the hole, and no further: {to_client:?}"
    );
    let mut buf = [0u8; 1024];
    assert_eq!(bed.iface.tcp_recv(h, &mut buf), Ok(200));
    assert_eq!((&buf[..100], &buf[100..200]), (&[0u8; 100][..], &[1u8; 100][..]));
    // The sender resends 2: the hole fills and 3 and 4 follow in order.
    let r = bed.exchange(vec![segment(client, 2)]);
    assert!(r
        .tcp
        .iter()
        .any(|(ip, t, _)| ip.dst_addr == CLIENT_IP && t.ack_number == Some(SeqNumber(1_501))));
    assert_eq!(bed.iface.tcp_recv(h, &mut buf), Ok(300));
    for (i, chunk) in buf[..300].chunks(100).enumerate() {
        assert!(chunk.iter().all(|&b| usize::from(b) == i + 2), "segment {} intact", i + 2);
    }
}

fn ack(src: SocketAddrV4, seq: u32, ack: SeqNumber, window: u16, payload: &[u8]) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: src.port(),
        dst_port: PORT,
        seq_number: SeqNumber(seq),
        ack_number: Some(ack),
        flags: if payload.is_empty() { TcpFlags::empty() } else { TcpFlags::PSH },
        window_len: window,
        max_seg_size: None,
        window_scale: None,
        sack: slimtcp::wire::TcpSack::NONE,
    };
    tcp_frame(src, &repr, payload)
}

/// A source address of the flood: on the link, neither ours nor the real client's.
fn spoofed(rng: &mut Rng) -> SocketAddrV4 {
    let host = 3 + rng.gen_range(0..251) as u8;
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, host), 1024 + rng.gen_range(0..60_000) as u16)
}

fn the_syn_ack(r: &Replies, to: SocketAddrV4) -> &TcpRepr {
    let found: Vec<_> =
        r.tcp.iter().filter(|(ip, t, _)| ip.dst_addr == *to.ip() && t.dst_port == to.port()).collect();
    assert_eq!(found.len(), 1, "one answer to {to}");
    let (_, t, _) = found[0];
    assert_eq!(t.flags, TcpFlags::SYN, "a SYN-ACK to {to}");
    t
}

#[test]
fn a_flooded_listener_answers_with_cookies_keeps_no_state_and_a_client_still_connects() {
    let mut bed = Bed::new();
    let mut rng = Rng::new(14);
    // The flood: the first BACKLOG SYNs become half-open connections, all later ones cookies.
    const FLOOD: usize = 20_000;
    let frames: Vec<Vec<u8>> =
        (0..FLOOD).map(|_| syn(spoofed(&mut rng), rng.next_u64() as u32, Some(1460), Some(7))).collect();
    let replies = bed.exchange(frames);
    assert_eq!(replies.tcp.len(), FLOOD, "every SYN answered");
    assert!(replies.tcp.iter().all(|(_, t, _)| t.flags == TcpFlags::SYN && t.max_seg_size == Some(1460)));
    let c = bed.iface.counters();
    assert_eq!(c.tcp_syn_cookies_sent, (FLOOD - BACKLOG) as u64);
    assert_eq!(bed.iface.socket_count(), 1 + BACKLOG, "no state per cookie SYN");

    // A real client: MSS 1400, window scale 9; its ACK returns the cookie with data.
    let client = SocketAddrV4::new(CLIENT_IP, 40_000);
    let r = bed.exchange(vec![syn(client, 7_000, Some(1400), Some(9))]);
    let syn_ack = *the_syn_ack(&r, client);
    assert_eq!(syn_ack.ack_number, Some(SeqNumber(7_001)));
    assert_eq!(syn_ack.window_scale, Some(3), "our scale, since the client offered one");
    let cookie = syn_ack.seq_number;
    assert_eq!(bed.iface.socket_count(), 1 + BACKLOG);

    // Forged and altered ACKs for the same client get a RST and make nothing.
    let r = bed.exchange(vec![
        ack(client, 7_001, cookie + 2, 100, b""),
        ack(client, 7_002, cookie + 1, 100, b""),
        ack(SocketAddrV4::new(CLIENT_IP, 40_001), 7_001, cookie + 1, 100, b""),
    ]);
    assert_eq!(r.tcp.len(), 3);
    assert!(r.tcp.iter().all(|(_, t, _)| t.flags == TcpFlags::RST));
    assert_eq!(bed.iface.counters().dropped(DropReason::BadCookie), 3);
    assert_eq!(bed.iface.socket_count(), 1 + BACKLOG);

    // The genuine ACK: a connection in ESTABLISHED with the client's MSS.
    let r = bed.exchange(vec![ack(client, 7_001, cookie + 1, 1000, b"ping")]);
    assert_eq!(bed.iface.counters().tcp_syn_cookies_accepted, 1);
    let h = bed.iface.tcp_accept(bed.listener).expect("the cookie connection is accepted");
    let info = bed.iface.tcp_info(h).expect("info");
    assert_eq!((info.state, info.remote, info.send_mss), (State::Established, client, 1400));
    let mut buf = [0u8; 16];
    assert_eq!(bed.iface.tcp_recv(h, &mut buf), Ok(4));
    assert_eq!(&buf[..4], b"ping");
    assert!(r.tcp.iter().all(|(_, t, _)| t.flags.is_empty() || t.flags == TcpFlags::PSH), "no RST");

    // It works both ways: our segment starts at cookie + 1, with our window scaled by 3.
    assert_eq!(bed.iface.tcp_send(h, b"pong"), Ok(4));
    let r = bed.exchange(vec![]);
    let (_, seg, data) = r.tcp.iter().find(|(ip, _, _)| ip.dst_addr == CLIENT_IP).expect("data segment");
    assert_eq!(
        (seg.seq_number, seg.ack_number, data.as_slice()),
        (cookie + 1, Some(SeqNumber(7_005)), &b"pong"[..])
    );
    assert_eq!(seg.window_len, ((256 * 1024) >> 3) as u16);

    // The spoofed half-open connections time out; the table shrinks back to listener + client.
    bed.advance(Duration::from_secs(120));
    assert_eq!(bed.iface.socket_count(), 2);
    // The backlog has room again: a new SYN makes a half-open connection, not a cookie.
    let before = bed.iface.counters().tcp_syn_cookies_sent;
    bed.exchange(vec![syn(SocketAddrV4::new(CLIENT_IP, 40_002), 1, Some(1460), None)]);
    assert_eq!(bed.iface.counters().tcp_syn_cookies_sent, before);
    assert_eq!(bed.iface.socket_count(), 3);
}

#[test]
fn a_cookie_clients_later_segment_arriving_first_is_dropped_and_its_first_one_still_connects() {
    let mut bed = Bed::with_full_backlog(15);
    let client = SocketAddrV4::new(CLIENT_IP, 41_000);
    let r = bed.exchange(vec![syn(client, 9_000, Some(1460), Some(7))]);
    let cookie = the_syn_ack(&r, client).seq_number;
    let sockets = bed.iface.socket_count();

    // The handshake's ACK and the first segment were lost: the second one (and the FIN after
    // it) come first. The cookie cannot be checked against them (its MAC covers the client's
    // ISN, i.e. the first segment's sequence number - 1): dropped, counted, never reset.
    let fin = TcpRepr {
        ack_number: Some(cookie + 1),
        flags: TcpFlags::FIN,
        window_len: 1000,
        ..syn_repr(client, 9_011, None, None)
    };
    let r = bed.exchange(vec![ack(client, 9_006, cookie + 1, 1000, b"world"), tcp_frame(client, &fin, b"")]);
    assert!(r.tcp.is_empty(), "no answer, in particular no RST: {:?}", r.tcp);
    assert_eq!(bed.iface.counters().dropped(DropReason::BadCookie), 2);
    assert_eq!(bed.iface.socket_count(), sockets, "no state");

    // The client retransmits from its first byte: that segment returns the cookie.
    let r = bed.exchange(vec![ack(client, 9_001, cookie + 1, 1000, b"hello")]);
    assert!(r.tcp.iter().all(|(_, t, _)| !t.flags.contains(TcpFlags::RST)), "no RST");
    assert_eq!(bed.iface.counters().tcp_syn_cookies_accepted, 1);
    let h = bed.iface.tcp_accept(bed.listener).expect("the cookie connection");
    let mut buf = [0u8; 16];
    assert_eq!(bed.iface.tcp_recv(h, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");

    // A forged pure ACK (no data, no FIN) is still answered with a RST.
    let stranger = SocketAddrV4::new(CLIENT_IP, 41_001);
    let r = bed.exchange(vec![ack(stranger, 5, cookie + 1, 1000, b"")]);
    let to_stranger: Vec<_> = r.tcp.iter().filter(|(_, t, _)| t.dst_port == stranger.port()).collect();
    assert_eq!(to_stranger.len(), 1);
    assert_eq!(to_stranger[0].1.flags, TcpFlags::RST);
    assert_eq!(bed.iface.counters().dropped(DropReason::BadCookie), 3);
}

#[test]
fn an_ack_to_a_listener_that_sent_no_cookie_is_reset_without_a_cookie_check() {
    let mut bed = Bed::new();
    let stray = SocketAddrV4::new(CLIENT_IP, 5555);
    let r = bed.exchange(vec![ack(stray, 1, SeqNumber(12345), 100, b"")]);
    assert_eq!(r.tcp.len(), 1);
    assert_eq!(r.tcp[0].1.flags, TcpFlags::RST);
    let c = bed.iface.counters();
    assert_eq!((c.dropped(DropReason::NoSocket), c.dropped(DropReason::BadCookie)), (1, 0));
}

#[test]
fn cookie_connections_are_bounded_too() {
    let mut bed = Bed::with_full_backlog(7);
    // 3 x BACKLOG clients complete cookie handshakes and are never accepted: BACKLOG of them get
    // a connection (2 x BACKLOG in all), the rest are dropped until the application accepts.
    let mut made = 0;
    for i in 0..3 * BACKLOG as u16 {
        let client = SocketAddrV4::new(CLIENT_IP, 20_000 + i);
        let r = bed.exchange(vec![syn(client, 100, Some(1460), None)]);
        let cookie = the_syn_ack(&r, client).seq_number;
        let before = bed.iface.socket_count();
        let r = bed.exchange(vec![ack(client, 101, cookie + 1, 100, b"")]);
        assert!(
            r.tcp.iter().all(|(_, t, _)| !t.flags.contains(TcpFlags::RST)),
            "a full listener drops, no RST"
        );
        made += bed.iface.socket_count() - before;
    }
    assert_eq!(made, BACKLOG);
    assert_eq!(bed.iface.socket_count(), 1 + 2 * BACKLOG);
    assert_eq!(bed.iface.counters().dropped(DropReason::BacklogFull), 2 * BACKLOG as u64);
    assert!(bed.iface.tcp_accept(bed.listener).is_ok());
}

#[test]
fn martian_sources_are_never_answered_and_counted_by_kind() {
    let mut bed = Bed::new();
    let udp = bed.iface.udp_bind(53).expect("bind");
    let cases = [
        ("0.0.0.0", Martian::Unspecified),
        ("255.255.255.255", Martian::Broadcast),
        ("10.0.0.255", Martian::SubnetBroadcast),
        ("224.0.0.1", Martian::Multicast),
        ("240.1.2.3", Martian::Multicast),
        ("127.0.0.1", Martian::Loopback),
        ("10.0.0.2", Martian::OwnAddress),
    ];
    for (addr, kind) in cases {
        let src: Ipv4Addr = addr.parse().expect("address");
        let before = bed.iface.counters().martians(kind);
        let sport = SocketAddrV4::new(src, 1234);
        // A SYN to the listener, an ACK to it, a SYN to a closed port (would be a RST), a UDP
        // datagram to a bound port, and a ping.
        let udp_frame = ipv4_frame(src, IpProtocol::Udp, 8 + 3, |l4| {
            l4[8..].copy_from_slice(b"abc");
            let repr = UdpRepr { src_port: 1234, dst_port: 53 };
            repr.emit(&mut UdpPacket::new_unchecked(l4), src, STACK_IP, 3, &ChecksumCapabilities::none());
        });
        let echo = Icmpv4Repr::EchoRequest { ident: 1, seq_no: 1, data: b"hi" };
        let ping = ipv4_frame(src, IpProtocol::Icmp, echo.buffer_len(), |l4| {
            echo.emit(&mut Icmpv4Packet::new_unchecked(l4));
        });
        let closed = {
            let repr = TcpRepr { dst_port: PORT + 1, ..syn_repr(sport, 1, Some(1460), None) };
            tcp_frame(sport, &repr, b"")
        };
        let r = bed.exchange(vec![
            syn(sport, 1, Some(1460), None),
            ack(sport, 2, SeqNumber(99), 100, b""),
            closed,
            udp_frame,
            ping,
        ]);
        assert!(r.tcp.is_empty() && r.other == 0, "{addr}: answered {} TCP + {} other", r.tcp.len(), r.other);
        assert_eq!(bed.iface.counters().martians(kind) - before, 5, "{addr}");
    }
    let c = bed.iface.counters();
    assert_eq!(c.dropped(DropReason::MartianSource), 5 * cases.len() as u64);
    assert_eq!((c.udp_in, c.tcp_segs_in, c.icmp_echo_replies, c.tcp_resets_sent), (0, 0, 0, 0));
    assert_eq!(bed.iface.udp_recv_buf(udp).map(drop), Err(SocketError::WouldBlock));
    assert_eq!(bed.iface.socket_count(), 2);
    // The same frames from an ordinary source are answered.
    let r = bed.exchange(vec![syn(SocketAddrV4::new(CLIENT_IP, 1234), 1, Some(1460), None)]);
    assert_eq!(r.tcp.len(), 1);
}

#[test]
fn mss_options_below_the_minimum_are_clamped_to_64() {
    for offered in [0u16, 1, 63] {
        let mut bed = Bed::new();
        let client = SocketAddrV4::new(CLIENT_IP, 30_000);
        let r = bed.exchange(vec![syn(client, 500, Some(offered), None)]);
        let iss = the_syn_ack(&r, client).seq_number;
        bed.exchange(vec![ack(client, 501, iss + 1, 60_000, b"")]);
        let h = bed.iface.tcp_accept(bed.listener).expect("accepted");
        assert_eq!(bed.iface.tcp_info(h).expect("info").send_mss, 64, "MSS option {offered}");
        // What we send is cut at 64 bytes, not at 0 or 1.
        assert_eq!(bed.iface.tcp_send(h, &[9u8; 200]), Ok(200));
        let r = bed.exchange(vec![]);
        let sizes: Vec<usize> = r.tcp.iter().map(|(_, _, d)| d.len()).collect();
        assert_eq!(sizes, [64, 64, 64, 8], "MSS option {offered}");
    }
}

#[test]
fn a_handshake_completed_after_its_listener_closed_is_reset_and_freed() {
    let mut bed = Bed::new();
    let client = SocketAddrV4::new(CLIENT_IP, 40_001);
    let syn_ack = *the_syn_ack(&bed.exchange(vec![syn(client, 5_000, Some(1460), None)]), client);
    // Half open (SYN-RECEIVED) when its listener goes: it is not in the accept queue yet.
    bed.iface.tcp_close(bed.listener).expect("close the listener");
    let r = bed.exchange(vec![ack(client, 5_001, syn_ack.seq_number + 1, 1000, b"")]);
    assert!(
        r.tcp.iter().any(|(ip, t, _)| ip.dst_addr == CLIENT_IP && t.flags.contains(TcpFlags::RST)),
        "nobody will accept the connection: its client is reset"
    );
    assert_eq!(bed.iface.socket_count(), 0, "and the stack keeps nothing of it");
}
