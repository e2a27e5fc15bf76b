//! Arbitrary segments into a live stack: a listener and an established connection on side B of
//! a simulated link, and the fuzzer's frames arriving at B from side A's address. Each input is
//! a sequence of records: either a raw frame, or TCP header fields (wrapped in valid Ethernet
//! and IPv4 headers with correct checksums, so they reach the TCP state machine). The stack must
//! not panic, its socket table must stay bounded, and time may pass between frames.
#![no_main]

use std::net::SocketAddrV4;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
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
    Ipv4Repr { src_addr: *src.ip(), dst_addr: *dst.ip(), protocol: IpProtocol::Tcp, payload_len: tcp_len, ttl: 64 }
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
            Some(tcp_frame(&repr, SocketAddrV4::new(A_IP, src_port), SocketAddrV4::new(B_IP, dst_port), &payload))
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (a_cfg, b_cfg) = default_configs();
    let Ok(mut p) = SimPair::new(LinkConfig::default(), a_cfg, b_cfg) else { return };
    let Ok(listener) = p.b.tcp_listen(80, 8) else { return };
    let Ok(client) = p.a.tcp_connect(p.now(), SocketAddrV4::new(B_IP, 80)) else { return };
    let established = p.run_until(1000, |p| p.b.tcp_can_accept(listener)).unwrap_or(false);
    assert!(established, "the handshake completes on a clean link");
    let Ok(server) = p.b.tcp_accept(listener) else { return };
    let live_port = p.a.tcp_info(client).map(|i| i.local.port()).unwrap_or(0);
    let _ = p.a.tcp_send(client, b"hello");
    let mut input = Input(data);
    let mut frames = 0;
    while let Some(frame) = next_frame(&mut input, live_port) {
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
        let _ = p.b.tcp_accept(listener);
    }
    for _ in 0..64 {
        let _ = p.step();
    }
    // Bounded: the listener, the accepted connection, at most a backlog of 8 more, and
    // connections the fuzzer completed and the stack accepted above.
    assert!(p.b.socket_count() <= 2 + 8 + frames, "socket table grew to {}", p.b.socket_count());
});
