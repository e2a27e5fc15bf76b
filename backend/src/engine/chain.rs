//! Descriptor-chain validation: every descriptor inside guest memory, the right direction, no
//! loop, not longer than the queue allows.

use virtio_queue::DescriptorChain;

use crate::guest_mem::{translate, GuestMem, HostSlice};

/// Why a chain is unusable (answered with EFAULT when its header can still be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainFault {
    /// A descriptor's range is outside guest memory or overflows.
    OutOfRange,
    /// A descriptor has the wrong direction for its queue.
    WrongDirection,
    /// The chain loops, has a bad next index, or has more descriptors than allowed.
    Malformed,
}

/// A walked chain: the host slices of its descriptors in order, and its total length.
#[derive(Debug, Default)]
pub struct Walked {
    /// Host slices of the usable prefix (all of it when `fault` is `None`).
    pub slices: Vec<HostSlice>,
    /// Total bytes of the chain's descriptors (only the usable prefix on fault).
    pub len: u64,
    /// The first problem found, if any.
    pub fault: Option<ChainFault>,
}

/// Walks `chain`, translating each descriptor, which must all be device-writable (`writable`)
/// or all device-readable. Stops at the first fault, keeping the slices before it (so a
/// transmit request's header can still be read to answer it).
pub fn walk(
    chain: DescriptorChain<&GuestMem>,
    mem: &GuestMem,
    writable: bool,
    max_descs: usize,
    out: &mut Walked,
) {
    out.slices.clear();
    out.len = 0;
    out.fault = None;
    let mut count = 0usize;
    let mut last_has_next = true;
    for desc in chain {
        count += 1;
        last_has_next = desc.has_next();
        if count > max_descs {
            out.fault = Some(ChainFault::Malformed);
            return;
        }
        if desc.is_write_only() != writable {
            out.fault = Some(ChainFault::WrongDirection);
            return;
        }
        let len = u64::from(desc.len());
        if translate(mem, desc.addr().0, len, &mut out.slices).is_err() {
            out.fault = Some(ChainFault::OutOfRange);
            return;
        }
        out.len += len;
    }
    // The iterator stops silently on loops (its TTL), bad next indices, unreadable descriptor
    // tables and length overflow: a chain that ends on a descriptor with NEXT set is broken.
    if count == 0 || last_has_next {
        out.fault = Some(ChainFault::Malformed);
    }
}
