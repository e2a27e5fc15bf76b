//! The driver side of a virtio split virtqueue (virtio 1.2, section 2.7), polled from one
//! thread.
//!
//! - Descriptors come from a free list kept in private memory (`next` shadow), never read
//!   back from the shared table, so a device cannot corrupt our bookkeeping.
//! - Chains are written, then exposed in the avail ring; [`SplitRing::publish`] makes a batch
//!   visible with one `Release` store of `avail.idx` and tells whether the device wants a
//!   notification (EVENT_IDX `avail_event`, else `VRING_USED_F_NO_NOTIFY`).
//! - [`SplitRing::pop_used`] reads `used.idx` with `Acquire` and returns chains in whatever
//!   order the device completed them (zero-copy sends come back out of order), validating the
//!   head the device reports.
//! - Interrupts: a polling driver leaves `used_event` alone (the device signals at most once
//!   per 65536 completions); one about to sleep calls [`SplitRing::arm_interrupt`].

use std::sync::atomic::{fence, AtomicU16, Ordering};

use crate::mem::DmaRegion;

/// Descriptor flag: the chain continues in `next`.
pub const VIRTQ_DESC_F_NEXT: u16 = 1;
/// Descriptor flag: device-writable buffer.
pub const VIRTQ_DESC_F_WRITE: u16 = 2;
/// Used-ring flag: the device does not want notifications (without EVENT_IDX).
pub const VRING_USED_F_NO_NOTIFY: u16 = 1;
/// Avail-ring flag: the driver does not want interrupts (without EVENT_IDX).
pub const VRING_AVAIL_F_NO_INTERRUPT: u16 = 1;

const DESC_SIZE: usize = 16;

/// One buffer of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Guest-physical address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u32,
    /// Device-writable (receive buffers) rather than device-readable.
    pub writable: bool,
}

/// Why the ring refused or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// Not enough free descriptors for the chain.
    #[error("no free descriptors for a chain of {0}")]
    Full(usize),
    /// A chain needs at least one segment.
    #[error("empty chain")]
    EmptyChain,
    /// The device returned a head that is not an outstanding chain.
    #[error("device returned descriptor {0}, which is not an outstanding chain head")]
    BadUsedId(u32),
    /// The device moved `used.idx` further than there are outstanding chains.
    #[error("device advanced used.idx by {0}, more than the outstanding chains")]
    BadUsedIdx(u16),
    /// The queue size is not a power of two in 1..=32768, or the memory is too small.
    #[error("invalid ring layout (size {0})")]
    BadLayout(u16),
}

/// Where the three parts of a ring live, for the transport to tell the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingAddrs {
    /// Descriptor table GPA.
    pub desc: u64,
    /// Avail ring GPA.
    pub avail: u64,
    /// Used ring GPA.
    pub used: u64,
    /// Host addresses of the same (vhost-user's SET_VRING_ADDR takes frontend addresses).
    pub desc_host: u64,
    /// Host address of the avail ring.
    pub avail_host: u64,
    /// Host address of the used ring.
    pub used_host: u64,
}

/// The memory a ring of `size` entries needs: (descriptor table, avail ring, used ring) sizes.
pub fn ring_sizes(size: u16) -> (usize, usize, usize) {
    let n = usize::from(size);
    (DESC_SIZE * n, 6 + 2 * n, 6 + 8 * n)
}

/// Allocates the three parts of a ring from `alloc` (page-aligned each, which is more than
/// virtio's 16/2/4 byte alignments) and builds the ring.
pub fn alloc_ring(
    alloc: &mut crate::mem::BumpAllocator,
    size: u16,
    event_idx: bool,
) -> Result<SplitRing, RingError> {
    let (d, a, u) = ring_sizes(size);
    let desc = alloc.alloc(d, 4096).ok_or(RingError::BadLayout(size))?;
    let avail = alloc.alloc(a, 4096).ok_or(RingError::BadLayout(size))?;
    let used = alloc.alloc(u, 4096).ok_or(RingError::BadLayout(size))?;
    SplitRing::new(size, desc, avail, used, event_idx)
}

/// A split virtqueue, driver side (see the module documentation).
#[derive(Debug)]
pub struct SplitRing {
    size: u16,
    desc: DmaRegion,
    avail: DmaRegion,
    used: DmaRegion,
    event_idx: bool,
    /// Private copy of each free descriptor's `next` link.
    next: Vec<u16>,
    /// Descriptors in the chain of each outstanding head; 0 when the head is not outstanding.
    chain_len: Vec<u16>,
    free_head: u16,
    num_free: u16,
    /// The next avail index to fill (not yet visible to the device when != `published`).
    avail_idx: u16,
    /// The avail index the device has seen.
    published: u16,
    /// The next used index to read.
    last_used: u16,
}

