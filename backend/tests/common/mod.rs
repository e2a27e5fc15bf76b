//! A minimal in-test guest driver: split rings laid out by virtio-queue's mock, descriptors
//! written by hand (so tests can build hostile chains), messages encoded with slimtcp-abi.
#![allow(dead_code, missing_debug_implementations)]

pub mod engine_bench;
pub mod vmm;

use std::collections::HashMap;

use slimtcp_abi::{Request, RxMessage};
use slimtcp_vhost::guest_mem::GuestMem;
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use virtio_queue::Queue;
use vm_memory::{Bytes, GuestAddress};

pub const F_NEXT: u16 = 1;
pub const F_WRITE: u16 = 2;
/// Size of guest RAM in the tests (one region at 0).
pub const RAM: u64 = 4 << 20;
/// Where buffers start (rings sit below).
const BUF_BASE: u64 = 1 << 20;

/// Guest memory with one region of `RAM` bytes at 0.
pub fn guest_memory() -> GuestMem {
    GuestMem::from_ranges(&[(GuestAddress(0), RAM as usize)]).expect("guest memory")
}

/// One ring as the driver sees it. Laid out by virtio-queue's mock, which places the used ring
/// over the upper half of the available ring (it computes the available ring's end in elements,
/// not bytes): publish fewer than about `size / 2` chains over a ring's life, or lay the ring out
/// by hand (`benches/engine_cost.rs` does). Upstream: rust-vmm/vm-virtio#400, moved to
/// rust-vmm/rust-vmm#149 (open as of virtio-queue 0.18).
pub struct Ring<'m> {
    pub mock: MockSplitQueue<'m, GuestMem>,
    size: u16,
    next_desc: u16,
    avail_idx: u16,
    used_seen: u16,
}

impl<'m> Ring<'m> {
    pub fn new(mem: &'m GuestMem, index: u64, size: u16) -> Self {
        let mock = MockSplitQueue::create(mem, GuestAddress(0x1000 + index * 0x4000), size);
        Ring { mock, size, next_desc: 0, avail_idx: 0, used_seen: 0 }
    }

    pub fn queue(&self) -> Queue {
        self.mock.create_queue::<Queue>().expect("queue")
    }

    /// Writes `descs` (addr, len, flags, next: None = the following one) at free table slots
    /// and publishes the first as a chain head.
    pub fn add_raw(&mut self, descs: &[(u64, u32, u16, Option<u16>)]) -> u16 {
        let base = self.next_desc;
        for (i, (addr, len, flags, next)) in descs.iter().enumerate() {
            let idx = (base + i as u16) % self.size;
            let next = next.map(|n| (base + n) % self.size).unwrap_or((idx + 1) % self.size);
            let d = SplitDescriptor::new(*addr, *len, *flags, next);
            self.mock.desc_table().store(idx, RawDescriptor::from(d)).expect("store desc");
        }
        self.next_desc = (base + descs.len() as u16) % self.size;
        let slot = self.avail_idx % self.size;
        self.mock.avail().ring().ref_at(slot as usize).expect("avail slot").store(base);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.mock.avail().idx().store(self.avail_idx);
        base
    }

    /// New used entries (head, len).
    pub fn take_used(&mut self) -> Vec<(u16, u32)> {
        let idx = self.mock.used().idx().load();
        let mut out = Vec::new();
        while self.used_seen != idx {
            let e =
                self.mock.used().ring().ref_at((self.used_seen % self.size) as usize).expect("used").load();
            out.push((e.id() as u16, e.len()));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }
}

/// A bump allocator for buffers in guest memory.
pub struct Alloc {
    next: u64,
}

impl Default for Alloc {
    fn default() -> Self {
        Alloc::new()
    }
}

impl Alloc {
    pub fn new() -> Self {
        Alloc { next: BUF_BASE }
    }

    pub fn take(&mut self, len: u64) -> u64 {
        let a = self.next;
        self.next += (len + 63) & !63;
        assert!(self.next <= RAM, "test guest memory exhausted");
        a
    }
}

/// A queue pair's driver: requests on the transmit ring, posted buffers on the receive ring.
pub struct PairDriver<'m> {
    pub mem: &'m GuestMem,
    pub rx: Ring<'m>,
    pub tx: Ring<'m>,
    pub alloc: Alloc,
    posted: HashMap<u16, u64>,
    pub tx_returned: Vec<u16>,
}

impl<'m> PairDriver<'m> {
    pub fn new(mem: &'m GuestMem, pair: u64, size: u16, alloc_base: u64) -> Self {
        let mut alloc = Alloc::new();
        alloc.next = BUF_BASE + alloc_base;
        PairDriver {
            mem,
            rx: Ring::new(mem, 2 * pair, size),
            tx: Ring::new(mem, 2 * pair + 1, size),
            alloc,
            posted: HashMap::new(),
            tx_returned: Vec::new(),
        }
    }

    /// Posts `n` receive buffers of `len` bytes.
    pub fn post(&mut self, n: usize, len: u32) {
        for _ in 0..n {
            let a = self.alloc.take(u64::from(len));
            let head = self.rx.add_raw(&[(a, len, F_WRITE, None)]);
            self.posted.insert(head, a);
        }
    }

    /// Writes `req`'s fixed bytes into fresh memory and returns (addr, len).
    pub fn fixed(&mut self, req: &Request) -> (u64, u32) {
        let mut buf = [0u8; 64];
        let n = req.emit(&mut buf).expect("emit");
        let a = self.alloc.take(n as u64);
        self.mem.write_slice(&buf[..n], GuestAddress(a)).expect("write");
        (a, n as u32)
    }

    /// Puts bytes into fresh memory.
    pub fn data(&mut self, bytes: &[u8]) -> (u64, u32) {
        let a = self.alloc.take(bytes.len() as u64);
        self.mem.write_slice(bytes, GuestAddress(a)).expect("write");
        (a, bytes.len() as u32)
    }

    /// Sends a request (fixed bytes in one descriptor, `payload` in further ones).
    pub fn request(&mut self, req: &Request, payload: &[&[u8]]) -> u16 {
        let (a, n) = self.fixed(req);
        let mut descs = vec![(a, n, 0u16, None)];
        for p in payload {
            let (pa, pn) = self.data(p);
            descs.push((pa, pn, 0, None));
        }
        let last = descs.len() - 1;
        for (i, d) in descs.iter_mut().enumerate() {
            if i < last {
                d.2 |= F_NEXT;
            }
        }
        self.tx.add_raw(&descs)
    }

    /// Received messages (with their payloads), in used-ring order.
    pub fn messages(&mut self) -> Vec<(RxMessage, Vec<u8>)> {
        let mut out = Vec::new();
        for (head, len) in self.rx.take_used() {
            let a = self.posted.remove(&head).expect("known buffer");
            if len == 0 {
                continue;
            }
            let mut buf = vec![0u8; len as usize];
            self.mem.read_slice(&mut buf, GuestAddress(a)).expect("read");
            let msg = RxMessage::parse(&buf).expect("a well-formed message");
            let payload = buf[msg.payload_range()].to_vec();
            out.push((msg, payload));
        }
        self.tx_returned.extend(self.tx.take_used().into_iter().map(|(h, _)| h));
        out
    }
}
