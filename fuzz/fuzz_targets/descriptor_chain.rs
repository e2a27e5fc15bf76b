//! Hostile transmit queues: the tenant engine takes chains whose descriptors (addresses, lengths,
//! flags, next links, avail entries) and request bytes come from the fuzzer, after one real
//! hello. No input may panic the engine, and the device must only ever put heads it was given on
//! the used rings.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::memwire::{link, LinkConfig};
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{Request, RequestBody, SocketId, Version};
use slimtcp_vhost::engine::{Engine, EngineConfig};
use slimtcp_vhost::guest_mem::GuestMem;
use slimtcp_vhost::queues::LocalRings;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress};

const QSIZE: u16 = 16;
const RAM: usize = 64 * 1024;
/// Ring layout per queue: descriptor table, avail ring, used ring.
const RX_BASE: u64 = 0x0000;
const TX_BASE: u64 = 0x1000;
const DESC: u64 = 0x000;
const AVAIL: u64 = 0x200;
const USED: u64 = 0x400;
/// Receive buffers, the harness's hello, and the fuzzer's bytes.
const RX_BUFS: u64 = 0x2000;
const RX_BUF_LEN: u32 = 512;
const HELLO: u64 = 0x4000;
const DATA: u64 = 0x8000;
/// Descriptor the harness keeps for its hello (the fuzzer writes the others).
const HELLO_DESC: u16 = QSIZE - 1;

fn write_desc(mem: &GuestMem, table: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
    let at = GuestAddress(table + u64::from(i) * 16);
    let mut d = [0u8; 16];
    d[0..8].copy_from_slice(&addr.to_le_bytes());
    d[8..12].copy_from_slice(&len.to_le_bytes());
    d[12..14].copy_from_slice(&flags.to_le_bytes());
    d[14..16].copy_from_slice(&next.to_le_bytes());
    mem.write_slice(&d, at).expect("descriptor inside RAM");
}

fn publish(mem: &GuestMem, base: u64, heads: &[u16]) {
    for (slot, h) in heads.iter().enumerate() {
        mem.write_obj(*h, GuestAddress(base + AVAIL + 4 + 2 * slot as u64)).expect("avail slot");
    }
    mem.write_obj(heads.len() as u16, GuestAddress(base + AVAIL + 2)).expect("avail idx");
}

fn queue(base: u64) -> Queue {
    let mut q = Queue::new(QSIZE).expect("queue");
    let addr = |a: u64| (Some(a as u32), Some((a >> 32) as u32));
    let (lo, hi) = addr(base + DESC);
    q.set_desc_table_address(lo, hi);
    let (lo, hi) = addr(base + AVAIL);
    q.set_avail_ring_address(lo, hi);
    let (lo, hi) = addr(base + USED);
    q.set_used_ring_address(lo, hi);
    q.set_ready(true);
    q
}

/// Used-ring entries written so far, as (head, len).
fn used(mem: &GuestMem, base: u64) -> Vec<(u32, u32)> {
    let idx: u16 = mem.read_obj(GuestAddress(base + USED + 2)).expect("used idx");
    (0..idx.min(QSIZE))
        .map(|i| {
            let at = base + USED + 4 + 8 * u64::from(i);
            (mem.read_obj(GuestAddress(at)).expect("id"), mem.read_obj(GuestAddress(at + 4)).expect("len"))
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    // Descriptors 0..15 (10 bytes each from the fuzzer), up to 15 avail entries, then bytes.
    if data.len() < 16 {
        return;
    }
    let mem = Arc::new(GuestMem::from_ranges(&[(GuestAddress(0), RAM)]).expect("guest memory"));
    // Receive queue: 8 well-formed buffers, so answers get written.
    for i in 0..8u16 {
        write_desc(&mem, RX_BASE + DESC, i, RX_BUFS + u64::from(i) * 512, RX_BUF_LEN, 2, 0);
    }
    publish(&mem, RX_BASE, &(0..8).collect::<Vec<_>>());
    // The harness's hello, so requests get past the version check.
    let mut hello = [0u8; 64];
    let n = Request::new(1, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT })
        .emit(&mut hello)
        .expect("hello fits");
    mem.write_slice(&hello[..n], GuestAddress(HELLO)).expect("hello");
    write_desc(&mem, TX_BASE + DESC, HELLO_DESC, HELLO, n as u32, 0, 0);
    // The fuzzer's descriptors: addresses mostly inside the data area (a flag bit lets them
    // point anywhere), any length, flags (NEXT, WRITE, INDIRECT) and next link.
    let (descs, rest) = data.split_at((data.len() / 2).min(10 * usize::from(HELLO_DESC)));
    for (i, d) in descs.chunks_exact(10).enumerate() {
        let raw = u16::from_le_bytes([d[0], d[1]]);
        let addr = if d[9] & 0x80 != 0 {
            u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
        } else {
            DATA + u64::from(raw)
        };
        let len = u32::from(u16::from_le_bytes([d[2], d[3]])) | (u32::from(d[9] & 0x40) << 10);
        write_desc(&mem, TX_BASE + DESC, i as u16, addr, len, u16::from(d[8] & 0x7), u16::from(d[9] & 0x1f));
    }
    let (heads, bytes) = rest.split_at(rest.len().min(usize::from(QSIZE) - 1));
    let mut avail = vec![HELLO_DESC];
    avail.extend(heads.iter().map(|h| u16::from(*h & 0x1f)));
    publish(&mem, TX_BASE, &avail);
    let room = (RAM as u64 - DATA) as usize;
    mem.write_slice(&bytes[..bytes.len().min(room)], GuestAddress(DATA)).expect("data area");

    let (nic, _peer) = link(LinkConfig::default()).expect("memwire link");
    let iface = Interface::new(nic, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), [10, 0, 0, 1].into(), 24));
    let cfg = EngineConfig::new(&iface, 1, QSIZE);
    let mut engine = Engine::new(iface, Clock::real(), cfg);
    let rings = LocalRings::new(vec![queue(RX_BASE), queue(TX_BASE)]);
    for _ in 0..4 {
        // A failing link (the peer end is gone) is an error result, never a panic.
        let _ = engine.step(&rings, &mem);
    }
    for (head, _) in used(&mem, TX_BASE) {
        assert!(avail.contains(&(head as u16)), "the device returned head {head}, which it was never given");
    }
    for (head, len) in used(&mem, RX_BASE) {
        assert!(head < 8 && len <= RX_BUF_LEN, "receive buffer {head} with {len} bytes");
    }
});
