//! Descriptor-chain access, the engine's way beside virtio-queue's `Reader`/`Writer`, on the same
//! chains popped from the same ring (docs/architecture.md, "Guest memory"): reading a transmit
//! request's 48-byte fixed part from a two-descriptor chain (request + 1,460 bytes of payload,
//! which the engine hands to the NIC by reference and never copies), and writing a 1,508-byte
//! receive message into a posted two-descriptor buffer.

use std::io::{Read, Write};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use slimtcp_vhost::engine::{walk, Walked};
use slimtcp_vhost::guest_mem::{read_into, GuestMem, GuestWriter};
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use virtio_queue::{DescriptorChain, Queue, QueueT};
use vm_memory::GuestAddress;

const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;
const SIZE: u16 = 256;
const FIXED: usize = 48;
const PAYLOAD: u32 = 1460;
const MAX_DESCS: usize = 64;

/// A ring whose descriptors 0 and 1 form one chain, published again for each pop.
struct OneChain<'m> {
    mock: MockSplitQueue<'m, GuestMem>,
    queue: Queue,
    avail: u16,
}

impl<'m> OneChain<'m> {
    fn new(mem: &'m GuestMem, first: (u64, u32), second: (u64, u32), flags: u16) -> Self {
        let mock = MockSplitQueue::create(mem, GuestAddress(0x1000), SIZE);
        for (i, (addr, len), more) in [(0u16, first, F_NEXT), (1, second, 0)] {
            let d = SplitDescriptor::new(addr, len, flags | more, i + 1);
            mock.desc_table().store(i, RawDescriptor::from(d)).expect("descriptor");
        }
        let queue = mock.create_queue::<Queue>().expect("queue");
        OneChain { mock, queue, avail: 0 }
    }

    fn pop<'a>(&mut self, mem: &'a GuestMem) -> DescriptorChain<&'a GuestMem> {
        self.mock.avail().ring().ref_at(usize::from(self.avail % SIZE)).expect("slot").store(0);
        self.avail = self.avail.wrapping_add(1);
        self.mock.avail().idx().store(self.avail);
        self.queue.pop_descriptor_chain(mem).expect("a chain")
    }
}

fn memory() -> GuestMem {
    GuestMem::from_ranges(&[(GuestAddress(0), 4 << 20)]).expect("guest memory")
}

fn transmit(c: &mut Criterion) {
    let mem = memory();
    let mut ring = OneChain::new(&mem, (0x10_0000, FIXED as u32), (0x20_0000, PAYLOAD), 0);
    let mut walked = Walked::default();
    let mut fixed = [0u8; FIXED];
    let mut g = c.benchmark_group("transmit request: fixed part read, payload located");
    g.bench_function("engine walk + VolatileSlice", |b| {
        b.iter(|| {
            let chain = ring.pop(&mem);
            walk(chain, &mem, false, MAX_DESCS, &mut walked);
            let n = read_into(&walked.slices, 0, &mut fixed);
            black_box((n, walked.len, walked.slices.len()))
        })
    });
    g.bench_function("virtio-queue Reader", |b| {
        b.iter(|| {
            let chain = ring.pop(&mem);
            let mut reader = chain.reader(&mem).expect("reader");
            reader.read_exact(&mut fixed).expect("fixed part");
            black_box(reader.available_bytes())
        })
    });
    g.finish();
}

fn receive(c: &mut Criterion) {
    let mem = memory();
    let mut ring = OneChain::new(&mem, (0x10_0000, 64), (0x20_0000, 2048), F_WRITE);
    let mut walked = Walked::default();
    let message = vec![7u8; FIXED + PAYLOAD as usize];
    let mut g = c.benchmark_group("receive message: 1,508 bytes written");
    g.bench_function("engine walk + GuestWriter", |b| {
        b.iter(|| {
            let chain = ring.pop(&mem);
            walk(chain, &mem, true, MAX_DESCS, &mut walked);
            black_box(GuestWriter::new(&walked.slices).write(&message))
        })
    });
    g.bench_function("virtio-queue Writer", |b| {
        b.iter(|| {
            let chain = ring.pop(&mem);
            let mut writer = chain.writer(&mem).expect("writer");
            writer.write_all(&message).expect("message");
            black_box(writer.bytes_written())
        })
    });
    g.finish();
}

criterion_group!(benches, transmit, receive);
criterion_main!(benches);