impl SplitRing {
    /// A ring over the given (zeroed or not: they are initialised here) memory pieces.
    pub fn new(
        size: u16,
        desc: DmaRegion,
        avail: DmaRegion,
        used: DmaRegion,
        event_idx: bool,
    ) -> Result<SplitRing, RingError> {
        let (d, a, u) = ring_sizes(size);
        if size == 0
            || !size.is_power_of_two()
            || size > 32768
            || desc.len() < d
            || avail.len() < a
            || used.len() < u
            || desc.gpa() % 16 != 0
            || avail.gpa() % 2 != 0
            || used.gpa() % 4 != 0
        {
            return Err(RingError::BadLayout(size));
        }
        // SAFETY: the three regions are ours (the device does not use the ring before the
        // transport announces it) and at least as long as computed above.
        unsafe {
            std::ptr::write_bytes(desc.host(), 0, d);
            std::ptr::write_bytes(avail.host(), 0, a);
            std::ptr::write_bytes(used.host(), 0, u);
        }
        let next = (1..=size).map(|i| i % size).collect();
        Ok(SplitRing {
            size,
            desc,
            avail,
            used,
            event_idx,
            next,
            chain_len: vec![0; usize::from(size)],
            free_head: 0,
            num_free: size,
            avail_idx: 0,
            published: 0,
            last_used: 0,
        })
    }

    /// Entries in the ring.
    pub fn size(&self) -> u16 {
        self.size
    }

    /// Free descriptors.
    pub fn num_free(&self) -> u16 {
        self.num_free
    }

    /// Chains given to the device and not yet returned.
    pub fn outstanding(&self) -> usize {
        self.chain_len.iter().filter(|n| **n != 0).count()
    }

    /// The addresses to configure in the device.
    pub fn addrs(&self) -> RingAddrs {
        RingAddrs {
            desc: self.desc.gpa(),
            avail: self.avail.gpa(),
            used: self.used.gpa(),
            desc_host: self.desc.host() as u64,
            avail_host: self.avail.host() as u64,
            used_host: self.used.host() as u64,
        }
    }

    /// The head the next [`add`](Self::add) will use, if any descriptor is free (lets callers
    /// keep per-chain data in arrays indexed by head).
    pub fn next_head(&self) -> Option<u16> {
        (self.num_free > 0).then_some(self.free_head)
    }

    fn u16_at(region: &DmaRegion, offset: usize) -> &AtomicU16 {
        debug_assert!(offset + 2 <= region.len() && offset % 2 == 0);
        // SAFETY: in bounds (callers use offsets inside the ring layout checked in `new`),
        // 2-aligned (the regions are 2-aligned and offsets even), and the shared ring fields
        // are only ever accessed atomically or by the device.
        unsafe { &*(region.host().add(offset) as *const AtomicU16) }
    }

