//! A TCP transfer whose payload lives in external memory (a memfd region standing in for guest
//! memory), between two SlimTCP stacks over a DPDK `net_ring` pair, polled from one thread.
//!
//! Specification:
//! - the sender loans slices of the registered region (`TxPayload::by_reference`); the stack
//!   sends them as header mbufs chained to payload segments attached to the region: neither the
//!   stack nor the NIC copies a payload byte (both counters stay 0);
//! - on `net_ring` the receiver gets the sender's mbufs: every data frame's payload segment
//!   points into the region;
//! - the bytes arrive intact; every loan is handed back, only after its ACK and completion (the
//!   ordering rule itself is specified in `sim_loaned_external.rs`).

mod dpdk_common;

use std::net::{Ipv4Addr, SocketAddrV4};

use dpdk_common::*;
use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::dpdk::{create_ring_pair, DpdkNic, Eal, ExtMemRegion, Mbuf, PortConfig};
use slimtcp::nic::{Nic, NicCapabilities, NicError, PacketBuf};
use slimtcp::time::Instant;
use slimtcp::wire::EthernetAddress;
use slimtcp_testkit::data::{pattern, sha256};

const REGION: usize = 8 << 20;
const LOAN: usize = 64 * 1024;
const PORT: u16 = 5003;

/// The receiving NIC, looking at each frame's mbufs before handing the frame to its stack:
/// counts data frames whose payload segment lies in the region.
struct InspectingNic {
    inner: DpdkNic,
    region: (usize, usize),
    raw: Vec<Mbuf>,
    payload_frames: u64,
    payload_in_region: u64,
}

impl Nic for InspectingNic {
    fn capabilities(&self) -> NicCapabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, _now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        self.inner.receive_mbufs(&mut self.raw, max);
        let n = self.raw.len();
        for m in self.raw.drain(..) {
            let frame = m.to_vec();
            if tcp_payload_len(&frame) > 0 {
                self.payload_frames += 1;
                let (base, len) = self.region;
                let in_region = m.segments().nth(1).is_some_and(|seg| {
                    let p = seg.as_ptr() as usize;
                    p >= base && p + seg.len() <= base + len
                });
                self.payload_in_region += u64::from(in_region);
            }
            // The test's receiver flattens (a copy on the receiving side, outside the claim).
            out.push(PacketBuf::from_slice(&frame));
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        self.inner.alloc_tx()
    }

    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        self.inner.transmit(now, frames)
    }
}

/// TCP payload bytes of an Ethernet + IPv4 + TCP frame (0 for anything else).
fn tcp_payload_len(f: &[u8]) -> usize {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
        return 0;
    }
    let ip_total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let doff = usize::from(f[14 + ihl + 12] >> 4) * 4;
    ip_total.saturating_sub(ihl + doff)
}

#[test]
fn tcp_payload_from_external_memory_crosses_net_ring_without_copy() {
    let eal = Eal::init(eal_args(&[])).expect("EAL starts");
    let (na, nb) = create_ring_pair(eal, "slimt_ext_a", "slimt_ext_b", 1024).expect("ring pair");
    let mut a_nic = DpdkNic::open(eal, &PortConfig::new(&na)).expect("port a").pop().expect("queue");
    let b_nic = DpdkNic::open(eal, &PortConfig::new(&nb)).expect("port b").pop().expect("queue");

    let mut guest = MemfdRegion::new(REGION);
    pattern(17, 0, guest.bytes_mut());
    let expect = sha256(&guest.bytes_mut()[..]);
    // SAFETY: `guest` stays mapped until after the NICs and the region are dropped (below).
    let region =
        unsafe { ExtMemRegion::register(eal, guest.as_mut_ptr(), guest.len(), 4096) }.expect("register");
    a_nic.attach_region(&region).expect("attach the region");

    let ip_a = Ipv4Addr::new(10, 5, 0, 1);
    let ip_b = Ipv4Addr::new(10, 5, 0, 2);
    let mut a = Interface::new(a_nic, InterfaceConfig::new(EthernetAddress([2, 0, 0, 5, 0, 1]), ip_a, 24));
    let inspecting = InspectingNic {
        inner: b_nic,
        region: (guest.as_mut_ptr() as usize, guest.len()),
        raw: Vec::new(),
        payload_frames: 0,
        payload_in_region: 0,
    };
    let mut b =
        Interface::new(inspecting, InterfaceConfig::new(EthernetAddress([2, 0, 0, 5, 0, 2]), ip_b, 24));

    let listener = b.tcp_listen(PORT, 4).expect("listen");
    let start = std::time::Instant::now();
    let now = || Instant::from_std(start);
    let h = a.tcp_connect(now(), SocketAddrV4::new(ip_b, PORT)).expect("connect");
    let mut sender = LoanSender::new(h, REGION, LOAN);
    let mut conn = None;
    let mut got = Vec::with_capacity(REGION);
    let mut buf = vec![0u8; 64 * 1024];
    let mut eof = false;
    let mut done = false;
    while !(done && eof) {
        assert!(start.elapsed().as_secs() < 60, "transfer did not finish");
        a.poll(now()).expect("poll a");
        b.poll(now()).expect("poll b");
        done = sender.step(&mut a, &guest).expect("sender");
        conn = conn.or_else(|| b.tcp_accept(listener).ok());
        if let Some(c) = conn {
            while let Ok(n) = b.tcp_recv(c, &mut buf) {
                if n == 0 {
                    if !eof {
                        b.tcp_close(c).expect("close");
                    }
                    eof = true;
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
    }
    assert_eq!(got.len(), REGION);
    assert_eq!(sha256(&got), expect, "the bytes arrive intact");
    assert_eq!(sender.returned(), sender.loaned(), "every loan handed back");
    assert_eq!(sender.loaned(), REGION / LOAN);
    let counters = a.counters();
    let nic_stats = a.nic().stats();
    let (frames, in_region) = (b.nic().payload_frames, b.nic().payload_in_region);
    eprintln!(
        "external TCP over net_ring: {} MiB in {:.2} s, {} external frames, {frames} data frames \
         received ({in_region} with the payload in the region), stack copied {} B, NIC copied {} B, \
         {} retransmissions",
        REGION >> 20,
        start.elapsed().as_secs_f64(),
        counters.tx_external_frames,
        counters.tx_payload_copied_bytes,
        nic_stats.tx_copied_bytes,
        counters.tcp_retransmits
    );
    assert_eq!(counters.tx_payload_copied_bytes, 0, "the stack copied no payload byte");
    assert_eq!(nic_stats.tx_copied_bytes, 0, "the NIC copied no byte");
    assert_eq!(counters.tx_external_bytes, REGION as u64, "all payload sent by reference");
    assert!(frames > 0 && in_region == frames, "every data frame's payload lies in the region");
    drop(a);
    drop(b);
    drop(region);
    drop(guest);
}
