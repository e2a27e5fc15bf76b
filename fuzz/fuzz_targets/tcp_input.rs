//! Arbitrary segments into a live stack: a listener and an established connection on side B of
//! a simulated link, and the fuzzer's frames arriving at B from side A's address. Each input is
//! a sequence of records: either a raw frame, or TCP header fields (wrapped in valid Ethernet
//! and IPv4 headers with correct checksums, so they reach the TCP state machine). The stack must
//! not panic, its socket table must stay bounded, and time may pass between frames. The pair is
//! kept for the next input when this one leaves it clean (every socket aborted and gone, the
//! link quiet, neither side's ARP entry for the other poisoned); a new listener and connection are made for each input.
#![no_main]

use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use slimtcp::iface::SocketHandle;
use slimtcp::nic::memwire::LinkConfig;
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::sim::{default_configs, SimPair, A_IP, B_IP};
use slimtcp::tcp::SeqNumber;
use slimtcp::wire::{
    ChecksumCapabilities, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet,
    Ipv4Repr, TcpFlags, TcpPacket, TcpRepr,
};

const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0a]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0x0b]);

/// A cursor over the fuzz input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.bytes(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn tcp_frame(repr: &TcpRepr, src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let caps = ChecksumCapabilities::none();
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

/// The next frame the input describes, if any.
fn next_frame(input: &mut Input<'_>, live_port: u16) -> Option<Vec<u8>> {
    match input.u8()? % 4 {
        0 => {
            let len = usize::from(input.u16()? % 1600);
            Some(input.bytes(len.min(input.0.len()))?.to_vec())
        }
        kind => {
            // To the listener (80), to the live connection's ports, or to a closed port.
            let (src_port, dst_port) = match kind {
                1 => (input.u16()?, 80),
                2 => (live_port, 80),
                _ => (input.u16()?, input.u16()?),
            };
            let flag_bits = input.u8()?;
            let mut flags = TcpFlags::empty();
            for (bit, f) in [(1, TcpFlags::SYN), (2, TcpFlags::FIN), (4, TcpFlags::RST), (8, TcpFlags::PSH)] {
                if flag_bits & bit != 0 {
                    flags |= f;
                }
            }
            let seq = input.u32()?;
            let ack = if flag_bits & 16 != 0 { Some(SeqNumber(input.u32()?)) } else { None };
            let repr = TcpRepr {
                src_port,
                dst_port,
                seq_number: SeqNumber(seq),
                ack_number: ack,
                flags,
                window_len: input.u16()?,
                max_seg_size: if flag_bits & 32 != 0 { Some(input.u16()?) } else { None },
                window_scale: if flag_bits & 64 != 0 { Some(input.u8()?) } else { None },
                sack: slimtcp::wire::TcpSack::NONE,
            };
            let plen = usize::from(input.u8()?);
            let payload = input.bytes(plen.min(input.0.len()))?.to_vec();
            Some(tcp_frame(
                &repr,
                SocketAddrV4::new(A_IP, src_port),
                SocketAddrV4::new(B_IP, dst_port),
                &payload,
            ))
        }
    }
}

thread_local! {
    /// The simulated pair, kept across inputs when an input leaves it clean: no socket on
    /// either side, nothing on the link, and neither side's ARP entry for the other poisoned.
    /// Building one (two interfaces and their timer wheels) cost more than most inputs.
    static PAIR: RefCell<Option<SimPair>> = const { RefCell::new(None) };
}

fn clean(p: &SimPair) -> bool {
    let now = p.now();
    p.a.socket_count() == 0
        && p.b.socket_count() == 0
        && p.a.nic().in_flight() == 0
        && p.a.arp_lookup(B_IP, now).is_none_or(|mac| mac == B_MAC)
        && p.b.arp_lookup(A_IP, now).is_none_or(|mac| mac == A_MAC)
}

fuzz_target!(|data: &[u8]| {
    PAIR.with(|cell| {
        // A kept pair, or a fresh one; a kept pair that cannot complete the handshake (it
        // should, being clean) is replaced by a fresh one, which must.
        for attempt in 0..2 {
            let kept = if attempt == 0 { cell.borrow_mut().take() } else { None };
            let fresh = kept.is_none();
            let mut p = match kept {
                Some(p) => p,
                None => {
                    let (a_cfg, b_cfg) = default_configs();
                    let Ok(p) = SimPair::new(LinkConfig::default(), a_cfg, b_cfg) else { return };
                    p
                }
            };
            let Some(mut conns) = connect(&mut p) else {
                assert!(!fresh, "the handshake completes on a clean link");
                continue;
            };
            if run(&mut p, &mut conns, data) {
                *cell.borrow_mut() = Some(p);
            }
            return;
        }
    });
});

/// The listener on B, A's client, and B's accepted end, once the handshake is done.
struct Conns {
    listener: SocketHandle,
    client: SocketHandle,
    accepted: Vec<SocketHandle>,
    live_port: u16,
}

fn connect(p: &mut SimPair) -> Option<Conns> {
    let listener = p.b.tcp_listen(80, 8).ok()?;
    let client = p.a.tcp_connect(p.now(), SocketAddrV4::new(B_IP, 80)).ok()?;
    let established = p.run_until(1000, |p| p.b.tcp_can_accept(listener)).unwrap_or(false);
    if !established {
        return None;
    }
    let server = p.b.tcp_accept(listener).ok()?;
    let live_port = p.a.tcp_info(client).map(|i| i.local.port()).unwrap_or(0);
    let _ = p.a.tcp_send(client, b"hello");
    Some(Conns { listener, client, accepted: vec![server], live_port })
}

/// Plays the input's frames; returns whether the pair is clean again afterwards.
fn run(p: &mut SimPair, c: &mut Conns, data: &[u8]) -> bool {
    let mut input = Input(data);
    let mut frames = 0;
    let server = c.accepted[0];
    while let Some(frame) = next_frame(&mut input, c.live_port) {
        frames += 1;
        if frames > 64 {
            break;
        }
        let now = p.now();
        let mut burst = vec![PacketBuf::from_slice(&frame)];
        let _ = p.a.nic_mut().transmit(now, &mut burst);
        for _ in 0..4 {
            let _ = p.step();
        }
        if input.u8().is_some_and(|t| t & 1 == 1) {
            p.clock.advance(Duration::from_millis(250));
        }
        let mut buf = [0u8; 256];
        let _ = p.b.tcp_recv(server, &mut buf);
        if let Ok(h) = p.b.tcp_accept(c.listener) {
            c.accepted.push(h);
        }
    }
    for _ in 0..64 {
        let _ = p.step();
    }
    // Bounded: the listener, the accepted connection, at most a backlog of 8 more, and
    // connections the fuzzer completed and the stack accepted above.
    assert!(p.b.socket_count() <= 2 + 8 + frames, "socket table grew to {}", p.b.socket_count());
    // Tear down for the next input: abort everything, then let the resets go out.
    let _ = p.a.tcp_abort(c.client);
    for &h in &c.accepted {
        let _ = p.b.tcp_abort(h);
    }
    let _ = p.b.tcp_close(c.listener);
    p.run_until(64, |p| clean(p)).unwrap_or(false)
}