    /// Writes a chain and puts its head in the avail ring (not yet visible: see
    /// [`publish`](Self::publish)). Returns the head.
    pub fn add(&mut self, segs: &[Segment]) -> Result<u16, RingError> {
        if segs.is_empty() {
            return Err(RingError::EmptyChain);
        }
        if segs.len() > usize::from(self.num_free) {
            return Err(RingError::Full(segs.len()));
        }
        let head = self.free_head;
        let mut idx = head;
        for (i, seg) in segs.iter().enumerate() {
            let last = i + 1 == segs.len();
            let next = self.next[usize::from(idx)];
            let mut flags = if seg.writable { VIRTQ_DESC_F_WRITE } else { 0 };
            if !last {
                flags |= VIRTQ_DESC_F_NEXT;
            }
            let mut raw = [0u8; DESC_SIZE];
            raw[0..8].copy_from_slice(&seg.gpa.to_le_bytes());
            raw[8..12].copy_from_slice(&seg.len.to_le_bytes());
            raw[12..14].copy_from_slice(&flags.to_le_bytes());
            raw[14..16].copy_from_slice(&(if last { 0 } else { next }).to_le_bytes());
            // SAFETY: idx < size, so the 16 bytes are inside the descriptor table, which the
            // device only reads after the head is published.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    raw.as_ptr(),
                    self.desc.host().add(usize::from(idx) * DESC_SIZE),
                    DESC_SIZE,
                )
            };
            if !last {
                idx = next;
            } else {
                self.free_head = next;
            }
        }
        let n = segs.len() as u16;
        self.num_free -= n;
        self.chain_len[usize::from(head)] = n;
        let slot = 4 + 2 * usize::from(self.avail_idx & (self.size - 1));
        Self::u16_at(&self.avail, slot).store(head.to_le(), Ordering::Relaxed);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        Ok(head)
    }

    /// Makes every added chain visible to the device; true when the device asked to be
    /// notified about them.
    pub fn publish(&mut self) -> bool {
        if self.avail_idx == self.published {
            return false;
        }
        let old = self.published;
        let new = self.avail_idx;
        Self::u16_at(&self.avail, 2).store(new.to_le(), Ordering::Release);
        self.published = new;
        // The device may be about to sleep: its avail_event / flags must be read after our
        // index store is visible (the device does the mirror-image fence).
        fence(Ordering::SeqCst);
        if self.event_idx {
            let event = u16::from_le(
                Self::u16_at(&self.used, 4 + 8 * usize::from(self.size)).load(Ordering::Relaxed),
            );
            need_event(event, new, old)
        } else {
            u16::from_le(Self::u16_at(&self.used, 0).load(Ordering::Relaxed)) & VRING_USED_F_NO_NOTIFY == 0
        }
    }

    /// The next chain the device returned: (head, bytes written by the device).
    pub fn pop_used(&mut self) -> Result<Option<(u16, u32)>, RingError> {
        let used_idx = u16::from_le(Self::u16_at(&self.used, 2).load(Ordering::Acquire));
        if used_idx == self.last_used {
            return Ok(None);
        }
        let pending = used_idx.wrapping_sub(self.last_used);
        if usize::from(pending) > self.outstanding_upper_bound() {
            return Err(RingError::BadUsedIdx(pending));
        }
        let slot = 4 + 8 * usize::from(self.last_used & (self.size - 1));
        let mut raw = [0u8; 8];
        // SAFETY: the slot is inside the used ring; the Acquire load above orders this read
        // after the device's write of the element.
        unsafe { std::ptr::copy_nonoverlapping(self.used.host().add(slot), raw.as_mut_ptr(), 8) };
        let id = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let len = u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]);
        let head = u16::try_from(id).ok().filter(|h| *h < self.size).ok_or(RingError::BadUsedId(id))?;
        let n = self.chain_len[usize::from(head)];
        if n == 0 {
            return Err(RingError::BadUsedId(id));
        }
        // Return the chain to the free list, following our private links.
        let mut tail = head;
        for _ in 1..n {
            tail = self.chain_next(tail);
        }
        self.next[usize::from(tail)] = self.free_head;
        self.free_head = head;
        self.num_free += n;
        self.chain_len[usize::from(head)] = 0;
        self.last_used = self.last_used.wrapping_add(1);
        Ok(Some((head, len)))
    }

    /// The private `next` link inside an outstanding chain (set when the chain was added).
    fn chain_next(&self, idx: u16) -> u16 {
        self.next[usize::from(idx)]
    }

    fn outstanding_upper_bound(&self) -> usize {
        usize::from(self.size - self.num_free)
    }

    /// Asks for an interrupt at the next completion (before sleeping on the call eventfd);
    /// returns true when completions are already waiting (then do not sleep).
    pub fn arm_interrupt(&mut self) -> bool {
        if self.event_idx {
            let off = 4 + 2 * usize::from(self.size);
            Self::u16_at(&self.avail, off).store(self.last_used.to_le(), Ordering::Relaxed);
        } else {
            Self::u16_at(&self.avail, 0).store(0, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        u16::from_le(Self::u16_at(&self.used, 2).load(Ordering::Acquire)) != self.last_used
    }

    /// Tells the device interrupts are not wanted (polling). With EVENT_IDX this parks
    /// `used_event` half a ring-index space away.
    pub fn disarm_interrupt(&mut self) {
        if self.event_idx {
            let off = 4 + 2 * usize::from(self.size);
            Self::u16_at(&self.avail, off)
                .store(self.last_used.wrapping_add(0x8000).to_le(), Ordering::Relaxed);
        } else {
            Self::u16_at(&self.avail, 0).store(VRING_AVAIL_F_NO_INTERRUPT.to_le(), Ordering::Relaxed);
        }
    }
}

/// virtio's `vring_need_event`: whether moving an index from `old` to `new` crossed `event`.
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}
