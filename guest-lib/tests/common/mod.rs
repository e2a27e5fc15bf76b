//! Shared test helpers: shared memory, device-side queues (virtio-queue) over our rings.
#![allow(dead_code)]

use std::sync::Arc;

use slimtcp_guest::mem::{BumpAllocator, DmaRegion};
use slimtcp_guest::ring::{alloc_ring, SplitRing};
use slimtcp_guest::vhost_user::{create_memory, memory_region};
use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};

/// Memory plus an allocator over all of it.
pub fn memory(size: usize) -> (Arc<GuestMemoryMmap>, BumpAllocator) {
    let mem = create_memory(size).expect("memfd memory");
    let region: DmaRegion = memory_region(&mem).expect("one region");
    (mem, BumpAllocator::new(region))
}

/// A ring of `size` entries.
pub fn ring(alloc: &mut BumpAllocator, size: u16, event_idx: bool) -> SplitRing {
    alloc_ring(alloc, size, event_idx).expect("ring")
}

/// The device side of `ring`, as virtio-queue implements it.
pub fn device_queue(ring: &SplitRing, event_idx: bool) -> Queue {
    let a = ring.addrs();
    let mut q = Queue::new(ring.size()).expect("queue");
    q.set_size(ring.size());
    q.try_set_desc_table_address(GuestAddress(a.desc)).expect("desc");
    q.try_set_avail_ring_address(GuestAddress(a.avail)).expect("avail");
    q.try_set_used_ring_address(GuestAddress(a.used)).expect("used");
    q.set_event_idx(event_idx);
    q.set_ready(true);
    q
}
